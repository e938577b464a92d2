"""`smoke --plot`: acceptance by draft position per draft, AL per category / context bucket, and
with `--concurrency` the per-user decode tokens/s by concurrency level (each draft and no speculation).

matplotlib is imported lazily, with the Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.extras import require
from eagle_convert.measure.results import SmokeReport
from eagle_convert.measure.style import (
    FONT,
    bucket_label,
    draft_style,
    finish,
    model_name,
    position_axes,
    smoke_caption,
    value_label,
)

PLOT_WHAT, PLOT_MODULES = "smoke --plot", ("matplotlib",)


def require_plot() -> None:
    """Fail before a long smoke run, not after it, when --plot cannot be drawn (MissingExtraError)."""
    require("smoke", PLOT_WHAT, PLOT_MODULES)


def draft_names(report: SmokeReport) -> dict[str, str]:
    """Each draft's legend entry, the same in every panel (so the figure has one legend): its
    label, variant and AL over all prompts."""
    return {
        d.label: f"{d.label}" + (f" ({d.variant})" if d.variant else "") + f": AL {d.total.acceptance_length:.2f}"
        for d in report.drafts
    }


def _index(report: SmokeReport) -> dict[str, int]:
    return {d.label: j for j, d in enumerate(report.drafts)}


def plot_grouped_al(
    ax: Any,
    report: SmokeReport,
    keys: list[tuple[str, int | None]],
    labels: list[str],
    title: str,
    *,
    xlabel: str,
    value_fontsize: float = FONT,
    tick_fontsize: float | None = None,
    mark_max: bool = True,
) -> None:
    """Draw, on `ax`, AL per (category, bucket) key as grouped bars, one colour per draft with
    per-request groups, between the AL 1 and k+1 lines; shared by `smoke --plot` and `report`,
    whose smaller panels pass smaller fonts (`mark_max` writes "max k+1" on its line)."""
    drafts = [d for d in report.drafts if d.per_request]
    k = report.settings["k"]
    names, index = draft_names(report), _index(report)
    width = 0.8 / max(len(drafts), 1)
    for j, d in enumerate(drafts):
        vals = [g.acceptance_length if (g := d.group(c, b)) is not None else 0.0 for c, b in keys]
        xs = [i + (j - (len(drafts) - 1) / 2) * width for i in range(len(keys))]
        colour = draft_style(index[d.label])["color"]
        bars = ax.bar(xs, vals, width=width * 0.95, label=names[d.label], color=colour)
        ax.bar_label(bars, fmt="%.2f", fontsize=value_fontsize, padding=2)
    ax.axhline(k + 1, color="grey", linestyle="--", linewidth=1)
    ax.axhline(1, color="grey", linestyle=":", linewidth=1)
    if mark_max:
        ax.text(-0.45, k + 1, f"max {k + 1} (k={k})", va="bottom", ha="left", fontsize=FONT, color="grey")
    ax.set_xticks(range(len(keys)), labels, **({"fontsize": tick_fontsize} if tick_fontsize else {}))
    ax.set_ylim(0, k + 1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("acceptance length (AL, tokens per round)")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def plot_positions(ax: Any, report: SmokeReport) -> None:
    """Draw, on `ax`, the share of draft rounds accepted up to each position, one line per draft
    (dash and marker apart, so equal lines stay visible); the one such chart, shared by `smoke
    --plot` and `report`'s positions.png."""
    k = report.settings["k"]
    positions = list(range(1, k + 1))
    names = draft_names(report)
    for j, d in enumerate(report.drafts):
        rates = [100 * r for r in d.total.per_position] or [0.0] * k
        style = draft_style(j)
        ax.plot(positions, rates, linewidth=2, markersize=6, label=names[d.label], **style)
        for x, y in zip(positions, rates):
            value_label(ax, x, y, f"{y:.0f}%", style["color"])
    position_axes(ax, k, "Acceptance by draft position")


def plot_throughput(ax: Any, report: SmokeReport) -> None:
    """Draw, on `ax`, per-user decode tokens/s by concurrency level: no speculation in grey, each
    draft in its colour, each draft point labelled with its speedup over no speculation."""
    t = report.throughput
    names, index = draft_names(report), _index(report)
    levels = t.concurrency
    xs = list(range(len(levels)))
    base = [lv.tokens_per_s if (lv := t.baseline.level(c)) else float("nan") for c in levels]
    ax.plot(xs, base, marker="x", linestyle=(0, (1, 1)), color="grey", linewidth=1.5, label="no speculation")
    for j, d in enumerate(t.drafts):
        rates = [lv.tokens_per_s if (lv := d.level(c)) else float("nan") for c in levels]
        style = draft_style(index.get(d.label, j))
        ax.plot(xs, rates, linewidth=2, label=names.get(d.label, d.label), **style)
        for x, c, y in zip(xs, levels, rates):
            up = t.speedup(d.label, c)
            if up is not None:
                value_label(ax, x, y, f"{up:.2f}×", style["color"], size=FONT - 1)
    ax.set_xticks(xs, [str(c) for c in levels])
    ax.set_xlim(-0.4, len(levels) - 0.6)
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("per-user decode tokens/s (median)")
    top = max([y for y in base if y == y] + [lv.tokens_per_s for d in t.drafts for lv in d.levels] + [1.0])
    ax.set_ylim(0, top * 1.2)
    ax.set_title(
        f"Throughput ({t.engine_version or 'vllm'} on {t.device}); labels: speedup"
        + ("\nCPU: does not predict a GPU's speedup" if t.note else "")
    )
    ax.grid(alpha=0.3)


def panels(report: SmokeReport) -> list[str]:
    """The panels `plot_smoke` draws for `report`, left to right."""
    grouped = any(d.per_request for d in report.drafts)
    out = ["positions"] + (["categories"] if grouped else [])
    if grouped and len(report.buckets) > 1:
        out.append("buckets")
    return out + (["throughput"] if report.throughput is not None and report.throughput.drafts else [])


def plot_smoke(report: SmokeReport, path: str | Path) -> Path:
    """Write a PNG: the share of draft rounds accepted up to each position, one line per draft (AL
    in the legend); AL per category (and per context bucket when there are several); with
    `--concurrency`, per-user tokens/s by concurrency level (`panels` names them)."""
    require_plot()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    names = panels(report)
    grouped, multi = "categories" in names, "buckets" in names
    ncols = len(names)
    fig, axes = plt.subplots(1, ncols, figsize=(5.4 * ncols + 0.6, 5.4), squeeze=False)
    plot_positions(axes[0][0], report)
    if "throughput" in names:
        plot_throughput(axes[0][-1], report)
    if grouped:
        cats = report.categories
        bucket = None if multi else report.buckets[0]
        plot_grouped_al(
            axes[0][1],
            report,
            [(c, bucket) for c in cats],
            cats,
            "AL by prompt category" + (" (all context lengths)" if multi else ""),
            xlabel="prompt category",
        )
    if multi:
        bks = report.buckets
        plot_grouped_al(
            axes[0][2],
            report,
            [("all", b) for b in bks],
            [bucket_label(b) for b in bks],
            "AL by context length",
            xlabel="context length (prompt tokens)",
        )
    title = f"eagle-convert smoke: {len(report.drafts)} draft(s) on target {model_name(report.target)}"
    return finish(fig, path, title=title, caption=smoke_caption(report), dpi=120)
