"""Render a `ValidationReport` with rich, and the finding-code table as Markdown for the docs.

python -m eagle_convert.cli.render.validate --markdown   # the table between the markers in docs/findings.md
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from eagle_convert.cli.output import COLUMN_OVERHEAD, MIN_TEXT_COLUMN, longest_word, shorten_long_words
from eagle_convert.engines import ServeCommand
from eagle_convert.validate import AS_TRAINED, FAILS, VERDICTS, Finding, Matrix, ValidationReport, code_table
from eagle_convert.vllm_model import KNOWN_RELEASES

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: Rows of one finding code in the table; the summary line and --json count every finding.
MAX_PER_CODE = 20
MARK_START, MARK_END = "<!-- findings:start -->", "<!-- findings:end -->"


def render_validate(console: Console, report: ValidationReport, *, strict: bool = False) -> None:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", escape(report.source) + (" (hub)" if report.is_hub else ""))
    if report.serving is not None:
        head.add_row("engine", escape(report.serving.line()))
    if report.vllm:
        head.add_row("vLLM release", escape(report.vllm.line()))
    if report.fingerprints is not None:
        head.add_row("vLLM source", escape(report.fingerprints.line()))
    if report.info:
        info = report.info
        cls = report.vllm_class or f"none ({info.vllm_architecture or 'no architectures'} is not registered)"
        head.add_row("draft", f"{info.layout} layout, {info.variant}; vLLM builds {cls}")
    if report.target:
        head.add_row("target", escape(report.target))
    if report.serve is not None:
        head.add_row("serve config", escape(report.serve.line()))
    if note := report.notes.get("target_weights"):
        head.add_row("target weights", escape(note))
    if report.engine:
        head.add_row("vLLM", _engine_line(report.engine))
    if report.deep:
        d = report.deep
        head.add_row("deep scan", f"{d.tensors} tensors, {d.bytes_read / 2**20:.1f} MiB in {d.seconds:.2f} s")
    head.add_row("checks", ", ".join(report.families_run))
    console.print(head)
    if report.findings:
        shown, left_out = _capped(report.sorted_findings())
        _render_findings(console, shown)
        for code, n in left_out.items():
            console.print(f"[dim]... and {n:,} more {code} (--json lists all)[/dim]")
    render_serve_commands(console, report.serve_commands)
    counts = report.counts()
    summary = f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
    if report.failed(strict=strict):
        why = " (--strict: warnings fail)" if strict and not report.errors else ""
        console.print(f"[bold red]FAILED[/bold red]: {summary}{why}")
    else:
        console.print(f"[bold green]OK[/bold green]: {summary}")


_VERDICT_STYLE = {AS_TRAINED: "green", FAILS: "bold red"}


def render_matrix(console: Console, matrix: Matrix, *, strict: bool = False) -> None:
    """One row per known vLLM release, the sentence the model card prints, and the default release's verdict."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", escape(matrix.source))
    if matrix.layout:
        head.add_row("draft", f"{matrix.layout} layout, {matrix.variant}")
    if matrix.target:
        head.add_row("target", escape(matrix.target))
    gates = [r.label for r in matrix.engine_rows]
    if matrix.vllm_rows:
        gates.insert(0, matrix.default.line())
    head.add_row("exit status", f"for {escape(', '.join(gates))}")
    console.print(head)
    table = Table.grid(padding=(0, 2))
    # fixed widths: a row reads the same whichever verdicts the other rows have
    table.add_column(min_width=max(map(len, [*KNOWN_RELEASES, *(r.label for r in matrix.engine_rows)])))
    table.add_column(min_width=max(map(len, VERDICTS)))
    table.add_column(overflow="fold")
    table.add_row("[bold]release[/bold]", "[bold]verdict[/bold]", "[bold]findings that change serving[/bold]")
    for row in matrix.rows:
        style = _VERDICT_STYLE.get(row.verdict, "yellow")
        name = row.release if row.engine == "vllm" else row.label
        table.add_row(escape(name), f"[{style}]{row.verdict}[/{style}]", escape(row.why))
    console.print(table)
    console.print(escape(matrix.summary()))
    render_serve_commands(console, matrix.serve_commands)
    row = matrix.default_row if matrix.vllm_rows else matrix.engine_rows[0]
    for extra in matrix.engine_rows:  # a failing engine row is what the exit status says
        if extra.report.failed(strict=strict) and not row.report.failed(strict=strict):
            row = extra
    report = row.report
    counts = report.counts()
    summary = f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
    where = row.label
    console.print("each release's findings: validate DRAFT --for ENGINE==VERSION")
    if matrix.failed(strict=strict):
        why = " (--strict: warnings fail)" if strict and not report.errors else ""
        console.print(f"[bold red]FAILED[/bold red] on {where}: {summary}{why}")
    else:
        console.print(f"[bold green]OK[/bold green] on {where}: {summary}")


