"""`smoke --server --plot`: what the deployment measured, drawn the way smoke's and drift's plots are
(`measure/style.py`: one colour per server, one legend below the panels, value labels moved apart, a
caption saying what was measured, an atomic write).

Two panels: acceptance by draft position, one line per server and concurrency level (the server's
colour, the level's dash and marker: the levels of one server usually coincide and must stay
visible; a value they share is written once), and the per-user decode rate by concurrency level, each server in its colour and the
baseline server in grey, every server point labelled with its speedup over the baseline at that
level (its rate where there is no baseline). A level without a figure has no point, and its legend
entry says why in a word. matplotlib is imported lazily (Agg backend).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.measure import (
    NATURAL,
    bucket_label,
    draft_style,
    finish,
    model_name,
    position_axes,
    require_plot,
    value_label,
)
from eagle_convert.served.results import BASELINE_LABEL, ENGINE, ServedLevel, ServedReport, ServedServer

LEVEL_STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 1)), "v"), ((0, (1, 1)), "P"))


def _level_style(i: int) -> dict[str, Any]:
    dash, marker = LEVEL_STYLES[i % len(LEVEL_STYLES)]
    return {"linestyle": dash, "marker": marker}


def served_panels(report: ServedReport) -> list[str]:
    """The panels `plot_served` draws, left to right: positions where any server has a draft."""
    return (["positions"] if any(s.k is not None for s in report.servers) else []) + ["rates"]


def _where(lv: ServedLevel) -> str:
    return f"c={lv.concurrency}" + ("" if lv.bucket == NATURAL else f" {bucket_label(lv.bucket)}")


def plot_server_positions(ax: Any, report: ServedReport) -> None:
    """Acceptance by draft position per server and level: the rounds accepted up to each position (%)."""
    k = max((s.k for s in report.servers if s.k is not None), default=1)
    for j, s in enumerate(report.servers):
        if s.k is None:
            continue
        colour = draft_style(j)["color"]
        written: set[tuple[int, str]] = set()  # a server's levels mostly agree: one label per value and position
        for i, lv in enumerate(s.levels):
            rates = [100 * x for x in lv.per_position] if lv.per_position is not None else []
            xs = list(range(1, len(rates) + 1))
            style = {"color": colour, **_level_style(i)}
            al = "no figure" if lv.acceptance_length is None else f"AL {lv.acceptance_length:.2f}"
            label = f"{s.label} {_where(lv)}: {al}"
            nothing = [float("nan")]  # a level without a figure: no point, but its legend entry says so
            ax.plot(xs or nothing, rates or nothing, linewidth=2, markersize=6, label=label, **style)
            for x, y in zip(xs, rates):
                if (x, f"{y:.0f}%") in written:
                    continue
                written.add((x, f"{y:.0f}%"))
                value_label(ax, x, y, f"{y:.0f}%", colour)
    position_axes(ax, k, "Acceptance by draft position, per server and concurrency")


def _rate_name(s: ServedServer, name: str, bucket: int | None) -> str:
    """A rate line's legend entry: the levels without a figure named (they have no point)."""
    mine = [lv for lv in s.levels if bucket in (None, lv.bucket)]
    missing = [str(lv.concurrency) for lv in mine if lv.tokens_per_s is None]
    if bucket is not None:
        name = f"{name}, context {bucket_label(bucket)}"
    if len(missing) == len(mine):
        return f"{name}: no figure"
    return name + (f" (no figure at c={', '.join(missing)})" if missing else "")


