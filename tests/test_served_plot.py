"""`smoke --server --plot`: the PNG of a measured deployment reads without the JSON beside it
(`tests/plotcheck.py`: no text overlaps or leaves the figure, both axes named, no legend over the
data, a caption), measured on servers from `tests/servedfake.py` whose figures nearly coincide."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from eagle_convert.cli.app import main  # noqa: E402
from eagle_convert.measure import MeasureOptions, Prompt  # noqa: E402
from eagle_convert.served import ServedReport, run_served  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plotcheck  # noqa: E402
from servedfake import FakeServer  # noqa: E402

PROMPTS = [Prompt("a", "coding", text="def f():"), Prompt("b", "chat", messages=({"role": "user", "content": "hi"},))]
FAST = ["--limit", "1", "--category", "coding", "--max-new-tokens", "9"]


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk (the signature checked first)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _measured() -> ServedReport:
    """Two drafts of the same k that accept nearly alike, three levels, and the baseline server."""
    with FakeServer(k=3, accept=2) as a, FakeServer(k=3, accept=1) as b, FakeServer(k=None, delay=0.001) as base:
        return run_served(
            [a.url, b.url],
            MeasureOptions(max_new_tokens=13, concurrency=(1, 2, 4)),
            labels=["eagle31", "eagle3"],
            baseline=base.url,
            prompts=PROMPTS,
            suite="builtin",
        )


def test_the_served_plot_is_readable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from eagle_convert.served import plot_served

    report = _measured()
    with plotcheck.capture_figures(monkeypatch) as figs:
        plot_served(report, tmp_path / "served.png")
    [fig] = figs
    assert plotcheck.problems(fig) == []
    cap = plotcheck.caption(fig)
    for part in ("2 prompts (builtin)", "k=3", "greedy", "13 new tokens", "concurrency 1, 2, 4", "eagle31 = "):
        assert part in cap, (part, cap)
    positions, rates = fig.axes
    # 2 servers x 3 levels: every line drawn and named (the legend hides none), the levels of a server apart
    labels = [line.get_label() for line in positions.get_lines()]
    assert len(labels) == 6 and all(" c=" in x and ": AL " in x for x in labels)
    styles = [(line.get_color(), line.get_linestyle(), line.get_marker()) for line in positions.get_lines()]
    assert len(set(styles)) == 6
    assert {t.get_text() for t in fig.legends[0].get_texts()} >= set(labels)
    # the rate panel: the baseline and both servers, each server point labelled with its speedup
    assert [line.get_label() for line in rates.get_lines()] == ["baseline server (no speculation)", "eagle31", "eagle3"]
    speedups = sorted(t.get_text() for t in rates.texts)
    assert speedups == sorted(f"{lv.speedup:.2f}×" for s in report.servers for lv in s.levels)
    assert rates.get_ylabel() == "per-user decode tokens/s"
    width, height = _png_size(tmp_path / "served.png")
    assert 1000 <= width <= 2000 and 500 <= height <= 1200, (width, height)


def test_without_a_baseline_the_points_are_labelled_with_their_rates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from eagle_convert.served import plot_served

    with FakeServer(k=3, accept=2) as a:
        report = run_served([a.url], MeasureOptions(max_new_tokens=9, concurrency=(1, 2)), prompts=PROMPTS)
    with plotcheck.capture_figures(monkeypatch) as figs:
        plot_served(report, tmp_path / "one.png")
    [fig] = figs
    assert plotcheck.problems(fig) == []
    rates = fig.axes[1]
    assert "(labels: tokens/s)" in rates.get_title() and all("×" not in t.get_text() for t in rates.texts)


def test_cli_plot_with_server_writes_the_png(tmp_path: Path) -> None:
    png = tmp_path / "served.png"
    with FakeServer(k=3, accept=2) as srv, FakeServer(k=None) as base:
        args = ["smoke", "--server", srv.url, "--baseline-server", base.url, *FAST, "--concurrency", "1,2"]
        res = CliRunner().invoke(main, [*args, "--plot", str(png), "--json"], env={"OPENAI_API_KEY": ""})
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["plot"] == str(png)
        assert _png_size(png)[0] > 500
        res = CliRunner().invoke(main, [*args, "--plot", str(tmp_path / "x.jpg")], env={"OPENAI_API_KEY": ""})
    assert (res.exit_code, res.stderr) == (2, f"Error: --plot: {tmp_path / 'x.jpg'} must end in .png\n")


def test_with_buckets_every_bucket_has_its_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from eagle_convert.served import plot_served

    with FakeServer(k=3, accept=2) as a, FakeServer(k=None) as base:
        opts = MeasureOptions(max_new_tokens=9, concurrency=(1, 2), buckets=(0, 64))
        report = run_served([a.url], opts, labels=["eagle31"], baseline=base.url, prompts=PROMPTS)
    with plotcheck.capture_figures(monkeypatch) as figs:
        plot_served(report, tmp_path / "buckets.png")
    [fig] = figs
    assert plotcheck.problems(fig) == []
    assert "in context natural, ~64 tok (padded with the server's tokenizer)" in plotcheck.caption(fig)
    positions, rates = fig.axes
    assert [line.get_label() for line in positions.get_lines()] == [
        "eagle31 c=1: AL 2.67",
        "eagle31 c=2: AL 2.67",
        "eagle31 c=1 ~64 tok: AL 2.67",
        "eagle31 c=2 ~64 tok: AL 2.67",
    ]
    assert [line.get_label() for line in rates.get_lines()] == [
        "baseline server (no speculation), context natural",
        "eagle31, context natural",
        "baseline server (no speculation), context ~64 tok",
        "eagle31, context ~64 tok",
    ]
