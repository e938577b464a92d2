"""`smoke --plot`: acceptance by draft position per draft, AL per category / context bucket, and
with `--concurrency` the per-user decode tokens/s by concurrency level (each draft and no speculation).

matplotlib is imported lazily, with the Agg backend (no display needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eagle_convert.extras import require
from eagle_convert.measure import NATURAL, SmokeReport

__all__ = [
    "PLOT_MODULES",
    "PLOT_WHAT",
    "bucket_label",
    "panels",
    "plot_grouped_al",
    "plot_positions",
    "plot_smoke",
    "plot_throughput",
    "require_plot",
    "save_png",
]

PLOT_WHAT, PLOT_MODULES = "smoke --plot", ("matplotlib",)


def require_plot() -> None:
    """Fail before a long smoke run, not after it, when --plot cannot be drawn (MissingExtraError)."""
    require("smoke", PLOT_WHAT, PLOT_MODULES)


def bucket_label(b: int | None, unit: str = "tok") -> str:
    """A context bucket as smoke's plots, report's plots and report.md name it: all, natural, ~N `unit`."""
    return "all" if b is None else ("natural" if b == NATURAL else f"~{b} {unit}")


def plot_grouped_al(
    ax: Any,
    report: SmokeReport,
    keys: list[tuple[str, int | None]],
    labels: list[str],
    title: str,
    *,
    value_fontsize: float = 8,
    value_padding: float = 2,
    tick_fontsize: float | None = None,
    tilt_many: bool = True,
    headroom: float = 1.5,
    mark_max: bool = True,
) -> None:
    """Draw, on `ax`, AL per (category, bucket) key as grouped bars, one colour per draft with
    per-request groups, between the AL 1 and k+1 lines; shared by `smoke --plot` and `report`,
    whose smaller panels pass smaller fonts (`tilt_many` slants the labels of more than 4 keys,
    `mark_max` writes "max k+1" on its line)."""
    drafts = [d for d in report.drafts if d.per_request]
    k = report.settings["k"]
    width = 0.8 / max(len(drafts), 1)
    for j, d in enumerate(drafts):
        vals = [g.acceptance_length if (g := d.group(c, b)) is not None else 0.0 for c, b in keys]
        xs = [i + (j - (len(drafts) - 1) / 2) * width for i in range(len(keys))]
        bars = ax.bar(xs, vals, width=width * 0.95, label=d.label, color=f"C{j}")
        ax.bar_label(bars, fmt="%.2f", fontsize=value_fontsize, padding=value_padding)
    ax.axhline(k + 1, color="grey", linestyle="--", linewidth=1)
    ax.axhline(1, color="grey", linestyle=":", linewidth=1)
    if mark_max:
        ax.text(-0.45, k + 1, f"max {k + 1}", va="bottom", ha="left", fontsize=8, color="grey")
    tilt = tilt_many and len(keys) > 4
    ticks: dict[str, Any] = {"rotation": 20 if tilt else 0, "ha": "right" if tilt else "center"}
    if tick_fontsize is not None:
        ticks["fontsize"] = tick_fontsize
    ax.set_xticks(range(len(keys)), labels, **ticks)
    ax.set_ylim(0, k + headroom)
    ax.set_ylabel("acceptance length (AL)")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def plot_positions(ax: Any, report: SmokeReport) -> None:
    """Draw, on `ax`, the share of draft rounds accepted up to each position, one line per draft
    (AL in the legend); the one such chart, shared by `smoke --plot` and `report`'s positions.png."""
    k = report.settings["k"]
    positions = list(range(1, k + 1))
    for j, d in enumerate(report.drafts):
        rates = [100 * r for r in d.total.per_position] or [0.0] * k
        name = f"{d.label}" + (f" ({d.variant})" if d.variant else "")
        ax.plot(
            positions,
            rates,
            marker="o",
            linewidth=2,
            color=f"C{j}",
            label=f"{name}: AL {d.total.acceptance_length:.2f}",
        )
        for x, y in zip(positions, rates):
            dx = (j - (len(report.drafts) - 1) / 2) * 16  # side by side where lines meet
            ax.annotate(
                f"{y:.0f}%", (x, y), textcoords="offset points", xytext=(dx, 7), ha="center", fontsize=8, color=f"C{j}"
            )
    ax.set_xticks(positions)
    ax.set_xlim(0.6, k + 0.4)
    ax.set_ylim(0, 108)
    ax.set_xlabel("draft position")
    ax.set_ylabel("draft rounds accepted up to this position (%)")
    ax.set_title("Acceptance by draft position")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)


def plot_throughput(ax: Any, report: SmokeReport) -> None:
    """Draw, on `ax`, per-user decode tokens/s by concurrency level: no speculation in grey, each
    draft in its colour, each draft point labelled with its speedup over no speculation."""
    t = report.throughput
    colour = {d.label: f"C{j}" for j, d in enumerate(report.drafts)}
    levels = t.concurrency
    xs = list(range(len(levels)))
    base = [lv.tokens_per_s if (lv := t.baseline.level(c)) else float("nan") for c in levels]
    ax.plot(xs, base, marker="s", linestyle="--", color="grey", linewidth=1.5, label="no speculation")
    for j, d in enumerate(t.drafts):
        rates = [lv.tokens_per_s if (lv := d.level(c)) else float("nan") for c in levels]
        ax.plot(xs, rates, marker="o", linewidth=2, color=colour.get(d.label, f"C{j}"), label=d.label)
        for x, c, y in zip(xs, levels, rates):
            up = t.speedup(d.label, c)
            if up is not None:
                ax.annotate(f"{up:.2f}×", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.set_xticks(xs, [str(c) for c in levels])
    ax.set_xlim(-0.4, len(levels) - 0.6)
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("per-user decode tokens/s (median)")
    top = max([y for y in base if y == y] + [lv.tokens_per_s for d in t.drafts for lv in d.levels] + [1.0])
    ax.set_ylim(0, top * 1.2)
    ax.set_title(
        f"Throughput ({t.engine_version or 'vllm'} on {t.device})"
        + ("\nCPU: does not predict a GPU's speedup" if t.note else "")
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


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
    k = report.settings["k"]
    names = panels(report)
    grouped, multi = "categories" in names, "buckets" in names
    ncols = len(names)
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols + 0.6, 4.6), squeeze=False)
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
        )
        axes[0][1].legend(fontsize=8, loc="upper right")
    if multi:
        bks = report.buckets
        plot_grouped_al(
            axes[0][2], report, [("all", b) for b in bks], [bucket_label(b) for b in bks], "AL by context length"
        )
    s = report.settings
    title = (
        f"eagle-convert smoke — {Path(report.target).name}, engine {report.engine}, k={k}, "
        f"T={s['temperature']}, {s['max_new_tokens']} new tokens, {len(report.prompts.prompts)} runs"
    )
    return save_png(fig, path, dpi=120, title=title)


def save_png(fig: Any, path: Path, *, dpi: int, title: str | None = None) -> Path:
    """Lay `fig` out (under `title`, when given) and write it beside `path`, then rename it there: an
    interrupted run leaves the old plot (or none), never half a PNG. Closes `fig`."""
    import matplotlib.pyplot as plt

    if title is not None:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, dpi=dpi, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
