"""`drift --plot`: sink share, fed-back RMS and conditional acceptance against depth, one line per
draft, one row of the three panels per context bucket (templates pooled within a bucket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.drift.results import DepthRow, DraftDrift, DriftReport
from eagle_convert.extras import require
from eagle_convert.measure import bucket_label, draft_style, finish, model_name, stop_notes

# (DepthRow attribute, panel title, y axis label with its unit)
PANELS = (
    ("sink", "attention on the sink tokens", "share of the draft layer's attention (0-1)"),
    ("fed_rms", "fed-back hidden state RMS", "RMS of the fed-back state (hidden units)"),
    ("acceptance", "conditional acceptance", "P(accepted | depths before accepted)"),
)
SINK_SPAN = 0.05  # the sink axis shows at least 0-0.05: a few hundredths vary visibly, noise stays small


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


def _stop_reason(attr: str, depth: int) -> str:
    """Why a line ends at `depth` before the deepest one (its next row has no value)."""
    if attr == "acceptance":
        return f"ends: no round\nreached depth {depth + 1}"
    return f"ends: no draft pass\nat depth {depth + 1}"


def _panel(
    ax: Any, attr: str, per_draft: list[tuple[str, dict[int, list[DepthRow]]]], bucket: int, deepest: int
) -> None:
    """One panel: a line per draft (colour, dash and marker apart), a note where a line stops early."""
    values: list[float] = []
    notes = []
    for j, (label, rows) in enumerate(per_draft):
        pts = [(r.depth, v) for r in rows.get(bucket, []) if (v := getattr(r, attr)) is not None]
        if not pts:
            continue
        style = draft_style(j)
        ax.plot(*zip(*pts), label=label, linewidth=1.8, markersize=5, **style)
        values += [v for _, v in pts]
        last, y = pts[-1]
        if last < deepest:
            notes.append((style["color"], last, y, _stop_reason(attr, last)))
    stop_notes(ax, notes)
    if attr == "acceptance":
        ax.set_ylim(0, 1.12)
    elif attr == "sink" and values:
        ax.set_ylim(0, max(max(values) * 1.25, SINK_SPAN))
    elif values:
        ax.set_ylim(0, max(values) * 1.2)


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
    deepest = report.settings["depth"]
    fig, axes = plt.subplots(len(buckets), 3, figsize=(15, 4.2 * len(buckets) + 1.2), squeeze=False)
    for i, bucket in enumerate(buckets):
        for j, (attr, title, ylabel) in enumerate(PANELS):
            ax: Any = axes[i][j]
            _panel(ax, attr, per_draft, bucket, deepest)
            ax.set_title(f"{title}, context {bucket_label(bucket) if bucket >= 0 else 'all'}", fontsize=10)
            ax.set_xlabel("draft depth (1 = first drafted token)")
            ax.set_ylabel(ylabel)
            ax.set_xlim(0.7, deepest + 0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole (a short line: no 1.5)
            ax.grid(alpha=0.3)
    s = report.settings
    prompts = report.drafts[0].overall.prompts if report.drafts else 0
    title = f"eagle-convert drift: {len(report.drafts)} draft(s) on target {model_name(report.target)}"
    caption = (
        f"Measured: {prompts} prompts (context {', '.join(bucket_label(b) for b in s['buckets'])}), "
        f"drafting to depth {s['depth']} after every verified round of {s['max_new_tokens']} greedy new "
        f"tokens; sink = the first {s['sink_tokens']} context tokens; engine {report.engine}"
    )
    return finish(fig, path, title=title, caption=caption)
