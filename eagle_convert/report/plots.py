"""`report`'s PNGs: AL per variant, acceptance per draft position, AL per context bucket (and per
category), per-user speedup by concurrency when it was measured, and one overview of them all.

Drawn from the report's `acceptance` block (`SmokeReport`) and throughput table with matplotlib's
Agg backend (no display), in smoke's plot style (`measure/style.py`: a variant has one colour, dash
and marker everywhere, one legend below the panels, a caption saying what was measured). The
positions chart is smoke's (`plot_positions`), so both commands draw it alike. report.md shows
every file in `PLOTS` (report.png first, al.png beside the side-by-side table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.extras import require
from eagle_convert.measure import (
    SmokeReport,
    bucket_label,
    draft_names,
    draft_style,
    finish,
    model_name,
    plot_grouped_al,
    plot_positions,
    smoke_caption,
)

PLOTS = ("report.png", "al.png", "positions.png", "buckets.png", "speedup.png")
FONT = 8
_SMALL: dict[str, Any] = {"value_fontsize": FONT - 1, "tick_fontsize": FONT, "mark_max": False}  # a panel's fonts


def _al_panel(ax: Any, rep: SmokeReport) -> None:
    k = rep.settings["k"]
    names = draft_names(rep)
    vals = [d.total.acceptance_length for d in rep.drafts]
    colours = [draft_style(j)["color"] for j in range(len(vals))]
    for j, d in enumerate(rep.drafts):
        bars = ax.bar([j], [vals[j]], color=colours[j], width=0.6, label=names[d.label])
        ax.bar_label(bars, fmt="%.2f", fontsize=FONT, padding=2)
    ax.set_xticks(range(len(vals)), [d.label for d in rep.drafts], fontsize=FONT)
    ax.axhline(k + 1, color="grey", linestyle="--", linewidth=1)
    ax.axhline(1, color="grey", linestyle=":", linewidth=1)
    ax.set_ylim(0, k + 1.6)
    ax.text(-0.45, k + 1.02, f"max {k + 1} (k={k})", ha="left", va="bottom", fontsize=FONT, color="grey")
    ax.set_xlabel("variant")
    ax.set_ylabel("acceptance length (AL, tokens per round)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("AL per variant (all prompts)")


def _runs(rep: SmokeReport, category: str, bucket: int | None) -> str:
    c = rep.drafts[0].group(category, bucket) if rep.drafts else None
    return f"\n({c.requests} runs)" if c is not None else ""


def _buckets_panel(ax: Any, rep: SmokeReport) -> None:
    bks = rep.buckets
    keys: list[tuple[str, int | None]] = [("all", b) for b in bks] if len(bks) > 1 else [("all", None)]
    labels = [bucket_label(b) + _runs(rep, c, kb) for b, (c, kb) in zip(bks, keys)]
    plot_grouped_al(ax, rep, keys, labels, "AL per context length", xlabel="context length (prompt tokens)", **_SMALL)


def _categories_panel(ax: Any, rep: SmokeReport) -> None:
    bucket = None if len(rep.buckets) > 1 else rep.buckets[0]
    keys = [(c, bucket) for c in rep.categories]
    labels = [c + _runs(rep, c, b) for c, b in keys]
    plot_grouped_al(ax, rep, keys, labels, "AL per prompt category", xlabel="prompt category", **_SMALL)


def _speedup_panel(ax: Any, rep: SmokeReport) -> None:
    t = rep.throughput
    drafts = t.drafts
    width = 0.8 / max(len(drafts), 1)
    names = draft_names(rep)
    index = {d.label: j for j, d in enumerate(rep.drafts)}
    for j, d in enumerate(drafts):
        vals = [t.speedup(d.label, c) or 0.0 for c in t.concurrency]
        xs = [i + (j - (len(drafts) - 1) / 2) * width for i in range(len(t.concurrency))]
        colour = draft_style(index.get(d.label, j))["color"]
        bars = ax.bar(xs, vals, width=width * 0.95, label=names.get(d.label, d.label), color=colour)
        ax.bar_label(bars, fmt="%.2f×", fontsize=FONT - 1, padding=2)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(t.concurrency)), [str(c) for c in t.concurrency], fontsize=FONT)
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("speedup (× per-user decode tokens/s of no speculation)")
    ax.set_title(
        f"Speedup ({t.engine_version or 'vllm'} on {t.device})"
        + ("\nCPU: does not predict a GPU's speedup" if t.note else ""),
        fontsize=10,
    )
    ax.grid(axis="y", alpha=0.3)


def _title(rep: SmokeReport) -> str:
    return f"eagle-convert report: {len(rep.drafts)} variants on target {model_name(rep.target)}"


def plot_report(rep: SmokeReport, folder: str | Path) -> dict[str, Path]:
    """Write the PNGs into `folder`; returns name -> path (speedup only when it was measured)."""
    require("smoke", "report's plots", ("matplotlib",))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    caption = smoke_caption(rep)
    single = [
        ("al.png", _al_panel, (6.5, 5.2)),
        ("positions.png", plot_positions, (6.5, 5.2)),
        ("buckets.png", _buckets_panel, (6.5, 5.2)),
    ]
    if rep.throughput is not None:
        single.append(("speedup.png", _speedup_panel, (6.5, 5.2)))
    for name, panel, size in single:
        fig, ax = plt.subplots(figsize=size)
        panel(ax, rep)
        out[name] = finish(fig, folder / name, title=_title(rep), caption=caption)
    panels = [_al_panel, plot_positions, _buckets_panel, _categories_panel]
    if rep.throughput is not None:
        panels.append(_speedup_panel)
    cols = 3 if len(panels) > 4 else 2
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.8 * rows + 0.8), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        panel(ax, rep)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    out["report.png"] = finish(fig, folder / "report.png", title=_title(rep), caption=caption)
    return out
