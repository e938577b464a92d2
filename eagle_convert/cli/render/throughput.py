"""Render a `ThroughputReport`: per-user decode tokens/s and speedup per concurrency, beside AL."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table

from eagle_convert.measure import ThroughputReport


def render_throughput(console: Console, t: ThroughputReport, al: Mapping[str, float] | None = None) -> None:
    """One row per draft and one for the target alone; `al` maps a draft label to its AL."""
    table = Table(title="Per-user decode tokens/s by concurrency (speedup over no speculation)", title_justify="left")
    table.add_column("draft")
    table.add_column("AL", justify="right")
    for c in t.concurrency:
        table.add_column(f"c={c}", justify="right")
    row = [f"[dim]{t.baseline.label}[/dim]", "1.00"]
    for c in t.concurrency:
        lv = t.baseline.level(c)
        row.append("—" if lv is None else f"{lv.tokens_per_s:.1f}")
    table.add_row(*row)
    for d in t.drafts:
        row = [d.label, "—" if not al or d.label not in al else f"{al[d.label]:.2f}"]
        for c in t.concurrency:
            lv, x = d.level(c), t.speedup(d.label, c)
            if lv is None:
                row.append("—")
                continue
            colour = "green" if x and x > 1 else "red"
            row.append(f"{lv.tokens_per_s:.1f} [{colour}]×{x:.2f}[/{colour}]" if x else f"{lv.tokens_per_s:.1f}")
        table.add_row(*row)
    console.print(table)
    s = t.settings
    console.print(
        f"[dim]{t.engine_version or 'vllm'} on {t.device}; greedy, {s.get('max_new_tokens')} tokens per "
        f"request, max_num_seqs {s.get('max_num_seqs')}; median over "
        f"{min((lv.requests for d in [t.baseline, *t.drafts] for lv in d.levels), default=0)}+ requests "
        "per level, one vLLM build for every row[/dim]"
    )
    if t.note:
        console.print(f"[yellow]Note: {t.note}[/yellow]")
