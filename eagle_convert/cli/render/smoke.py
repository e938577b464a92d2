"""Render a `SmokeReport`: settings, drafts side by side with differences, AL per category x bucket."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.measure import NATURAL, Counts, DraftResult, SmokeReport


def bucket_name(bucket: int | None) -> str:
    if bucket is None:
        return "all"
    return "natural" if bucket == NATURAL else f"~{bucket}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _signed(x: float, fmt: str = "{:+.2f}") -> str:
    text = fmt.format(x)
    if abs(x) < 1e-9:
        return f"[dim]{text}[/dim]"
    return f"[green]{text}[/green]" if x > 0 else f"[red]{text}[/red]"


def _tps(c: Counts) -> str:
    return "—" if c.tokens_per_s is None else f"{c.tokens_per_s:.1f}"


def _header(console: Console, r: SmokeReport) -> None:
    s = r.settings
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("target", r.target)
    grid.add_row(
        "engine",
        f"{r.engine} [dim]({r.engine_version or '?'})[/dim]"
        + (f"  tensor parallel {s['tensor_parallel_size']}" if r.engine == "vllm" else ""),
    )
    grid.add_row(
        "decoding",
        f"k={s['k']} speculative tokens, temperature {s['temperature']}, "
        f"{s['max_new_tokens']} new tokens per prompt (ignore EOS), seed {s['seed']}",
    )
    cats = Counter(p.category for p in r.prompts.prompts)
    grid.add_row(
        "prompts",
        f"{len(r.prompts.prompts)} runs of {escape(r.prompts.suite)}: "
        + ", ".join(f"{c} {n}" for c, n in cats.items())
        + f"; chat template: {r.prompts.chat_template}",
    )
    for line in r.prompts.refused:
        grid.add_row("refused", f"[yellow]{escape(line)}[/yellow]")
    grid.add_row(
        "buckets",
        ", ".join(bucket_name(b) for b in r.buckets)
        + " [dim](context lengths in prompt tokens; padded with filler text)[/dim]",
    )
    if r.prompts.skipped:
        grid.add_row(
            "skipped",
            f"[yellow]{len(r.prompts.skipped)}[/yellow] prompt×bucket runs "
            f"[dim](e.g. {r.prompts.skipped[0].id} @ {bucket_name(r.prompts.skipped[0].bucket)}: "
            f"{r.prompts.skipped[0].reason})[/dim]",
        )
    console.print(grid)


def _title(d: DraftResult) -> str:
    return d.label + (f"\n[dim]{d.variant}[/dim]" if d.variant else "")


def _summary(console: Console, r: SmokeReport) -> None:
    k = r.settings["k"]
    table = Table(title=f"Acceptance (AL = 1 + accepted / draft rounds; max {k + 1})", title_justify="left")
    table.add_column("metric", style="bold")
    for d in r.drafts:
        table.add_column(_title(d), justify="right")
    for x in r.deltas:
        table.add_column(f"Δ {x.draft}\n[dim]vs {x.baseline}[/dim]", justify="right")
    totals = [d.total for d in r.drafts]

    def row(name: str, values: list[str], deltas: list[str] | None = None) -> None:
        table.add_row(name, *values, *(deltas if deltas is not None else [""] * len(r.deltas)))

    base_al = totals[0].acceptance_length
    row(
        "acceptance length (AL)",
        [f"[bold]{c.acceptance_length:.2f}[/bold]" for c in totals],
        [
            _signed(x.acceptance_length) + (f" ({100 * x.acceptance_length / base_al:+.1f}%)" if base_al else "")
            for x in r.deltas
        ],
    )
    row(
        "draft acceptance rate",
        [_pct(c.acceptance_rate) for c in totals],
        [_signed(100 * x.acceptance_rate, "{:+.1f} pp") for x in r.deltas],
    )
    for i in range(k):
        row(
            f"  accepted at position {i + 1}",
            [_pct(c.per_position[i]) if i < len(c.per_position) else "—" for c in totals],
            [_signed(100 * x.per_position[i], "{:+.1f} pp") if i < len(x.per_position) else "—" for x in r.deltas],
        )
    row("draft rounds", [str(c.num_drafts) for c in totals])
    row("draft tokens", [str(c.num_draft_tokens) for c in totals])
    row("accepted tokens", [str(c.num_accepted) for c in totals])
    row("target forward passes", [str(c.target_forwards) for c in totals])
    row("generated tokens", [str(c.generated_tokens) for c in totals])
    row("tokens per target forward", [f"{c.tokens_per_forward:.2f}" for c in totals])
    row(
        "tokens/s",
        [_tps(c) for c in totals],
        [("—" if x.tokens_per_s_ratio is None else f"×{x.tokens_per_s_ratio:.2f}") for x in r.deltas],
    )
    load = "engine start or swap s" if r.engine == "vllm" else "draft load s"
    row(load, ["—" if d.load_seconds is None else f"{d.load_seconds:.1f}" for d in r.drafts])
    console.print(table)


def _groups(console: Console, r: SmokeReport) -> None:
    with_groups = [d for d in r.drafts if d.per_request]
    if not with_groups:
        console.print(
            "[dim]Per-category / per-bucket numbers are not available: this vLLM returned only "
            "engine-wide counters (see docs/smoke.md).[/dim]"
        )
        return
    multi = len(r.buckets) > 1
    table = Table(title="AL by category" + (" and context bucket" if multi else ""), title_justify="left")
    table.add_column("category", style="bold")
    table.add_column("bucket")
    table.add_column("runs", justify="right")
    table.add_column("mean prompt tokens", justify="right")
    for d in with_groups:
        table.add_column(_title(d), justify="right")
    for x in r.deltas:
        table.add_column(f"Δ {x.draft}", justify="right")
    if r.engine == "reference":
        table.add_column("tokens/s\n[dim]per draft[/dim]", justify="right")
    keys: list[tuple[str, int | None]] = [(c, b) for c in r.categories for b in r.buckets]
    if multi:
        keys += [("all", b) for b in r.buckets]
    first = with_groups[0]
    prev: str | None = None
    for cat, bucket in keys:
        base = first.group(cat, bucket)
        if base is None:
            continue
        if multi and prev is not None and cat != prev:
            table.add_section()
        prev = cat
        cells = []
        for d in with_groups:
            c = d.group(cat, bucket)
            cells.append("—" if c is None else f"{c.acceptance_length:.2f}")
        deltas = []
        for x in r.deltas:
            v = next((v for c, b, v in x.groups if c == cat and b == bucket), None)
            deltas.append("—" if v is None else _signed(v))
        extra = (
            [" / ".join(_tps(d.group(cat, bucket) or Counts()) for d in with_groups)] if r.engine == "reference" else []
        )
        style = "dim" if cat == "all" else None
        table.add_row(
            cat,
            bucket_name(bucket),
            str(base.requests),
            str(base.prompt_tokens // max(base.requests, 1)),
            *cells,
            *deltas,
            *extra,
            style=style,
        )
    console.print(table)


def render_smoke(console: Console, report: SmokeReport) -> None:
    _header(console, report)
    console.print()
    _summary(console, report)
    console.print()
    _groups(console, report)
    if any(d.k_sweep is not None for d in report.drafts):
        from eagle_convert.cli.render.ksweep import render_k_sweep

        console.print()
        render_k_sweep(console, report.drafts)
    if report.throughput is not None:
        from eagle_convert.cli.render.throughput import render_throughput

        console.print()
        render_throughput(console, report.throughput, {d.label: d.total.acceptance_length for d in report.drafts})
    _sampling_warnings(console, report)


def _sampling_warnings(console: Console, r: SmokeReport) -> None:
    """A loud warning per draft whose engine failed the T -> 0 sampling control: its AL at this
    temperature measures the engine's broken sampler, not the draft."""
    for d in r.drafts:
        c = d.sampling_control
        if c is None or c.passed:
            continue
        console.print()
        console.print(f"[bold red]WARNING: the engine failed the sampling control for {d.label}[/]: {c.summary()}.")
        console.print(
            f"[bold red]Its AL at T={r.settings.get('temperature')} measures a broken speculative sampler, "
            "not the draft; compare drafts at T=0 or with --engine reference.[/]"
        )
        if c.cause:
            console.print(f"[red]Cause: {c.cause}[/]")
