"""`eagle-convert report DRAFT --target T --out DIR`: the EAGLE-3 → EAGLE-3.1 story, side by side."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from eagle_convert.cli.options import dataclass_options
from eagle_convert.optionspec import nested, option
from eagle_convert.report import ReportOptions


@dataclass(frozen=True)
class ReportCommand:
    """`report`'s options: the target, the folder, what to build and measure (`ReportOptions`), the key."""

    target: str = option(metavar="TARGET", help="The target model folder the draft speculates for.")
    out: str = option(
        metavar="DIR",
        help="Report folder: new, or an earlier report's folder to resume it (unchanged stages are skipped).",
    )
    report: ReportOptions = nested(ReportOptions)
    api_key: str | None = option(
        None,
        envvar="OPENAI_API_KEY",
        help="Bearer key for the --server and --baseline-server URLs (never printed or recorded).",
    )
    json: bool = option(False, help="Print report.json to stdout.")


@click.command("report")
@click.argument("draft")
@dataclass_options(
    ReportCommand,
    "opts",
    help_extra={"report.measure.concurrency": "Default with --engine vllm: 1,4,16; 'none' turns it off."},
)
def report_cmd(draft: str, opts: ReportCommand) -> None:
    """Inspect DRAFT, upgrade it to EAGLE-3.1 (identity and calibrated fc_norm), fine-tune, validate,
    and measure every variant against TARGET on the same prompts, buckets and engine.

    Writes DIR/report.md, report.json (its `acceptance` has the shape of smoke --json, its `drift`
    that of drift --json), PNGs, commands.sh (the command of each step) and one folder per
    variant, each with its model card. With --server (and --baseline-server) the running
    deployment is measured too, as smoke --server measures it (report.md's "The running deployment").
    Re-running the same command skips every stage whose inputs and options did not change, so an
    interrupted report resumes where it stopped. Exit 0 when the report was written, 1 on a
    failure (the message names the stage), 2 on usage, 3 when a --server could not be measured,
    130 when interrupted.
    """
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.report import run_report

    out, as_json = Path(opts.out), opts.json
    events: list[object] = []

    def resume() -> str:  # read when interrupted: how many stages had finished by then
        return (
            f" after {len(events)} finished stages, which are recorded in {out}; run the same command again to resume"
        )

    on_interrupt(resume)
    from eagle_convert.cli.progress import ProgressDisplay

    with ProgressDisplay(json_mode=as_json) as display:
        result = run_report(
            draft,
            opts.target,
            out,
            opts.report,
            progress=display.say,
            on_stage=events.append,
            on_tick=display.tick,
            api_key=opts.api_key or None,
        )
    if as_json:
        from eagle_convert.cli.output import echo_json

        echo_json(result.data)
    else:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.report import render_report

        render_report(console(), result)
    click.echo(f"report: {result.files['report.md']}", err=as_json)
    click.echo(f"plot: {result.files['report.png']}", err=as_json)


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
