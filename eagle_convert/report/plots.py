"""`report`'s PNGs: AL per variant, acceptance per draft position, AL per context bucket (and per
category), per-user speedup by concurrency when it was measured, and one overview of them all.

Drawn from the report's `acceptance` block (`SmokeReport`) and throughput table with matplotlib's
Agg backend (no display); colours follow the variant order, so a variant has one colour everywhere.
The positions chart is smoke's (`smoke.plot.plot_positions`), so both commands draw it alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.extras import require
from eagle_convert.measure import SmokeReport
from eagle_convert.smoke import bucket_label, plot_grouped_al, plot_positions, save_png

__all__ = ["PLOTS", "plot_report"]

PLOTS = ("report.png", "al.png", "positions.png", "buckets.png", "speedup.png")


def _limits(ax: Any, k: int) -> None:
    ax.axhline(k + 1, color="grey", linestyle="--", linewidth=1)
    ax.axhline(1, color="grey", linestyle=":", linewidth=1)
    ax.set_ylim(0, k + 1.6)
    ax.set_ylabel("acceptance length (AL)")
    ax.grid(axis="y", alpha=0.3)


def _al_panel(ax: Any, rep: SmokeReport) -> None:
    k = rep.settings["k"]
    names = [d.label for d in rep.drafts]
    vals = [d.total.acceptance_length for d in rep.drafts]
    bars = ax.bar(range(len(vals)), vals, color=[f"C{j}" for j in range(len(vals))], width=0.6)
    ax.bar_label(bars, fmt="%.2f", fontsize=9, padding=2)
    ax.set_xticks(range(len(names)), names, rotation=15, ha="right", fontsize=8)
    _limits(ax, k)
    ax.text(-0.45, k + 1.02, f"max {k + 1} (k={k})", ha="left", va="bottom", fontsize=8, color="grey")
    ax.set_title("AL per variant (all prompts)")


def _grouped(ax: Any, rep: SmokeReport, keys: list[tuple[str, int | None]], labels: list[str], title: str) -> None:
    """smoke's grouped AL bars, sized for report's panels (same headroom as `_limits`), with a legend."""
    plot_grouped_al(
        ax,
        rep,
        keys,
        labels,
        title,
        value_fontsize=6,
        value_padding=1,
        tick_fontsize=8,
        tilt_many=False,
        headroom=1.6,
        mark_max=False,
    )
    ax.legend(fontsize=7, loc="upper right", ncol=2)


def _runs(rep: SmokeReport, category: str, bucket: int | None) -> str:
    c = rep.drafts[0].group(category, bucket) if rep.drafts else None
    return f"\n({c.requests} runs)" if c is not None else ""


def _buckets_panel(ax: Any, rep: SmokeReport) -> None:
    bks = rep.buckets
    keys: list[tuple[str, int | None]] = [("all", b) for b in bks] if len(bks) > 1 else [("all", None)]
    labels = [bucket_label(b) + _runs(rep, c, kb) for b, (c, kb) in zip(bks, keys)]
    _grouped(ax, rep, keys, labels, "AL per context length (prompt tokens)")


def _categories_panel(ax: Any, rep: SmokeReport) -> None:
    bucket = None if len(rep.buckets) > 1 else rep.buckets[0]
    keys = [(c, bucket) for c in rep.categories]
    _grouped(ax, rep, keys, [c + _runs(rep, c, b) for c, b in keys], "AL per prompt category")


def _speedup_panel(ax: Any, rep: SmokeReport) -> None:
    t = rep.throughput
    drafts = t.drafts
    width = 0.8 / max(len(drafts), 1)
    colour = {d.label: f"C{j}" for j, d in enumerate(rep.drafts)}
    for j, d in enumerate(drafts):
        vals = [t.speedup(d.label, c) or 0.0 for c in t.concurrency]
        xs = [i + (j - (len(drafts) - 1) / 2) * width for i in range(len(t.concurrency))]
        bars = ax.bar(xs, vals, width=width * 0.95, label=d.label, color=colour.get(d.label, f"C{j}"))
        ax.bar_label(bars, fmt="%.2f×", fontsize=6, padding=1)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(t.concurrency)), [f"concurrency {c}" for c in t.concurrency], fontsize=8)
    ax.set_ylabel("per-user decode tokens/s over no speculation")
    ax.set_title(
        f"Speedup ({t.engine_version or 'vllm'} on {t.device})"
        + ("\nCPU: does not predict a GPU's speedup" if t.note else ""),
        fontsize=10,
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")


def _suptitle(rep: SmokeReport) -> str:
    s = rep.settings
    return (
        f"eagle-convert report — target: {Path(rep.target).name}, engine: {rep.engine}, k={s['k']}, "
        f"T={s['temperature']}, {s['max_new_tokens']} new tokens, {len(rep.prompts.prompts)} runs"
    )


def _save(fig: Any, path: Path) -> Path:
    return save_png(fig, path, dpi=110)  # atomic: an interrupted report leaves no half PNG


def plot_report(rep: SmokeReport, folder: str | Path) -> dict[str, Path]:
    """Write the PNGs into `folder`; returns name -> path (speedup only when it was measured)."""
    require("smoke", "report's plots", ("matplotlib",))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    single = [
        ("al.png", _al_panel, (5.5, 4.4)),
        ("positions.png", plot_positions, (6, 4.4)),
        ("buckets.png", _buckets_panel, (6.5, 4.4)),
    ]
    if rep.throughput is not None:
        single.append(("speedup.png", _speedup_panel, (6.5, 4.4)))
    for name, panel, size in single:
        fig, ax = plt.subplots(figsize=size)
        panel(ax, rep)
        fig.suptitle(_suptitle(rep), fontsize=8)
        out[name] = _save(fig, folder / name)
    panels = [_al_panel, plot_positions, _buckets_panel, _categories_panel]
    if rep.throughput is not None:
        panels.append(_speedup_panel)
    cols = 3 if len(panels) > 4 else 2
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        panel(ax, rep)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(_suptitle(rep), fontsize=11)
    out["report.png"] = _save(fig, folder / "report.png")
    return out