def render_serve_commands(console: Console, commands: Sequence[ServeCommand]) -> None:
    """Each engine release's serve command (and the YAML file it names), never wrapped inside a word."""
    for cmd in commands:
        console.print(f"[bold]serve on {escape(cmd.label)}[/bold]:")
        for line in cmd.shell_lines(console.width if console.width < 100 else 100):
            console.print(Text(line), soft_wrap=True)
        if cmd.config_text is not None:
            console.print(f"[dim]{escape(cmd.config_file or '')}:[/dim]")
            console.print(Text(cmd.config_text.rstrip("\n")), soft_wrap=True)
        for note in cmd.notes:
            console.print(Text.assemble(("note: ", "dim"), note))


def _capped(findings: Sequence[Finding]) -> tuple[list[Finding], dict[str, int]]:
    """At most MAX_PER_CODE findings of each code, and how many of each code were left out."""
    seen: dict[str, int] = {}
    shown = []
    for f in findings:
        seen[f.code] = seen.get(f.code, 0) + 1
        if seen[f.code] <= MAX_PER_CODE:
            shown.append(f)
    return shown, {code: n - MAX_PER_CODE for code, n in seen.items() if n > MAX_PER_CODE}


def _render_findings(console: Console, findings: Sequence[Finding]) -> None:
    """One table row per finding, never splitting a word: the full table when it fits the console's
    width, else a table of level and code with the findings, where and fix as a list under it. A
    word longer than a line (a crafted tensor name) is shown shortened, with its length."""
    short = shorten_long_words
    findings = [
        replace(
            f,
            message=short(f.message),
            fix=short(f.fix),
            tensor=None if f.tensor is None else short(f.tensor),
            field=None if f.field is None else short(f.field),
        )
        for f in findings
    ]
    levels = longest_word([f.level for f in findings] + [f.impact for f in findings])
    codes = longest_word([f"{f.code} {f.slug}" for f in findings])
    wheres = longest_word([f.where for f in findings])
    texts = max(MIN_TEXT_COLUMN, longest_word([f.message for f in findings]))
    fixes = max(MIN_TEXT_COLUMN, longest_word([f.fix for f in findings]))
    widths = {"level": levels, "code": codes, "where": wheres, "finding": texts, "fix": fixes}
    widths = {col: max(width, len(col)) for col, width in widths.items()}  # a header is never narrower
    if sum(widths.values()) + COLUMN_OVERHEAD * len(widths) + 1 <= console.width:
        table = Table(show_lines=False)
        for col, width in widths.items():
            table.add_column(col, overflow="fold", min_width=width)
        for f in findings:
            table.add_row(_level(f), f"{f.code} {f.slug}", escape(f.where), escape(f.message), escape(f.fix))
        console.print(table)
        return
    table = Table(show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("level", overflow="fold", min_width=levels)
    table.add_column("code", overflow="fold", min_width=codes)
    for i, f in enumerate(findings, 1):
        table.add_row(str(i), _level(f), f"{f.code}\n{f.slug}")
    console.print(table)
    for i, f in enumerate(findings, 1):
        where = f" [dim]at[/dim] {escape(f.where)}" if f.where else ""
        console.print(f"[bold]{i}.[/bold] {f.code}{where}")
        console.print(Padding(Text(f.message), (0, 0, 0, 3), expand=False))
        console.print(Padding(Text.assemble(("fix: ", "dim"), f.fix), (0, 0, 0, 3), expand=False))


def _level(f: Finding) -> str:
    style = _STYLE[f.level]
    return f"[{style}]{f.level}[/{style}]\n{f.impact}"


def _engine_line(engine: dict) -> str:
    features = engine.get("features") or {}
    names = (
        "fc_norm",
        "norm_output",
        "speculators_propagates_31_flags",
        "reads_eagle_config_aux_ids",
        "num_aux_hidden_states",
        "qwen3_eagle3",
        "mla_eagle3",
        "mla_fc_norm_applied",
        "norm_before_fc",
    )
    feats = " ".join(f"{n}={'yes' if features.get(n) else 'no'}" for n in names if n in features)
    status = "loaded" if not engine.get("error") else "load failed"
    return f"{engine.get('vllm_version') or '?'} ({status} in {engine.get('seconds', 0):.1f} s); {feats}"


def findings_markdown() -> str:
    """The finding-code table (generated from schemas/findings.json)."""
    lines = [
        "| code | slug | level | serving | meaning | why it matters | fix |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in code_table().values():
        cells = [f"`{c.code}`", f"`{c.slug}`", c.level, c.impact, c.title, c.why, c.fix]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m eagle_convert.cli.render.validate --markdown")
    print(findings_markdown())
