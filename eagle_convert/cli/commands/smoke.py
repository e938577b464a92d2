"""`eagle-convert smoke DRAFT [DRAFT ...] --target T`: acceptance length, side by side."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import click

from eagle_convert.cli.commands.smoke_server import ServerArgs, server_options
from eagle_convert.cli.options import measure_options, param_name

if TYPE_CHECKING:
    from eagle_convert.measure import MeasureOptions


@click.command("smoke")
@click.argument("drafts", nargs=-1, required=False, metavar="DRAFT [DRAFT ...]")
@click.option(
    "--target", "target", default=None, metavar="TARGET", help="The target model folder the drafts speculate for."
)
@measure_options(concurrency_default="Default: not measured.")
@click.option(
    "--k-sweep",
    "k_sweep",
    is_flag=True,
    help="Also report, from this one run at k, each draft's AL and expected speedup at every k' <= k and "
    "the recommended k (step costs timed on the reference engine; on vLLM from the per-user rates at "
    "concurrency 1, which it adds). Run at the largest k you would serve with (docs/smoke.md).",
)
@server_options
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
    opts: MeasureOptions,
    k_sweep: bool,
    as_json: bool,
    plot_path: str | None,
    **server: object,
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
    from eagle_convert.measure import resolve_suite, select_suite
    from eagle_convert.smoke import run_smoke

    args = ServerArgs(**server)  # type: ignore[arg-type]
    if args.servers:
        return _served(drafts, target, opts, args, k_sweep, as_json, plot_path)
    if args.labels or args.baseline_server:
        raise UsageError("--label and --baseline-server go with --server")
    if not drafts or target is None:  # not required by click: --server takes neither
        ctx, name = click.get_current_context(), "target" if drafts else "drafts"
        raise click.MissingParameter(ctx=ctx, param=next(p for p in ctx.command.params if p.name == name))
    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise UsageError(f"--plot: {plot_path} must end in .png")
    if plot_path is not None:
        from eagle_convert.smoke import require_plot

        require_plot()
    if opts.speculative_config is not None:  # k from the config unless -k was given
        source = click.get_current_context().get_parameter_source(param_name("opts", "k"))
        if source == click.core.ParameterSource.DEFAULT:
            opts = replace(opts, k=None)
    prompts = select_suite(resolve_suite(opts.prompts), opts.categories, opts.limit)
    for line in prompts.notices:
        click.echo(f"Note: {line}", err=True)
    with ProgressDisplay(json_mode=as_json) as display:
        report = run_smoke(
            target, list(drafts), opts, prompts=prompts, progress=display.say, on_tick=display.tick, k_sweep=k_sweep
        )
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
    opts: MeasureOptions,
    args: ServerArgs,
    k_sweep: bool,
    as_json: bool,
    plot_path: str | None,
) -> None:
    """`smoke --server`: no local model; the flags that name one are refused."""
    from eagle_convert.cli.commands.smoke_server import smoke_server
    from eagle_convert.errors import UsageError

    ctx = click.get_current_context()
    k_given = ctx.get_parameter_source(param_name("opts", "k")) != click.core.ParameterSource.DEFAULT
    for bad, what in (
        (bool(drafts), "DRAFT arguments"),
        (target is not None, "--target"),
        (k_sweep, "--k-sweep"),
        (k_given, "--num-speculative-tokens (the server's --speculative-config sets k)"),
    ):
        if bad:
            raise UsageError(f"with --server, drop {what}: the server holds the models")
    smoke_server(replace(opts, k=None), args, as_json=as_json, plot_path=plot_path)


def register(group: click.Group) -> None:
    group.add_command(smoke_cmd)
