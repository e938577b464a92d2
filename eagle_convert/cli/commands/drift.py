"""`eagle-convert drift DRAFT [DRAFT ...] --target T`: attention drift by draft depth, side by side."""

from __future__ import annotations

from dataclasses import dataclass

import click

from eagle_convert.cli.options import dataclass_options
from eagle_convert.drift import DriftOptions
from eagle_convert.optionspec import nested, option


@dataclass(frozen=True)
class DriftCommand:
    """`drift`'s options: the target, what to measure (`DriftOptions`) and the output."""

    target: str = option(help="The target model folder the drafts speculate for.")
    drift: DriftOptions = nested(DriftOptions)
    json: bool = option(False, help="Print the report as JSON.")
    plot: str | None = option(
        None,
        path=True,
        help="Write a PNG: sink share, fed-back RMS and conditional acceptance by depth, a line per draft, "
        "a row per bucket.",
    )


@click.command("drift")
@click.argument("drafts", nargs=-1, required=True, metavar="DRAFT [DRAFT ...]")
@dataclass_options(DriftCommand, "opts")
def drift_cmd(drafts: tuple[str, ...], opts: DriftCommand) -> None:
    """Show attention drift of each DRAFT against --target: as the draft chain deepens, the share
    of attention on the sink tokens, on the rest of the context and on the draft's own tokens, the
    RMS of the fed-back hidden state and of each aux input, and the conditional acceptance, per depth,
    context bucket and chat template, with a one-line verdict per draft (docs/drift.md).

    Compare an EAGLE-3 draft with its upgrades: eagle-convert drift eagle3 eagle31 --target TARGET.

    Exit status: 0, or 1 when --cross-check finds vLLM's fed-back RMS off the reference's.
    """
    from eagle_convert.cli.output import emit_measured
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.drift import run_drift
    from eagle_convert.errors import UsageError
    from eagle_convert.measure import resolve_suite, select_suite

    plot_path, as_json, d = opts.plot, opts.json, opts.drift
    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise UsageError(f"--plot: {plot_path} must end in .png")
    if plot_path is not None:
        from eagle_convert.drift import require_drift_plot

        require_drift_plot()
    prompts = select_suite(resolve_suite(d.select.prompts), d.select.categories, d.select.limit)
    for line in prompts.notices:
        click.echo(f"Note: {line}", err=True)
    with ProgressDisplay(json_mode=as_json) as display:
        report = run_drift(opts.target, list(drafts), d, prompts=prompts, progress=display.say, on_tick=display.tick)
    from eagle_convert.cli.render.drift import render_drift
    from eagle_convert.drift import plot_drift

    emit_measured(report, plot_path, as_json, plot_drift, render_drift)
    if any(d.cross_check is not None and not d.cross_check.agrees for d in report.drafts):
        click.get_current_context().exit(1)


def register(group: click.Group) -> None:
    group.add_command(drift_cmd)
