"""`eagle-convert upgrade CHECKPOINT OUTPUT`: EAGLE-3 → EAGLE-3.1 (plan, then apply)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from eagle_convert.cli.commands._interrupt import output_detail
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.upgrade import LAYOUTS

if TYPE_CHECKING:
    from eagle_convert.draft import Checkpoint
    from eagle_convert.finetune.calibrate import Calibration
    from eagle_convert.upgrade import NormInit, Progress, UpgradePlan

INITS = ("ones", "calibrated")
PROGRESS_MIN_BYTES = 64 << 20  # smaller checkpoints finish before a bar is worth drawing


def parse_ids(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        ids = [int(x) for x in value.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers (e.g. 2,16,29)") from None
    if not ids:
        raise click.BadParameter("give at least one id (e.g. 2,16,29)")
    return ids


@click.command("upgrade")
@click.argument("checkpoint")
@click.argument("output", type=click.Path(path_type=Path))
@click.option(
    "--layout",
    type=click.Choice(LAYOUTS),
    default="vllm",
    show_default=True,
    help="Output tensor names and config format: vllm (canonical names vLLM and SGLang load), "
    "keep (the input's names, only additions), speculators (speculators config format).",
)
@click.option(
    "--norm-output/--no-norm-output",
    default=True,
    show_default=True,
    help="Also set norm_output (post-norm feedback); --no-norm-output adds only the fc_norm weights.",
)
@click.option(
    "--aux-layer-ids",
    callback=parse_ids,
    metavar="IDS",
    help="Comma-separated aux layer ids in vLLM's convention (outputs of k target layers), "
    "for drafts whose config has none.",
)
@click.option(
    "--target",
    metavar="TARGET",
    help="Target model (folder, config.json or org/name): its layer count gives vLLM's default aux ids "
    "(2, N//2, N-3); it is also the verifier written by --layout speculators.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (renames, additions, config diff, files, bytes); write nothing."
)
@click.option("--force", is_flag=True, help="Replace an existing OUTPUT (atomically).")
@click.option(
    "--verify/--no-verify",
    default=True,
    show_default=True,
    help="Re-read the output and check every byte and the config against the plan before publishing it.",
)
@click.option(
    "--link",
    is_flag=True,
    help="Reflink (else hard-link, else copy) the input's weight files instead of copying them, and add "
    "one small shard with the fc_norm weights: flat in checkpoint size. Only for tensor names vLLM "
    "loads as they are (e.g. --layout keep).",
)
@click.option(
    "--init",
    "init",
    type=click.Choice(INITS),
    default="ones",
    show_default=True,
    help="fc_norm weights: ones (the identity in weight space only), or calibrated: run --target (a local "
    "folder) over calibration prompts and set each fc_norm.{i} to the median RMS of aux state i, so "
    "the first draft step matches the EAGLE-3 draft's (needs the smoke extra).",
)
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False),
    default=None,
    help='JSONL calibration prompts for --init calibrated ({"prompt": ...} or {"messages": [...]} per '
    "line). Default: the built-in set.",
)
@click.option(
    "--fsync/--no-fsync",
    default=True,
    show_default=True,
    help="Flush every output file and folder to disk before publishing it (and the parent after), so "
    "the output survives a power loss; --no-fsync for scratch outputs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and result) as JSON.")
@click.pass_context
def upgrade_cmd(
    ctx: click.Context,
    checkpoint: str,
    output: Path,
    layout: str,
    norm_output: bool,
    aux_layer_ids: list[int] | None,
    target: str | None,
    dry_run: bool,
    force: bool,
    verify: bool,
    link: bool,
    as_json: bool,
    init: str = "ones",
    prompts_file: str | None = None,
    fsync: bool = True,
) -> None:
    """Upgrade the EAGLE-3 draft CHECKPOINT to EAGLE-3.1 into the new folder OUTPUT.

    Adds one RMSNorm weight per aux hidden state (fc_norm.{i}.weight, ones, fc.weight's dtype), sets
    fc_norm / norm_output and writes a config vLLM reads the same way on every path. Unchanged tensors
    are copied byte-for-byte (never decoded); the output appears atomically and the input is never
    modified. CHECKPOINT is a folder, a .safetensors/.bin file, or a hub repo (org/name[@revision]),
    of which only config, index and weight files are downloaded.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.upgrade import UpgradeRun, upgrade_draft

    if init == "calibrated":  # before reading (or downloading) anything
        from eagle_convert.extras import require
        from eagle_convert.finetune.calibrate import CALIBRATE_MODULES

        require("smoke", "upgrade --init calibrated", CALIBRATE_MODULES)
    on_interrupt(output_detail(output, checkpoint, verified=verify))
    screen = console()

    def calibrate(ckpt: Checkpoint, plan: UpgradePlan) -> NormInit:
        return _calibrate(ckpt, target, plan, prompts_file, init, quiet=as_json).norm_init()

    def show_plan(run: UpgradeRun) -> None:
        if not as_json:
            from eagle_convert.cli.render.upgrade import render_plan

            render_plan(screen, run.plan, output, dry_run=dry_run, link=run.link)

    run = upgrade_draft(
        checkpoint,
        output,
        layout=layout,
        norm_output=norm_output,
        aux_layer_ids=aux_layer_ids,
        target=target,
        link=link,
        force=force,
        verify=verify,
        fsync=fsync,
        dry_run=dry_run,
        calibrate=calibrate if init == "calibrated" or prompts_file is not None else None,
        on_plan=show_plan,
        progress=lambda plan: _progress(plan, as_json=as_json),
    )
    if as_json:
        echo_json(run.to_dict())
    elif run.result is not None:
        from eagle_convert.cli.render.upgrade import render_result

        render_result(screen, run.plan, run.result)


@contextmanager
def _progress(plan: UpgradePlan, *, as_json: bool) -> Iterator[Progress | None]:
    """The write's bytes on the one progress display (interrupts: `cli.interrupt`)."""
    from eagle_convert.cli.progress import ByteProgress, ProgressDisplay

    show = plan.total_bytes >= PROGRESS_MIN_BYTES
    with ProgressDisplay(json_mode=as_json) as display:
        yield ByteProgress(display, {"write": "copying", "verify": "verifying"}) if show else None


def _calibrate(
    ckpt: Checkpoint, target: str | None, plan: UpgradePlan, prompts_file: str | None, init: str, *, quiet: bool
) -> Calibration:
    """--init calibrated: measure the fc_norm values on the target (finetune.calibrate)."""
    from eagle_convert.errors import UsageError
    from eagle_convert.finetune.calibrate import calibrate_fc_norm

    if init != "calibrated":
        raise UsageError("--prompts is for --init calibrated")
    if target is None:
        raise UsageError("--init calibrated needs --target (the target model's local folder)")
    from eagle_convert.cli.progress import ProgressDisplay

    with ProgressDisplay(json_mode=quiet) as display:
        cal = calibrate_fc_norm(
            ckpt,
            target,
            aux_ids=plan.aux.ids,
            prompts=prompts_file,
            say=None if quiet else display.say,
            on_tick=display.tick,
        )
    if not quiet:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.calibrate import render_calibration

        render_calibration(console(), cal, norm_output=plan.norm_output)
    return cal


def register(group: click.Group) -> None:
    group.add_command(upgrade_cmd)
