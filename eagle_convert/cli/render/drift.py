"""Render a `DriftReport`: settings, then per draft its verdict and one row per depth (pooled), and
the per-bucket / per-template rows when there are several groups."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from eagle_convert.cli.output import figure
from eagle_convert.drift import CrossCheck, DepthRow, DraftDrift, DriftGroup, DriftReport
from eagle_convert.measure import NATURAL


def _group_name(g: DriftGroup) -> str:
    bucket = "all" if g.bucket is None else "natural" if g.bucket == NATURAL else f"~{g.bucket}"
    return bucket if g.chat_template is None else f"{bucket}, template {g.chat_template}"


def _depth_table(title: str, rows: list[DepthRow]) -> Table:
    t = Table(title=title, title_justify="left", show_edge=False)
    for name in ("depth", "sink", "context", "own", "fed RMS", "accept", "n"):
        t.add_column(name, justify="right")
    for r in rows:
        t.add_row(
            str(r.depth),
            figure(r.sink),
            figure(r.context),
            figure(r.own),
            figure(r.fed_rms, "{:.3g}"),
            figure(r.acceptance),
            f"{r.accepted}/{r.reached}",
        )
    return t


def _aux_line(g: DriftGroup) -> str:
    parts = [
        f"{'#' + str(a.chunk) if a.layer_id is None else 'layer ' + str(a.layer_id)} {figure(a.rms, '{:.3g}')}"
        + ("" if a.fc_input_rms == a.rms else f" -> {figure(a.fc_input_rms, '{:.3g}')}")
        for a in g.aux
    ]
    return "aux RMS at the fc input: " + ", ".join(parts) if parts else "aux RMS: —"


def _draft(console: Console, d: DraftDrift) -> None:
    flags = ", ".join(f for f, on in (("fc_norm", d.fc_norm), ("norm_output", d.norm_output)) if on) or "no 3.1 flags"
    colour = "red" if d.verdict.status == "drifts" else "green" if d.verdict.status == "stable" else "yellow"
    console.print(f"[bold]{d.label}[/bold] [dim]({d.variant or '?'}; {flags})[/dim]")
    console.print(f"  [{colour}]{d.verdict.text}[/{colour}]")
    console.print(_depth_table("  all prompts", d.overall.depths))
    console.print(f"  {_aux_line(d.overall)}")
    if len(d.groups) > 1:
        for g in d.groups:
            console.print(_depth_table(f"  {_group_name(g)} ({g.prompts} prompts)", g.depths))
    if d.cross_check is not None:
        _cross_check(console, d.cross_check)


def _cross_check(console: Console, c: CrossCheck) -> None:
    t = Table(
        title=f"  cross-check: fed-back RMS, reference vs {c.engine}, {c.matched_rounds} matched rounds "
        f"({c.identical_prompts}/{c.prompts} prompts with identical text)",
        title_justify="left",
        show_edge=False,
    )
    for name in ("depth", "reference", "vLLM", "diff", "worst round", "rounds"):
        t.add_column(name, justify="right")
    for r in c.rows:
        t.add_row(
            str(r.depth),
            figure(r.reference_rms, "{:.4g}"),
            figure(r.vllm_rms, "{:.4g}"),
            figure(r.rel_diff, "{:.2%}"),
            figure(r.max_round_rel_diff, "{:.2%}"),
            str(r.rounds),
        )
    console.print(t)
    worst = max((r.rel_diff for r in c.rows if r.rel_diff is not None), default=None)
    if c.agrees:
        console.print(f"  [green]vLLM agrees: every depth within {c.tolerance:.0%} (largest {worst:.2%})[/green]")
    elif worst is None:
        console.print("  [red]vLLM cross-check: no round matched (the engines decoded other text)[/red]")
    else:
        console.print(f"  [red]vLLM disagrees: a depth differs by {worst:.2%} > {c.tolerance:.0%}[/red]")


def render_drift(console: Console, r: DriftReport) -> None:
    """The whole report on `console`."""
    s = r.settings
    console.print(f"[bold]target[/bold]  {r.target}")
    console.print(f"[bold]engine[/bold]  {r.engine}")
    console.print(
        f"[bold]drafting[/bold]  depth {s['depth']}, greedy, {s['max_new_tokens']} new tokens per prompt, "
        f"sink = first {s['sink_tokens']} tokens; templates {', '.join(s['chat_templates'])}"
    )
    console.print(
        "[dim]shares: attention mass of the draft layer(s) on the sink tokens, the rest of the context and the "
        "draft's own tokens (mean over heads and positions); fed RMS: the hidden state fed back to the next "
        "step; accept: P(accepted | drafts before it accepted)[/dim]"
    )
    for d in r.drafts:
        console.print()
        _draft(console, d)
