"""Render an `UpgradePlan` (the --dry-run output and the header of a real run), its result, and progress."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cli.render.diff import ABSENT, config_table
from eagle_convert.cli.render.inspect import human_bytes
from eagle_convert.diff import config_diff
from eagle_convert.draft import CARD_FILE, CONFIG_FNAME, PROVENANCE_KEY
from eagle_convert.io import INDEX_FILENAME
from eagle_convert.upgrade import UpgradePlan, UpgradeResult

if TYPE_CHECKING:
    from eagle_convert.upgrade import LinkPlan

HARDLINK_NOTE = (
    "hard links share the inode with the input: a program that writes into either file in place "
    "changes both (eagle-convert never does; deleting either folder is safe)"
)


def render_plan(console: Console, plan: UpgradePlan, out: Path, *, dry_run: bool, link: LinkPlan | None = None) -> None:
    """The whole plan for --dry-run; just the summary and warnings before a real run."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row(
        "upgrade", f"{escape(plan.source)} [dim]({plan.source_layout}, {plan.storage})[/dim] → {escape(str(out))}"
    )
    storage = "linked input files + a new shard, indexed" if link else "sharded" if plan.sharded else "single file"
    grid.add_row("output", f"layout {plan.layout}, {plan.config_format} config, {storage}, safetensors")
    grid.add_row(
        "adds",
        f"{plan.num_aux} × fc_norm.i.weight [{plan.target_hidden_size}] {plan.norm_dtype}, "
        f"{plan.norm_init.method if plan.norm_init else 'ones'}; "
        f"fc_norm=true, norm_output={'true' if plan.norm_output else 'false'}",
    )
    grid.add_row("aux layer ids", f"{list(plan.aux.ids)} [dim](from {escape(plan.aux.detail)})[/dim]")
    if link is not None:
        grid.add_row(
            "weights",
            f"{len(link.linked)} input files ({human_bytes(link.linked_bytes)}) linked, not copied: "
            f"reflink, else hard link, else copy; fc_norm weights in {link.shard.filename}; new index",
        )
    console.print(grid)
    if not dry_run:
        _notes(console, plan)
        return
    if plan.renames:
        table = Table(title=f"renames ({len(plan.renames)})", title_justify="left")
        table.add_column("input name")
        table.add_column("output name")
        for a, b in plan.renames.items():
            table.add_row(escape(a), escape(b))
        console.print(table)

    table = Table(title="additions", title_justify="left")
    for col in ("name", "dtype", "shape", "value", "file"):
        table.add_column(col)
    where = {t.name: f.filename for f in ([link.shard] if link else plan.files) for t in f.tensors}
    for i, t in enumerate(plan.additions):
        value = f"{plan.norm_init.method} {plan.norm_init.summary(i)}" if plan.norm_init else "ones"
        table.add_row(escape(t.name), t.dtype, str(list(t.shape)), value, where[t.name])
    console.print(table)

    diff = config_diff(plan.config_before, {k: v for k, v in plan.config_after.items() if k != PROVENANCE_KEY})
    table = config_table(diff, headers=("key", "before", "after"), removed="[dim](removed)[/dim]")
    table.add_row(PROVENANCE_KEY, ABSENT, "provenance: tool version, source, what changed")
    console.print(table)

    if link is not None:
        _link_files(console, link)
    else:
        table = Table(title="output files", title_justify="left")
        for col, justify in (("file", "left"), ("tensors", "right"), ("bytes", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        counts = {f.filename: str(len(f.tensors)) for f in plan.files}
        for name, size in plan.output_files.items():
            table.add_row(name, counts.get(name, ""), f"{size:,}")
        table.add_row(
            "[bold]total[/bold]",
            str(sum(len(f.tensors) for f in plan.files)),
            f"[bold]{plan.total_bytes:,}[/bold] ({human_bytes(plan.total_bytes)})",
        )
        console.print(table)
    _notes(console, plan)
    console.print("[bold]dry run:[/bold] nothing was written")


def _link_files(console: Console, link: LinkPlan) -> None:
    table = Table(title="output files", title_justify="left")
    # A file name is never cut short: its column is as wide as the longest, and "how" as its longest
    # word (the input's name); the bytes column wraps its note between words.
    longest = max([len(f.filename) for f in link.linked] + [len(f.source) for f in link.linked] + [4])
    for col, justify in (("file", "left"), ("how", "left"), ("tensors", "right"), ("bytes", "right")):
        table.add_column(col, justify=justify, min_width=longest if col in ("file", "how") else None)  # type: ignore[arg-type]
    for f in link.linked:
        table.add_row(escape(f.filename), f"link to input {escape(f.source)}", str(f.tensors), f"{f.bytes:,}")
    table.add_row(link.shard.filename, "new", str(len(link.shard.tensors)), f"{link.shard.total_bytes:,}")
    for name in (INDEX_FILENAME, CONFIG_FNAME, CARD_FILE):
        if name in link.output_files:
            table.add_row(name, "new", "", f"{link.output_files[name]:,}")
    table.add_row(
        "[bold]written[/bold]",
        "when every link works",
        "",
        f"[bold]{link.new_bytes:,}[/bold] ({human_bytes(link.new_bytes)})",
    )
    console.print(table)
    console.print(
        f"[dim]links: a reflink is an independent copy-on-write file; {HARDLINK_NOTE}; "
        "where neither is possible the file is copied[/dim]"
    )


def _notes(console: Console, plan: UpgradePlan) -> None:
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if plan.not_carried:
        console.print(f"[dim]not carried over: {escape(', '.join(plan.not_carried))}[/dim]")


def render_result(console: Console, plan: UpgradePlan, result: UpgradeResult) -> None:
    for name, method in result.links.items():
        if method == "hardlink":
            console.print(f"[yellow]hard link:[/yellow] {escape(name)}: {HARDLINK_NOTE}")
        elif method == "copy":
            console.print(
                f"[yellow]copied[/yellow] {escape(name)}: no link was possible "
                f"({escape(result.link_notes.get(name, ''))})"
            )
        else:
            console.print(f"reflinked {escape(name)} (copy-on-write: independent of the input)")
    check = "verified byte-for-byte" if result.verified else "[yellow]not verified (--no-verify)[/yellow]"
    if result.links and result.verified:
        check = "verified (links by inode or extents, new files byte-for-byte)"
    new = sum(n for f, n in result.files.items() if result.links.get(f, "copy") == "copy")
    size = human_bytes(result.total_bytes) + (f" ({human_bytes(new)} written)" if result.links else "")
    console.print(
        f"[green]wrote[/green] {escape(str(result.out))}: {len(result.files)} files, "
        f"{size} in {result.write_seconds:.2f}s; {check}"
        + (f" in {result.verify_seconds:.2f}s" if result.verified else "")
    )
