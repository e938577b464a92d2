"""`smoke --server URL [--server URL ...] --baseline-server URL0`: the deployment itself, measured.

The options live on `smoke` (from `Servers` here and `served.ServerOptions`); this module runs
`served.run_served` with them, prints the table or `--json` (smoke's shape, engine "server"), draws `--plot` (`served.plot_served`) and on Ctrl-C names the levels already measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from eagle_convert.optionspec import option

if TYPE_CHECKING:
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.served import ServedLevel, ServedServer, ServerOptions


@dataclass(frozen=True)
class Servers:
    """`smoke --server`'s URLs: the drafts' servers, their names and the baseline (the rest is `ServerOptions`)."""

    servers: tuple[str, ...] = option(
        flag="--server",
        multiple=True,
        metavar="URL",
        help="Measure a running OpenAI-compatible server with the draft (vllm serve --speculative-config) "
        "instead of loading models: AL and per-position acceptance from its /metrics counters, per-user "
        "tokens/s from streamed requests. Repeatable, one per draft compared (docs/serve.md).",
    )
    labels: tuple[str, ...] = option(flag="--label", multiple=True, help="A name for each --server, in order.")
    baseline_server: str | None = option(
        None, metavar="URL", help="The same target served without speculation: the per-user speedups are over it."
    )


def _level_line(server: ServedServer, lv: ServedLevel) -> str:
    al = "no figure" if lv.acceptance_length is None else f"AL {lv.acceptance_length:.2f}"
    where = f"{server.label} c={lv.concurrency}" + (f" ~{lv.bucket} tok" if lv.bucket else "")
    return f"{where} {al}" if server.k is not None else where


def smoke_server(
    opts: MeasureOptions, args: Servers, sopts: ServerOptions, *, as_json: bool, plot_path: str | None
) -> None:
    """Run `smoke --server` and print its report."""
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.cli.output import emit_measured
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.errors import UsageError
    from eagle_convert.measure import resolve_suite, select_suite
    from eagle_convert.served import run_served

    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise UsageError(f"--plot: {plot_path} must end in .png")
    if plot_path is not None:  # before the run, not after minutes of requests
        from eagle_convert.measure import require_plot

        require_plot()
    suite = select_suite(resolve_suite(opts.prompts), opts.categories, opts.limit)
    for line in suite.notices:
        click.echo(f"Note: {line}", err=True)
    measured: list[str] = []
    on_interrupt(lambda: f"; measured: {', '.join(measured)}" if measured else "; no level was measured")
    with ProgressDisplay(json_mode=as_json) as display:
        report = run_served(
            args.servers,
            opts,
            sopts,
            labels=args.labels,
            baseline=args.baseline_server,
            prompts=suite.prompts,
            suite=suite.label,
            long_context=suite if suite.long_kinds else None,
            progress=display.say,
            on_tick=display.tick,
            on_level=lambda s, lv: measured.append(_level_line(s, lv)),
        )
    for server in report.servers:  # loud on stderr too, so --json consumers see it
        for text in server.identity:
            click.echo(f"WARNING: {server.label}: {text}", err=True)
        for lv in server.levels:
            for text in ([lv.no_figure] if lv.no_figure else []) + lv.notes:
                where = f"concurrency {lv.concurrency}" + (f", context ~{lv.bucket} tokens" if lv.bucket else "")
                click.echo(f"WARNING: {server.label} at {where}: {text}", err=True)
    from eagle_convert.cli.render.served import render_served
    from eagle_convert.served import plot_served

    emit_measured(report, plot_path, as_json, plot_served, render_served)
