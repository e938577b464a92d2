"""`eagle-convert smoke DRAFT [DRAFT ...] --target T`: acceptance length, side by side."""

from __future__ import annotations

from dataclasses import dataclass

import click

from eagle_convert.cli.commands.smoke_server import Servers
from eagle_convert.cli.options import dataclass_options
from eagle_convert.measure import MeasureOptions
from eagle_convert.optionspec import nested, option
from eagle_convert.served import ServerOptions


@dataclass(frozen=True)
class SmokeCommand:
    """`smoke`'s options: the measurement (`MeasureOptions`), or the running servers, and the output."""

    target: str | None = option(None, metavar="TARGET", help="The target model folder the drafts speculate for.")
    measure: MeasureOptions = nested(MeasureOptions)
    k_sweep: bool = option(
        False,
        help="Also report, from this one run at k, each draft's AL and expected speedup at every k' <= k and "
        "the recommended k (step costs timed on the reference engine; on vLLM from the per-user rates at "
        "concurrency 1, which it adds). Run at the largest k you would serve with (docs/smoke.md).",
    )
    servers: Servers = nested(Servers)
    server: ServerOptions = nested(ServerOptions)
    json: bool = option(False, help="Print the report as JSON.")
    plot: str | None = option(
        None, path=True, help="Write a PNG: acceptance by position per draft, AL per category and bucket."
    )


@click.command("smoke")
@click.argument("drafts", nargs=-1, required=False, metavar="DRAFT [DRAFT ...]")
@dataclass_options(SmokeCommand, "opts", help_extra={"measure.concurrency": "Default: not measured."})
def smoke_cmd(drafts: tuple[str, ...], opts: SmokeCommand) -> None:
    """Measure acceptance length (AL = 1 + accepted draft tokens per draft round) and per-position
    acceptance of one or more DRAFTs against TARGET, per prompt category and context bucket; the
    first DRAFT is the baseline of the differences.

    Compare an EAGLE-3 draft with its EAGLE-3.1 upgrade: eagle-convert smoke eagle3 eagle31 --target TARGET.
    Measure a running deployment instead: eagle-convert smoke --server URL --baseline-server URL0
    --concurrency 1,4,16 (docs/serve.md).
    """
    from eagle_convert.cli.output import emit_measured
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.errors import UsageError
    from eagle_convert.measure import run_smoke

    if opts.servers.servers:
        return _served(drafts, opts)
    if opts.servers.labels or opts.servers.baseline_server:
        raise UsageError("--label and --baseline-server go with --server")
    if not drafts or opts.target is None:  # not required by click: --server takes neither
        ctx = click.get_current_context()
        param = next(p for p in ctx.command.params if (p.name == "drafts" if not drafts else "--target" in p.opts))
        raise click.MissingParameter(ctx=ctx, param=param)
    target = opts.target
    plot = opts.plot
    if plot is not None and not plot.lower().endswith(".png"):
        raise UsageError(f"--plot: {plot} must end in .png")
    if plot is not None:
        from eagle_convert.measure import require_plot

        require_plot()
    from eagle_convert.vllm_model import default_release

    release = default_release()  # smoke's entry: resolved once, for the options and the run
    measure = opts.measure.resolve("smoke", release, k_sweep=opts.k_sweep)
    for line in measure.suite.notices:
        click.echo(f"Note: {line}", err=True)
    with ProgressDisplay(json_mode=opts.json) as display:
        report = run_smoke(
            target,
            list(drafts),
            measure,
            progress=display.say,
            on_tick=display.tick,
            k_sweep=opts.k_sweep,
            release=release,
        )
    for d in report.drafts:  # loud on stderr too, so --json consumers see it
        if d.sampling_control is not None and not d.sampling_control.passed:
            click.echo(
                f"WARNING: {d.label}: the engine failed the T->0 sampling control "
                f"({d.sampling_control.summary()}); its AL at T={measure.temperature:g} measures the engine, "
                "not the draft" + (f". Cause: {d.sampling_control.cause}" if d.sampling_control.cause else ""),
                err=True,
            )
    if opts.json and report.throughput is not None and report.throughput.note:  # the table prints it otherwise
        click.echo(f"Note: per-user tokens/s {report.throughput.note}", err=True)
    from eagle_convert.cli.render.smoke import render_smoke
    from eagle_convert.measure import plot_smoke

    emit_measured(report, plot, opts.json, plot_smoke, render_smoke)


def _served(drafts: tuple[str, ...], opts: SmokeCommand) -> None:
    """`smoke --server`: no local model; the flags that name one are refused."""
    from eagle_convert.cli.commands.smoke_server import smoke_server
    from eagle_convert.errors import UsageError

    for bad, what in (
        (bool(drafts), "DRAFT arguments"),
        (opts.target is not None, "--target"),
        (opts.k_sweep, "--k-sweep"),
        (opts.measure.k is not None, "--num-speculative-tokens (the server's --speculative-config sets k)"),
    ):
        if bad:
            raise UsageError(f"with --server, drop {what}: the server holds the models")
    smoke_server(opts.measure, opts.servers, opts.server, as_json=opts.json, plot_path=opts.plot)


def register(group: click.Group) -> None:
    group.add_command(smoke_cmd)
