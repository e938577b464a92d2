"""Render a `CheckpointDiff`: tensors added / removed / renamed / changed, then the config diff."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cli.render import capped
from eagle_convert.diff import CheckpointDiff, ConfigDiff
from eagle_convert.served_diff import ServedDiff

ABSENT = "[dim](absent)[/dim]"


def short(value: Any) -> str:
    """A config value in one table cell: JSON (strings as they are), cut at 60 characters, escaped."""
    text = json.dumps(value) if not isinstance(value, str) else value
    return escape(text if len(text) <= 60 else text[:57] + "...")


def config_table(cfg: ConfigDiff, *, headers: tuple[str, str, str] = ("key", "a", "b"), removed: str = ABSENT) -> Table:
    """One row per differing config path: added, removed (`removed` in the right column), changed."""
    table = Table(title="config.json", title_justify="left")
    for col in headers:
        table.add_column(col)
    paths, more = capped(cfg.paths())
    for path in paths:
        if path in cfg.added:
            row = (ABSENT, short(cfg.added[path]))
        elif path in cfg.removed:
            row = (short(cfg.removed[path]), removed)
        else:
            row = tuple(short(v) for v in cfg.changed[path])  # type: ignore[assignment]
        table.add_row(escape(path), *row)
    if more:
        table.add_row(more, "", "")
    return table


def render_diff(console: Console, d: CheckpointDiff) -> None:
    console.print(f"[bold]a[/bold] {escape(d.a)}\n[bold]b[/bold] {escape(d.b)}")
    for title, rows, style in (("added (only in b)", d.added, "green"), ("removed (only in a)", d.removed, "red")):
        if rows:
            table = Table(title=f"{title}: {len(rows)}", title_justify="left")
            for col in ("name", "dtype", "shape"):
                table.add_column(col)
            shown, more = capped(rows)
            for r in shown:
                table.add_row(f"[{style}]{escape(r['name'])}[/{style}]", r["dtype"], str(r["shape"]))
            if more:
                table.add_row(more, "", "")
            console.print(table)
    if d.renamed:
        table = Table(title=f"renamed: {len(d.renamed)}", title_justify="left")
        table.add_column("a")
        table.add_column("b")
        shown_pairs, more = capped(d.renamed)
        for a, b in shown_pairs:
            table.add_row(escape(a), escape(b))
        if more:
            table.add_row(more, "")
        console.print(table)
    if d.changed:
        table = Table(title=f"changed: {len(d.changed)}", title_justify="left")
        for col in ("tensor", "dtype", "shape", "max abs diff", "elements differing"):
            table.add_column(col)
        shown_changes, more = capped(d.changed)
        for c in shown_changes:
            name = c.a if c.a == c.b else f"{c.a} → {c.b}"
            dtype = c.dtype[0] if c.dtype[0] == c.dtype[1] else f"{c.dtype[0]} → {c.dtype[1]}"
            shape = str(c.shape[0]) if c.shape[0] == c.shape[1] else f"{c.shape[0]} → {c.shape[1]}"
            diff = "n/a" if c.max_abs_diff is None else f"{c.max_abs_diff:.6g}"
            count = "" if c.differing_elements is None else f"{c.differing_elements:,}"
            table.add_row(escape(name), dtype, shape, diff, count)
        if more:
            table.add_row(more, "", "", "", "")
        console.print(table)
    cfg = d.config
    if cfg:
        console.print(config_table(cfg))
    what = "identical" if d.compared_data else "same dtype and shape (data not compared)"
    summary = (
        f"{len(d.added)} added, {len(d.removed)} removed, {len(d.renamed)} renamed, {len(d.changed)} changed, "
        f"{d.identical} {what}; config: {len(cfg.paths())} keys differ"
    )
    console.print(("[green]no differences[/green]; " if d.same else "") + summary)


def render_served(console: Console, d: ServedDiff) -> None:
    """`diff --served`: the verdict, the served differences, and the raw differences that vanish as served."""
    head = f"as served by vLLM {d.release}: "
    if d.same:
        console.print(head + "[green]the same function[/green]")
    else:
        table = Table(title=f"served differences: {len(d.differences)}", title_justify="left")
        for col in ("what", "a", "b", "note"):
            table.add_column(col)
        shown, more = capped(d.differences)
        for x in shown:
            table.add_row(escape(x.key), short(x.a), short(x.b), escape(x.note))
        if more:
            table.add_row(more, "", "", "")
        console.print(table)
        console.print(head + f"[yellow]different functions[/yellow] ({len(d.differences)} differences)")
    if d.equivalent:
        shown_eq, more_eq = capped(d.equivalent)
        console.print(f"equal as served ({len(d.equivalent)}):")
        for line in [*(escape(e) for e in shown_eq), *([more_eq] if more_eq else [])]:
            console.print(f"  {line}", soft_wrap=True)
