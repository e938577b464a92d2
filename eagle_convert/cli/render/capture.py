"""Render a capture: the cache written, what this run captured, its speed and size."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cache import CaptureResult


def render_capture(console: Console, res: CaptureResult) -> None:
    d = res.to_dict()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("cache", escape(d["cache"]) + f" [dim]({d['engine']}, aux layer ids {d['aux_layer_ids']})[/dim]")
    kept = d["shards"] - len(d["captured_shards"])
    grid.add_row(
        "shards",
        f"{d['shards']} ({len(d['captured_shards'])} captured now, {kept} kept from an earlier run, verified by sha256)",
    )
    grid.add_row("sequences", f"{d['sequences']} ({d['tokens']} tokens)")
    if d["captured_tokens"]:
        grid.add_row(
            "speed", f"{d['tokens_per_s']:.0f} tokens/s ({d['captured_tokens']} tokens in {d['seconds']:.1f}s)"
        )
    grid.add_row("size", f"{d['bytes'] / 2**20:.1f} MiB ({d['bytes_per_token']:.0f} bytes per token)")
    console.print(grid)
