"""`drift --plot`: sink share, fed-back RMS and conditional acceptance against depth, one line per
draft, one row of the three panels per context bucket (templates pooled within a bucket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.drift.results import DepthRow, DraftDrift, DriftReport
from eagle_convert.extras import require
from eagle_convert.smoke import bucket_label, save_png

__all__ = ["require_drift_plot", "plot_drift", "bucket_rows"]

PANELS = (
    ("sink", "attention share on sink tokens"),
    ("fed_rms", "fed-back hidden state RMS"),
    ("acceptance", "conditional acceptance"),
)


def require_drift_plot() -> None:
    """Fail before a long run, not after it, when --plot cannot be drawn (MissingExtraError)."""
    require("smoke", "drift --plot", ("matplotlib",))


def bucket_rows(d: DraftDrift) -> dict[int, list[DepthRow]]:
    """Depth rows per bucket, pooled over templates (weighted by passes, as the recorder would)."""
    out: dict[int, list[list[DepthRow]]] = {}
    for g in d.groups:
        out.setdefault(g.bucket if g.bucket is not None else -1, []).append(g.depths)
    return {b: _pool(rows) for b, rows in out.items()}


def _pool(groups: list[list[DepthRow]]) -> list[DepthRow]:
    if len(groups) == 1:
        return groups[0]
    pooled = []
    for rows in zip(*groups):
        n = sum(r.passes for r in rows)

        def mean(attr: str, rows: tuple[DepthRow, ...] = rows, n: int = n) -> float | None:
            vals = [(getattr(r, attr), r.passes) for r in rows if getattr(r, attr) is not None]
            return sum(v * p for v, p in vals) / n if vals and n else None

        pooled.append(
            DepthRow(
                rows[0].depth,
                n,
                mean("sink"),
                mean("context"),
                mean("own"),
                mean("fed_rms"),
                sum(r.reached for r in rows),
                sum(r.accepted for r in rows),
            )
        )
    return pooled


def plot_drift(report: DriftReport, path: str | Path) -> Path:
    """Write the PNG (atomically: the old plot or the new one, never half); returns its path."""
    require_drift_plot()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    path = Path(path)
    per_draft = [(d.label, bucket_rows(d)) for d in report.drafts]
    buckets = sorted({b for _, rows in per_draft for b in rows})
    fig, axes = plt.subplots(len(buckets), 3, figsize=(15, 3.6 * len(buckets) + 0.6), squeeze=False)
    for i, bucket in enumerate(buckets):
        for j, (attr, title) in enumerate(PANELS):
            ax: Any = axes[i][j]
            for label, rows in per_draft:
                pts = [(r.depth, getattr(r, attr)) for r in rows.get(bucket, []) if getattr(r, attr) is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=label)
            ax.set_title(f"{title} — {bucket_label(bucket) if bucket >= 0 else 'all'}", fontsize=9)
            ax.set_xlabel("draft depth")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole (a short line: no 1.5)
            ax.grid(alpha=0.3)
            if attr != "fed_rms":
                ax.set_ylim(0, 1.02)
        axes[i][0].legend(fontsize=8)
    s = report.settings
    title = (
        f"eagle-convert drift — {Path(report.target).name}, depth {s['depth']}, sink = first "
        f"{s['sink_tokens']} tokens, {s['max_new_tokens']} new tokens per prompt"
    )
    return save_png(fig, path, dpi=110, title=title)
