"""Render a `CheckReport` with rich: the verdict, one row per check, where the time went."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from eagle_convert.check import STAGES, TITLES, CheckReport, format_value
from eagle_convert.cli.output import COLUMN_OVERHEAD, MIN_TEXT_COLUMN, longest_word, shorten_long_words

_STATUS = {
    "pass": "[green]pass[/green]",
    "fail": "[bold red]FAIL[/bold red]",
    "not-run": "[bold red]NOT RUN[/bold red]",
    "skip": "[dim]skip[/dim]",
}


def _cell(value: object) -> str:
    """A figure or threshold as every output writes it (check.checks.format_value), markup escaped."""
    return escape(format_value(value))


def _render_checks(console: Console, report: CheckReport) -> None:
    """One row per check, never splitting a word (as validate's findings): the full table when it
    fits the console's width, else the table without details and the details as a numbered list."""
    rows = [
        (
            TITLES[r.stage],
            r.name,
            r.status,
            format_value(r.figure),
            format_value(r.threshold),
            shorten_long_words(r.message),  # a crafted tensor name in a finding: shortened, with its length
        )
        for r in report.results
    ]
    heads = ("stage", "check", "result", "figure", "threshold")
    words = [max(len(h), longest_word([row[i] for row in rows])) for i, h in enumerate(heads)]
    whole = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(heads)]
    details = max(MIN_TEXT_COLUMN, longest_word([row[5] for row in rows]))

    def fits(widths: list[int]) -> bool:
        return sum(widths) + details + COLUMN_OVERHEAD * (len(heads) + 1) + 1 <= console.width

    # Each short column as wide as its longest cell, else its longest word (wrapping between words);
    # the details get the rest, or go under the table when even that leaves them too narrow.
    widths = whole if fits(whole) else words
    full = fits(widths)
    table = Table(show_lines=False)
    if not full:
        table.add_column("#", justify="right")
    for head, width in zip(heads, widths):
        table.add_column(head, overflow="fold", min_width=width, max_width=width if full else None)
    if full:
        table.add_column("details", overflow="fold", min_width=details)
    for i, (stage, name, status, figure, threshold, message) in enumerate(rows, 1):
        cells = [escape(stage), escape(name), _STATUS[status], _cell(figure), _cell(threshold)]
        table.add_row(*([str(i)] if not full else []), *cells, *([escape(message)] if full else []))
    console.print(table)
    if not full:
        for i, (_stage, name, _status, _figure, _threshold, message) in enumerate(rows, 1):
            console.print(f"[bold]{i}.[/bold] {escape(name)}")
            console.print(Padding(Text(message), (0, 0, 0, 3), expand=False))


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
    _render_checks(console, report)
    times = ", ".join(f"{TITLES[s]} {report.stage_seconds[s]:.1f} s" for s in STAGES if s in report.stage_seconds)
    swaps = f", {report.draft_swaps} draft swap(s)" if report.draft_swaps else ""
    starts = f"{report.engine_starts} engine start(s){swaps}, {report.load_checks} load check(s)"
    console.print(f"[dim]{times}; {starts}; total {report.seconds:.1f} s[/dim]")
    word, rest = report.verdict().split(":", 1)
    style = "bold green" if report.passed else "bold red"
    console.print(Text.assemble((word, style), ":" + rest))
