"""How every picture looks: `smoke --plot`, `drift --plot` and report's PNGs all finish here.

A picture has to read without the JSON beside it, so each one gets: the same colour, line style and
marker for a draft everywhere (`draft_style`: lines that coincide still differ by dash and marker),
one legend for the figure below its panels (never over the data), value labels moved apart until
no two collide (`declutter`, matplotlib's own text extents), x tick labels put on two rows when they
do not fit side by side, a caption line saying what was measured (prompts, k, engine, target) and
an atomic write (`finish`). matplotlib is imported lazily by the callers (Agg backend).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.measure.prompts import NATURAL

if TYPE_CHECKING:
    from eagle_convert.measure.results import SmokeReport

LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")
FONT = 8  # value labels, legend and caption
CAPTION_GID = "caption"  # the caption's artist id (what a test or a reader of the figure looks for)
_GAP = 1.5  # points between two value labels moved apart


def bucket_label(b: int | None, unit: str = "tok") -> str:
    """A context bucket as smoke's plots, report's plots and report.md name it: all, natural, ~N `unit`."""
    return "all" if b is None else ("natural" if b == NATURAL else f"~{b} {unit}")


def draft_style(j: int) -> dict[str, Any]:
    """The j-th draft's colour, dash and marker: two drafts with the same numbers stay apart."""
    return {"color": f"C{j % 10}", "linestyle": LINESTYLES[j % len(LINESTYLES)], "marker": MARKERS[j % len(MARKERS)]}


def model_name(ref: str) -> str:
    """A model as a caption names it: the last two parts of its path (`trained/target`, not the bare
    `target` of a folder named after its role), a hub id as it is."""
    parts = [p for p in Path(ref).parts if p not in ("/", "\\")]
    return "/".join(parts[-2:]) if parts else ref


def smoke_caption(report: SmokeReport) -> str:
    """What a smoke measurement measured, in one line: prompts, buckets, k, sampling, engine, target."""
    s, p = report.settings, report.prompts
    buckets = ", ".join(bucket_label(b) for b in report.buckets)
    sampling = "greedy" if not s["temperature"] else f"T={s['temperature']}"
    engine = report.engine + (f" ({report.engine_version})" if report.engine_version else "")
    return (
        f"Measured: {len(p.prompts)} prompt runs ({p.suite} prompts; context {buckets}), k={s['k']} draft "
        f"tokens per round, {sampling}, {s['max_new_tokens']} new tokens each; engine {engine}; "
        f"target {model_name(report.target)}"
    )


def _overlap(a: Any, b: Any, gap: float) -> float:
    """How far (pixels) box `a` must move up to clear `b` vertically; 0 when they do not meet."""
    if a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 - gap or b.y1 <= a.y0 - gap:
        return 0.0
    return b.y1 + gap - a.y0


def _value_labels(ax: Any) -> list[Any]:
    from matplotlib.text import Annotation

    return [
        t
        for t in ax.texts
        if isinstance(t, Annotation) and t.get_visible() and t.anncoords == "offset points" and t.get_text()
    ]


