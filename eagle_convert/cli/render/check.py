"""Render a `CheckReport` with rich: the verdict, one row per check, where the time went."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.check.run import CheckReport
from eagle_convert.check.stages import STAGES, TITLES, format_value

_STATUS = {"pass": "[green]pass[/green]", "fail": "[bold red]FAIL[/bold red]", "skip": "[dim]skip[/dim]"}


def _cell(value: object) -> str:
    return escape(format_value(value))


def render_check(console: Console, report: CheckReport) -> None:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("draft", escape(report.draft))
    if report.target:
        head.add_row("target", escape(report.target))
    if report.baseline:
        head.add_row("baseline", escape(report.baseline))
    head.add_row("policy", escape(report.policy.source))
    if report.release is not None:
        head.add_row("verdict for", escape(report.release.line()))
    if report.vllm_version:
        head.add_row("vLLM run", report.vllm_version)
    if report.serve is not None:
        head.add_row("serve config", escape(report.serve.line()))
    console.print(head)
    table = Table(show_lines=False)
    for col in ("stage", "check", "result", "figure", "threshold", "details"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        table.add_row(
            TITLES[r.stage], escape(r.name), _STATUS[r.status], _cell(r.figure), _cell(r.threshold), escape(r.message)
        )
    console.print(table)
    times = ", ".join(f"{TITLES[s]} {report.stage_seconds[s]:.1f} s" for s in STAGES if s in report.stage_seconds)
    swaps = f", {report.draft_swaps} draft swap(s)" if report.draft_swaps else ""
    starts = f"{report.engine_starts} engine start(s){swaps}, {report.load_checks} load check(s)"
    console.print(f"[dim]{times}; {starts}; total {report.seconds:.1f} s[/dim]")
    if report.passed:
        console.print("[bold green]PASS[/bold green]: every check the policy asks for passed")
    else:
        failed = [r for r in report.results if r.passed is False]
        stop = f"; stopped after the {TITLES[report.stopped_after]} stage" if report.stopped_after else ""
        console.print(f"[bold red]FAIL[/bold red]: {len(failed)} check(s) failed{stop}")
