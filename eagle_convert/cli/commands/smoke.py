"""`eagle-convert smoke DRAFT [DRAFT ...] --target T`: acceptance length, side by side.

The old form `smoke TARGET -d DRAFT [-d DRAFT ...]` still works (hidden `-d/--draft`), with the
one-line deprecation: without `--target`, the one positional given with `-d` is the target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from eagle_convert.cli.commands.smoke_server import Servers
from eagle_convert.cli.deprecated import warn_deprecated
from eagle_convert.cli.options import dataclass_options, measure_options
from eagle_convert.served import ServerOptions

if TYPE_CHECKING:
    from eagle_convert.measure import MeasureOptions


@click.command("smoke")
@click.argument("drafts", nargs=-1, required=False, metavar="DRAFT [DRAFT ...]")
@click.option(
    "--target", "target", default=None, metavar="TARGET", help="The target model folder the drafts speculate for."
)
@click.option("--draft", "-d", "old_drafts", multiple=True, hidden=True)  # the old form: smoke TARGET -d DRAFT
@measure_options(concurrency_default="Default: not measured.")
@click.option(
    "--k-sweep",
    "k_sweep",
    is_flag=True,
    help="Also report, from this one run at k, each draft's AL and expected speedup at every k' <= k and "
    "the recommended k (step costs timed on the reference engine; on vLLM from the per-user rates at "
    "concurrency 1, which it adds). Run at the largest k you would serve with (docs/smoke.md).",
)
@dataclass_options(Servers, "servers")
@dataclass_options(ServerOptions, "sopts")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG: acceptance by position per draft, AL per category and bucket.",
)
def smoke_cmd(
    drafts: tuple[str, ...],
    target: str | None,
    old_drafts: tuple[str, ...],
    opts: MeasureOptions,
    k_sweep: bool,
    as_json: bool,
    plot_path: str | None,
    servers: Servers,
    sopts: ServerOptions,
) -> None:
    """Measure acceptance length (AL = 1 + accepted draft tokens per draft round) and per-position
    acceptance of one or more DRAFTs against TARGET, per prompt category and context bucket; the
    first DRAFT is the baseline of the differences.

    Compare an EAGLE-3 draft with its EAGLE-3.1 upgrade: eagle-convert smoke eagle3 eagle31 --target TARGET.
    Measure a running deployment instead: eagle-convert smoke --server URL --baseline-server URL0
    --concurrency 1,4,16 (docs/serve.md).
    """
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.errors import UsageError
    from eagle_convert.smoke import run_smoke

    if servers.servers:
        return _served(drafts, target, old_drafts, opts, servers, sopts, k_sweep, as_json, plot_path)
    if servers.labels or servers.baseline_server:
        raise UsageError("--label and --baseline-server go with --server")
    if not drafts and not old_drafts:
        param = next(p for p in click.get_current_context().command.params if p.name == "drafts")
        raise click.MissingParameter(ctx=click.get_current_context(), param=param)
    target, drafts = _forms(drafts, target, old_drafts)
    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise UsageError(f"--plot: {plot_path} must end in .png")
    if plot_path is not None:
        from eagle_convert.smoke import require_plot

        require_plot()
    measure = opts.resolve("smoke", k_sweep=k_sweep)
    for line in measure.suite.notices:
        click.echo(f"Note: {line}", err=True)
    with ProgressDisplay(json_mode=as_json) as display:
        report = run_smoke(target, list(drafts), measure, progress=display.say, on_tick=display.tick, k_sweep=k_sweep)
    for d in report.drafts:  # loud on stderr too, so --json consumers see it
        if d.sampling_control is not None and not d.sampling_control.passed:
            click.echo(
                f"WARNING: {d.label}: the engine failed the T->0 sampling control "
                f"({d.sampling_control.summary()}); its AL at T={opts.temperature:g} measures the engine, "
                "not the draft" + (f". Cause: {d.sampling_control.cause}" if d.sampling_control.cause else ""),
                err=True,
            )
    if as_json and report.throughput is not None and report.throughput.note:  # the table prints it otherwise
        click.echo(f"Note: per-user tokens/s {report.throughput.note}", err=True)
    if plot_path is not None:
        from eagle_convert.smoke import plot_smoke

        plot_smoke(report, plot_path)  # atomic: the old plot or the new one, never half
        on_interrupt(f"; wrote only {plot_path}")
    if as_json:
        data = report.to_dict()
        if plot_path is not None:
            data["plot"] = plot_path
        echo_json(data)
        return
    from eagle_convert.cli.render.smoke import render_smoke

    render_smoke(console(), report)
    if plot_path is not None:
        click.echo(f"plot: {plot_path}")


def _served(
    drafts: tuple[str, ...],
    target: str | None,
    old: tuple[str, ...],
    opts: MeasureOptions,
    servers: Servers,
    sopts: ServerOptions,
    k_sweep: bool,
    as_json: bool,
    plot_path: str | None,
) -> None:
    """`smoke --server`: no local model; the flags that name one are refused."""
    from eagle_convert.cli.commands.smoke_server import smoke_server
    from eagle_convert.errors import UsageError

    for bad, what in (
        (bool(drafts or old), "DRAFT arguments"),
        (target is not None, "--target"),
        (k_sweep, "--k-sweep"),
        (opts.k is not None, "--num-speculative-tokens (the server's --speculative-config sets k)"),
    ):
        if bad:
            raise UsageError(f"with --server, drop {what}: the server holds the models")
    smoke_server(opts, servers, sopts, as_json=as_json, plot_path=plot_path)


def _forms(drafts: tuple[str, ...], target: str | None, old: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(TARGET, DRAFTs) from either form: `smoke DRAFT... --target T`, or the old `smoke T -d DRAFT...`."""
    if target is not None:
        if old:  # the new form with -d drafts besides: they follow the positional ones
            warn_deprecated("-d/--draft", "DRAFT arguments")
        return target, (*drafts, *old)
    ctx = click.get_current_context()
    if not old:
        param = next(p for p in ctx.command.params if p.name == "target")
        raise click.MissingParameter(ctx=ctx, param=param)
    if len(drafts) != 1:
        raise click.UsageError(
            f"smoke TARGET -d DRAFT (the old form) takes one TARGET, got {len(drafts)}: "
            "use smoke DRAFT [DRAFT ...] --target TARGET"
        )
    warn_deprecated("smoke TARGET -d DRAFT", "smoke DRAFT --target TARGET")
    return drafts[0], old


def register(group: click.Group) -> None:
    group.add_command(smoke_cmd)
