"""Every picture reads without the JSON beside it (issue 33): measured on the drawn figures with
matplotlib's own text extents (`tests/plotcheck.py`), on measurements shaped like `make demo`'s
report (`tests/plotdata.py`: four variants whose numbers nearly coincide, lines that stop early)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

try:
    from tests import plotcheck, plotdata
except ImportError:  # tests/ itself on sys.path
    import plotcheck  # type: ignore[no-redef]
    import plotdata  # type: ignore[no-redef]


def _drawn(monkeypatch: pytest.MonkeyPatch, draw) -> dict[str, object]:
    with plotcheck.capture_figures(monkeypatch) as figs:
        draw()
    return {f"fig{i}": f for i, f in enumerate(figs)}


def _assert_readable(figs: dict[str, object], engine: str) -> None:
    assert figs
    for name, fig in figs.items():
        assert plotcheck.problems(fig) == [], name
        cap = plotcheck.caption(fig)
        assert "prompts" in cap and engine in cap, (name, cap)


def test_smoke_plot_is_readable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from eagle_convert.measure import plot_smoke

    rep = plotdata.smoke_report(throughput=True)
    figs = _drawn(monkeypatch, lambda: plot_smoke(rep, tmp_path / "smoke.png"))
    _assert_readable(figs, "engine reference")
    [fig] = figs.values()
    assert "k=3" in plotcheck.caption(fig) and "target trained/target" in plotcheck.caption(fig)
    assert (tmp_path / "smoke.png").read_bytes()[:4] == b"\x89PNG"


def test_report_plots_are_readable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from eagle_convert.report.plots import PLOTS, plot_report

    rep = plotdata.smoke_report(throughput=True)
    figs = _drawn(monkeypatch, lambda: plot_report(rep, tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PLOTS)
    _assert_readable(figs, "engine reference")
    for fig in figs.values():  # the title names the target by more than its role ("target: target")
        assert "trained/target" in fig.get_suptitle() and "target: target" not in fig.get_suptitle()


def test_positions_lines_differ_beyond_colour(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """eagle3 and the identity upgrade accept alike: their lines meet, so dash and marker tell them apart."""
    from eagle_convert.report.plots import plot_report

    figs = _drawn(monkeypatch, lambda: plot_report(plotdata.smoke_report(), tmp_path))
    positions = next(ax for f in figs.values() for ax in f.axes if ax.get_title() == "Acceptance by draft position")
    styles = [(line.get_linestyle(), line.get_marker()) for line in positions.get_lines()]
    assert len(styles) == 4 and len(set(styles)) == 4


def test_drift_plot_is_readable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from eagle_convert.drift import plot_drift

    rep = plotdata.drift_report()
    figs = _drawn(monkeypatch, lambda: plot_drift(rep, tmp_path / "drift.png"))
    _assert_readable(figs, "engine reference")
    [fig] = figs.values()
    assert "depth 6" in plotcheck.caption(fig)
    axes = fig.axes
    sink = [ax for ax in axes if ax.get_title().startswith("attention on the sink tokens")]
    assert sink
    for ax in sink:  # scaled to the data (shares of a few hundredths), not 0-1 where every line is flat
        lo, hi = ax.get_ylim()
        assert lo == 0 and 0.04 <= hi <= 0.05, hi
    # Conditional acceptance: the lines that stop early say why, where they stop.
    acc = [ax for ax in axes if ax.get_title().startswith("conditional acceptance")]
    notes = [t.get_text() for ax in acc for t in ax.texts]
    assert notes.count("ends: no round\nreached depth 5") == 2 * 2  # identity and calibrated, both buckets
    assert notes.count("ends: no round\nreached depth 6") == 2  # eagle3
    styles = {(line.get_linestyle(), line.get_marker()) for line in acc[0].get_lines()}
    assert len(styles) == 4


def test_checker_catches_what_it_should(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The checks themselves fail on a picture with the old faults: overlapping labels, an axes
    without a y label, a legend over the data, no caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [0.5, 0.5], label="a")
    ax.annotate("80%", (1, 0.5))
    ax.annotate("81%", (1, 0.5))
    ax.set_xlabel("depth")
    ax.legend()
    found = plotcheck.problems(fig)
    plt.close(fig)
    assert "'80%' overlaps '81%'" in found and "no caption" in found
    assert any("y label ''" in p for p in found) and any("legend covers" in p for p in found)
