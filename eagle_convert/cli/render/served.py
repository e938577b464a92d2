"""Render a `ServedReport`: each server's levels (AL, per-position, requests, per-user tokens/s,
TTFT, speedup over the baseline server): the seed's table, for the user's own deployment."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cli.output import figure
from eagle_convert.measure import NATURAL, bucket_label
from eagle_convert.served import ServedReport, ServedServer


def _server_table(s: ServedServer, with_speedup: bool, buckets: bool = False) -> Table:
    k = "no draft" if s.k is None else f"k={s.k}"
    title = (
        f"{escape(s.label)}  [dim]{escape(s.url)} · {escape(s.model.id)} · {escape(s.model.engine or '?')} · {k}[/dim]"
    )
    table = Table(title=title, title_justify="left")
    for col in ("context",) * buckets + ("c", "requests", "tokens", "AL", "per position", "tok/s per user", "TTFT s"):
        table.add_column(col, justify="left" if col == "per position" else "right")
    if with_speedup:
        table.add_column("speedup", justify="right")
    for lv in s.levels:
        failed = f" [red]({len(lv.failed)} failed)[/red]" if lv.failed else ""
        pp = "—" if lv.per_position is None else " ".join(f"{100 * x:.0f}%" for x in lv.per_position)
        row = [bucket_label(lv.bucket)] * buckets + [
            str(lv.concurrency),
            f"{len(lv.outcomes)}{failed}",
            str(lv.counts.generated_tokens),
            figure(lv.acceptance_length, "{:.2f}"),
            pp,
            figure(lv.tokens_per_s, "{:.1f}"),
            figure(lv.ttft_s, "{:.3f}"),
        ]
        if with_speedup:
            x = lv.speedup
            colour = "green" if x and x > 1 else "red"
            row.append("—" if x is None else f"[{colour}]×{x:.2f}[/{colour}]")
        table.add_row(*row)
    return table


def render_served(console: Console, r: ServedReport) -> None:
    s = r.settings
    console.print(
        f"[bold]prompts[/bold]  {r.prompt_count} of {escape(r.suite)}, {s['max_new_tokens']} new tokens each "
        f"(ignore EOS), temperature {s['temperature']}, chat template: {s['chat_template']}"
    )
    buckets = r.buckets != [NATURAL]
    if buckets:
        cut = any(b.prompt.category.startswith("long-") and b.bucket for b in r.sent)
        padded = any(not (b.prompt.category.startswith("long-") and b.bucket) for b in r.sent)
        how = " and ".join(
            [
                *(["prompts padded with neutral filler"] if padded or not cut else []),
                *(["long-context prompts cut"] if cut else []),
            ]
        )
        console.print(
            f"[bold]context[/bold]  {', '.join(bucket_label(b) for b in r.buckets)}: {how} to about N tokens with the "
            f"server's /tokenize ({len(r.sent)} sent, {len(r.skipped)} skipped: longer than their bucket or the "
            "server's context)"
        )
    for server in r.servers:
        console.print(_server_table(server, r.baseline is not None, buckets))
        for lv in server.levels:
            for text in ([lv.no_figure] if lv.no_figure else []) + lv.notes:
                where = f"c={lv.concurrency}" + (f", context {bucket_label(lv.bucket)}" if buckets else "")
                console.print(f"[yellow]{where}: {escape(text)}[/yellow]")
        for line in server.identity:
            console.print(f"[dim]{escape(line)}[/dim]")
    if r.baseline is not None:
        console.print(_server_table(r.baseline, False, buckets))
    console.print(
        "[dim]AL and per-position acceptance from each server's /metrics counter deltas per level; tok/s per "
        "user = the engine's decode rate (vllm:request_decode_time_seconds), else the median over requests of "
        "(tokens - 1) / (last - first streamed token time)"
        + ("; speedup over the baseline server at the same concurrency" if r.baseline else "")
        + f"; {r.seconds:.1f}s[/dim]"
    )
