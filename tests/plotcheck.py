"""What a readable picture is, measured on the drawn figure with matplotlib's own text extents
(independent of `measure/style.py`, which tries to make it so): no two texts overlap, no text leaves
the figure, every axes names both axes, no legend covers an axes, and a caption says what was
measured. `capture_figures` keeps each figure a plot function saves, for these checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import combinations
from typing import Any

import pytest

TOLERANCE_PX = 0.5  # extents are floats; touching boxes (a shared edge) are not an overlap


@contextmanager
def capture_figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every figure `savefig` writes while the block runs, in order (still drawable after close)."""
    from matplotlib.figure import Figure

    saved: list[Any] = []
    original = Figure.savefig

    def savefig(self: Any, *args: Any, **kwargs: Any) -> Any:
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    yield saved


def _name(t: Any) -> str:
    return repr(t.get_text()[:40])


def _in_view(ax: Any, axis: str) -> list[Any]:
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t for v, t in zip(ticks, labels) if lo - 1e-9 <= v <= hi + 1e-9]


def texts(fig: Any) -> list[Any]:
    """Every visible, non-empty text the figure draws: titles, labels, tick labels in view, value
    labels, legend entries, the caption."""
    out = list(fig.texts)  # the suptitle and the caption among them
    for leg in fig.legends:
        out += leg.get_texts()
    for ax in fig.axes:
        if not ax.axison:
            continue
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        out += _in_view(ax, "x") + _in_view(ax, "y")
        out += list(ax.texts)
        if ax.get_legend() is not None:
            out += ax.get_legend().get_texts()
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def problems(fig: Any) -> list[str]:
    """Everything that makes `fig` hard to read, one line each (empty: readable)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):  # pyplot.close left a bare canvas
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    items = [(t, t.get_window_extent(r)) for t in texts(fig)]
    whole = fig.bbox
    for t, b in items:
        if b.x0 < whole.x0 - 1 or b.y0 < whole.y0 - 1 or b.x1 > whole.x1 + 1 or b.y1 > whole.y1 + 1:
            out.append(f"{_name(t)} leaves the figure")
    for (t1, b1), (t2, b2) in combinations(items, 2):
        w = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        h = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        if w > TOLERANCE_PX and h > TOLERANCE_PX:
            out.append(f"{_name(t1)} overlaps {_name(t2)}")
    for i, ax in enumerate(fig.axes):
        if not ax.axison:
            continue
        if not ax.get_xlabel().strip() or not ax.get_ylabel().strip():
            out.append(f"axes {i} ({ax.get_title()!r}): x label {ax.get_xlabel()!r}, y label {ax.get_ylabel()!r}")
        frame = ax.get_window_extent(r)
        for leg in [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]:
            lb = leg.get_window_extent(r)
            if min(lb.x1, frame.x1) - max(lb.x0, frame.x0) > 0 and min(lb.y1, frame.y1) - max(lb.y0, frame.y0) > 0:
                out.append(f"a legend covers axes {i} ({ax.get_title()!r})")
    if not [t for t in fig.texts if t.get_gid() == "caption" and t.get_text().strip()]:
        out.append("no caption")
    return out


def caption(fig: Any) -> str:
    return " ".join(t.get_text() for t in fig.texts if t.get_gid() == "caption")