def plot_server_rates(ax: Any, report: ServedReport) -> None:
    """Per-user decode tokens/s by concurrency: the baseline in grey, each server in its colour, its
    points labelled with the speedup over the baseline at the same level (else with the rate); with
    several context buckets a line per server and bucket, the bucket's dash and marker."""
    levels = list(report.concurrency)
    xs = list(range(len(levels)))
    values: list[float] = []
    several = len(report.buckets) > 1

    def rates(s: ServedServer, bucket: int) -> list[float]:
        out = [
            lv.tokens_per_s if (lv := s.level(c, bucket)) is not None and lv.tokens_per_s else float("nan")
            for c in levels
        ]
        values.extend(v for v in out if v == v)
        return out

    for i, bucket in enumerate(report.buckets):
        shown = bucket if several else None
        if report.baseline is not None:
            dash = _level_style(i)["linestyle"] if several else (0, (1, 1))
            ax.plot(
                xs,
                rates(report.baseline, bucket),
                marker="x",
                linestyle=dash,
                color="grey",
                linewidth=1.5,
                label=_rate_name(report.baseline, f"baseline server ({BASELINE_LABEL})", shown),
            )
        for j, s in enumerate(report.servers):
            style = {**draft_style(j), **(_level_style(i) if several else {})}
            ys = rates(s, bucket)
            name = s.label if s.k is not None else f"{s.label} (timing only)"
            ax.plot(xs, ys, linewidth=2, markersize=6, label=_rate_name(s, name, shown), **style)
            for x, c, y in zip(xs, levels, ys):
                lv = s.level(c, bucket)
                if lv is None or y != y:
                    continue
                text = f"{lv.speedup:.2f}×" if lv.speedup is not None else f"{y:.0f}"
                value_label(ax, x, y, text, style["color"])
    ax.set_xticks(xs, [str(c) for c in levels])
    ax.set_xlim(-0.4, len(levels) - 0.6)
    ax.set_ylim(0, max(values, default=1.0) * 1.2)
    ax.set_xlabel("concurrent requests per server")
    ax.set_ylabel("per-user decode tokens/s")
    labels = "speedup over the baseline server" if report.baseline is not None else "tokens/s"
    ax.set_title(f"Per-user decode rate by concurrency\n(labels: {labels})")
    ax.grid(alpha=0.3)


def served_caption(report: ServedReport) -> str:
    """What was measured, in one line: prompts, k, sampling, tokens, levels, servers, the rate's source."""
    s = report.settings
    sampling = "greedy" if not s.get("temperature") else f"T={s['temperature']}"
    k = s.get("k")
    ks = f"k={k} draft tokens per round" if k is not None else "k per server"
    servers = "; ".join(f"{x.label} = {x.url} ({x.model.engine or 'engine unknown'})" for x in report.servers)
    base = f"; baseline {report.baseline.url} (no speculation)" if report.baseline is not None else ""
    sources = {
        lv.rate_source for x in [*report.servers, *([report.baseline] if report.baseline else [])] for lv in x.levels
    }
    rate = (
        "the engine's decode histograms"
        if sources == {ENGINE}
        else "the streamed token times"
        if ENGINE not in sources
        else "the engine's decode histograms, else the streamed token times"
    )
    context = (
        ""
        if report.buckets == [NATURAL]
        else f" in context {', '.join(bucket_label(b) for b in report.buckets)} (padded with the server's tokenizer)"
    )
    return (
        f"Measured: {len(report.prompt_ids)} prompts ({report.suite}){context} per level, {ks}, {sampling}, "
        f"{s.get('max_new_tokens')} new tokens each (EOS ignored), concurrency {', '.join(map(str, report.concurrency))}; "
        f"engine server: {servers}{base}; per-user rate from {rate}"
    )


def plot_served(report: ServedReport, path: str | Path) -> Path:
    """Write the PNG (atomically: the old plot or the new one, never half); returns its path."""
    require_plot()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = served_panels(report)
    fig, axes = plt.subplots(1, len(names), figsize=(5.8 * len(names) + 0.6, 5.6), squeeze=False)
    if "positions" in names:
        plot_server_positions(axes[0][0], report)
    plot_server_rates(axes[0][-1], report)
    first = report.servers[0] if report.servers else report.baseline
    target = model_name(first.model.root or first.model.id) if first is not None else "?"
    title = f"eagle-convert smoke --server: {len(report.servers)} server(s) of target {target}"
    return finish(fig, Path(path), title=title, caption=served_caption(report), dpi=120)