def declutter(fig: Any, rounds: int = 60) -> bool:
    """Move each axes' value labels (annotations placed in offset points) up, the upper of two at a
    time, until no two overlap, on a white ground over the lines; raise an axes' top when a label
    would leave it, and put crowded x tick labels on two rows. True when anything moved (the
    caller lays the figure out again)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    gap = _GAP * fig.dpi / 72
    moved = False
    for ax in fig.axes:
        labels = _value_labels(ax)
        for t in labels:  # legible over a line or marker it sits on
            t.set_bbox({"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
            t.set_zorder(5)
        fixed = [t for t in ax.texts if t.get_visible() and t not in labels and t.get_text()]
        for _ in range(rounds):
            boxes = [t.get_window_extent(renderer) for t in labels]
            still = [f.get_window_extent(renderer) for f in fixed]
            shift = False
            for i, j in combinations(range(len(labels)), 2):
                lo, hi = (i, j) if (boxes[i].y0, i) <= (boxes[j].y0, j) else (j, i)
                up = _overlap(boxes[hi], boxes[lo], gap)
                if up > 0:
                    _raise(labels[hi], up, fig.dpi)
                    boxes[hi] = labels[hi].get_window_extent(renderer)
                    shift = True
            for i, box in enumerate(boxes):
                for f in still:
                    up = _overlap(box, f, gap)
                    if up > 0:
                        _raise(labels[i], up, fig.dpi)
                        box = labels[i].get_window_extent(renderer)
                        shift = True
            if not shift:
                break
            moved = True
        moved |= _make_room(ax, labels, renderer)
        moved |= _fit_ticks(ax, renderer)
    return moved


def _raise(label: Any, pixels: float, dpi: float) -> None:
    x, y = label.xyann
    label.xyann = (x, y + pixels * 72 / dpi)


def _make_room(ax: Any, labels: list[Any], renderer: Any) -> bool:
    """Raise the y limit until every value label sits inside the axes (a label above the frame
    would meet the title)."""
    if not labels:
        return False
    top = max(t.get_window_extent(renderer).y1 for t in labels)
    frame = ax.get_window_extent(renderer)
    if top <= frame.y1 - 2:
        return False
    lo, hi = ax.get_ylim()
    over = (top - frame.y1 + 4) / max(frame.height, 1.0)
    ax.set_ylim(lo, hi + (hi - lo) * over / max(1 - over, 0.2))
    return True


def _fit_ticks(ax: Any, renderer: Any) -> bool:
    """Move every other x tick label one row down when neighbours overlap (once per axes)."""
    ticks = [t for t in ax.xaxis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()]
    boxes = [t.label1.get_window_extent(renderer) for t in ticks]
    if len(ticks) < 2 or not any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:])):
        return False
    if len({t.get_pad() for t in ticks}) > 1:
        return False  # already on two rows: nothing more to try
    rows = max(t.label1.get_text().count("\n") + 1 for t in ticks)
    step = rows * ticks[0].label1.get_fontsize() * 1.25  # points: one label's height
    for t in ticks[1::2]:
        t.set_pad(t.get_pad() + step)
    return True


def _legend_entries(fig: Any) -> tuple[list[Any], list[str]]:
    """Each labelled handle once, in panel order; a line (colour, dash, marker) before a bar."""
    from matplotlib.lines import Line2D

    found: dict[str, Any] = {}
    for ax in fig.axes:
        handles, labels = ax.get_legend_handles_labels()
        for h, lab in zip(handles, labels):
            if lab not in found or (isinstance(h, Line2D) and not isinstance(found[lab], Line2D)):
                found[lab] = h
    return list(found.values()), list(found)


def _wrap(text: str, fig: Any) -> str:
    chars = max(int(fig.get_figwidth() * 72 / (FONT * 0.52)), 40)  # about 0.52 em per character
    return "\n".join(textwrap.fill(line, chars) for line in text.splitlines())


def finish(fig: Any, path: Path, *, title: str, caption: str, dpi: int = 110) -> Path:
    """Title, panels, the figure's one legend under them and the caption under that; labels moved
    apart; then written atomically (`save_png`). Closes `fig`."""
    fig.set_dpi(dpi)
    sup = fig.suptitle(title, fontsize=10)
    cap = fig.text(0.5, 0.006, _wrap(caption, fig), ha="center", va="bottom", fontsize=FONT, color="0.25")
    cap.set_gid(CAPTION_GID)
    handles, labels = _legend_entries(fig)
    legend = None
    if labels:
        for ncol in range(len(labels), 0, -1):
            legend = fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=FONT, frameon=False)
            fig.canvas.draw()
            if legend.get_window_extent().width <= fig.bbox.width * 0.96 or ncol == 1:
                break
            legend.remove()
    for _ in range(4):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        height = fig.bbox.height
        bottom = cap.get_window_extent(renderer).y1 / height + 0.004
        if legend is not None:
            legend.set_bbox_to_anchor((0.5, bottom), transform=fig.transFigure)
            fig.canvas.draw()
            bottom = legend.get_window_extent(renderer).y1 / height
        top = 1 - sup.get_window_extent(renderer).height / height - 0.02
        fig.tight_layout(rect=(0, bottom, 1, top))
        if not declutter(fig):
            break
    return save_png(fig, path, dpi=dpi)


def save_png(fig: Any, path: Path, *, dpi: int) -> Path:
    """Write `fig` beside `path`, then rename it there: an interrupted run leaves the old plot (or
    none), never half a PNG. Closes `fig`."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, dpi=dpi, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def stop_notes(ax: Any, lines: Iterable[tuple[Any, int, float, str]]) -> None:
    """Annotate where a line ends early: (style colour, last x, last y, why), right of its last
    point, where the line would have gone on."""
    for colour, x, y, why in lines:
        ax.annotate(why, (x, y), textcoords="offset points", xytext=(6, 3), ha="left", fontsize=FONT - 1, color=colour)


def value_label(ax: Any, x: float, y: float, text: str, colour: Any, *, size: int = FONT) -> None:
    """A point's value just above it, centred, in its line's colour (`declutter` moves it if it
    collides with another)."""
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=size, color=colour)


def position_axes(ax: Any, k: int, title: str) -> None:
    """The axes of an acceptance-by-position chart (smoke's, report's and `smoke --server`'s): positions
    1..k, the share of rounds accepted up to each in % (112 leaves room for the value labels)."""
    ax.set_xticks(range(1, k + 1))
    ax.set_xlim(0.6, k + 0.4)
    ax.set_ylim(0, 112)
    ax.set_xlabel("draft position (1 = the first drafted token of a round)")
    ax.set_ylabel("rounds accepted up to this position (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
