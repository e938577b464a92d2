"""Render a finished `report`: variants side by side, the checks, throughput, what ran."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from eagle_convert.report import ReportResult


def render_report(console: Console, result: ReportResult) -> None:
    data = result.data
    acc = data["acceptance"]
    s = acc["settings"]
    console.print(f"[bold]eagle-convert report[/bold] {data['draft']} → EAGLE-3.1, target {data['target']}")
    console.print(
        f"[dim]engine {acc['engine']} ({acc.get('engine_version') or '?'}), k={s['k']}, "
        f"T={s['temperature']}, {s['max_new_tokens']} new tokens, {acc['prompts']['count']} runs; "
        f"{len(data['ran'])} stages ran, {len(data['skipped'])} unchanged and skipped, "
        f"{data['seconds']:.0f} s[/dim]"
    )
    table = Table(
        title="Acceptance, side by side (same prompts, buckets and engine)",
        title_justify="left",
        caption="Δ AL vs the input draft; p i: rounds accepted to position i",
        caption_justify="left",
        show_edge=False,
    )
    # A variant's name is what a reader looks up (a folder): never cut; the other columns give way.
    longest = max((len(d["label"]) for d in acc["drafts"]), default=7)
    table.add_column("variant", no_wrap=True, min_width=longest)
    table.add_column("EAGLE", overflow="fold")  # the kind, EAGLE-3 or EAGLE-3.1, as 3 or 3.1
    for col in ("AL", "Δ AL", *(f"p{i + 1}" for i in range(s["k"]))):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("validate", justify="right", overflow="fold")
    base = acc["drafts"][0]["total"]["acceptance_length"]
    for v, d in zip(data["variants"], acc["drafts"]):
        t = d["total"]
        delta = t["acceptance_length"] - base
        colour = "green" if delta > 0 else "red" if delta < 0 else "dim"
        val = v["validate"]
        table.add_row(
            d["label"],
            (d.get("variant") or "?").removeprefix("EAGLE-"),
            f"{t['acceptance_length']:.2f}",
            "—" if d is acc["drafts"][0] else f"[{colour}]{delta:+.2f}[/{colour}]",
            *(f"{100 * p:.0f}%" for p in t["per_position"]),
            "[green]ok[/green]" if val["ok"] else f"[red]{val['errors']} errors[/red]",
        )
    console.print(table)
    for c in data["checks"]:
        mark = "[green]✓[/green]" if c["holds"] else "[red]✗[/red]"
        console.print(f"{mark} {c['claim']}: {c['detail']}")
    for d in (data.get("drift") or {}).get("drafts", []):  # drift's own verdict lines (docs/drift.md)
        colour = {"drifts": "red", "stable": "green"}.get(d["verdict"]["status"], "yellow")
        console.print(f"drift: {d['label']}: [{colour}]{d['verdict']['text']}[/{colour}]")
    if acc.get("throughput"):
        from eagle_convert.cli.render.throughput import render_throughput
        from eagle_convert.measure import ThroughputReport

        console.print()
        render_throughput(
            console,
            ThroughputReport.from_dict(acc["throughput"]),
            {d["label"]: d["total"]["acceptance_length"] for d in acc["drafts"]},
        )
    else:
        console.print(f"[dim]{data['throughput_note']}[/dim]")
    for n in data["notes"]:
        console.print(f"[yellow]Note:[/yellow] {n}")
