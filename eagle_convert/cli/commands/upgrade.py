"""`eagle-convert upgrade CHECKPOINT --out OUT`: EAGLE-3 → EAGLE-3.1 (plan, then apply)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from eagle_convert.cache import CAPTURE_ENGINES, CaptureOptions
from eagle_convert.cli.interrupt import on_interrupt, output_detail
from eagle_convert.cli.options import dataclass_options
from eagle_convert.optionspec import nested, option
from eagle_convert.upgrade import UpgradeOptions

if TYPE_CHECKING:
    from eagle_convert.draft import Checkpoint
    from eagle_convert.finetune import Calibration
    from eagle_convert.upgrade import NormInit, Progress, UpgradePlan

PROGRESS_MIN_BYTES = 64 << 20  # smaller checkpoints finish before a bar is worth drawing


CAPTURE_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend")


@dataclass(frozen=True)
class UpgradeCommand:
    """`upgrade`'s options: the output, the target, the conversion (`UpgradeOptions`), calibration's capture."""

    out: str = option(metavar="OUT", help="New folder for the EAGLE-3.1 draft (written atomically).")
    target: str | None = option(
        None,
        metavar="TARGET",
        help="Target model (folder, config.json or org/name): its layer count gives vLLM's default aux ids "
        "(2, N//2, N-3); it is also the verifier written by --layout speculators.",
    )
    dry_run: bool = option(False, help="Print the plan (renames, additions, config diff, files, bytes); write nothing.")
    force: bool = option(False, help="Replace an existing OUT (atomically).")
    upgrade: UpgradeOptions = nested(UpgradeOptions)
    cache: str | None = option(
        None,
        metavar="CACHE",
        help="--init calibrated: read the aux states from this capture cache (eagle-convert capture) instead of "
        "running --target; with --capture, the folder to capture the calibration prompts into (default "
        "OUTPUT.cache).",
    )
    capture: str | None = option(
        None,
        choices=CAPTURE_ENGINES,
        help="--init calibrated: capture the calibration prompts with this engine (vllm: tensor parallel if asked "
        "with --tensor-parallel-size) into --cache first, then calibrate from the cache.",
    )
    capture_opts: CaptureOptions = nested(CaptureOptions, only=CAPTURE_FIELDS)
    json: bool = option(False, help="Print the plan (and result) as JSON.")


@click.command("upgrade")
@click.argument("checkpoint")
@dataclass_options(
    UpgradeCommand, "cmd", help_extra={f"capture_opts.{k}": "With --capture vllm." for k in CAPTURE_FIELDS}
)
def upgrade_cmd(checkpoint: str, cmd: UpgradeCommand) -> None:
    """Upgrade the EAGLE-3 draft CHECKPOINT to EAGLE-3.1 into the new folder OUT.

    Adds one RMSNorm weight per aux hidden state (fc_norm.{i}.weight, ones, fc.weight's dtype), sets
    fc_norm / norm_output and writes a config vLLM reads the same way on every path. Unchanged tensors
    are copied byte-for-byte (never decoded); the output appears atomically and the input is never
    modified. CHECKPOINT is a folder, a .safetensors/.bin file, or a hub repo (org/name[@revision]),
    of which only config, index and weight files are downloaded.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.upgrade import UpgradeRun, upgrade_draft

    opts, output, target, as_json, dry_run = cmd.upgrade, Path(cmd.out), cmd.target, cmd.json, cmd.dry_run
    cache = None if cmd.cache is None else Path(cmd.cache)
    if opts.init == "calibrated":  # before reading (or downloading) anything
        from eagle_convert.extras import TORCH_MODULES, require

        require("smoke", "upgrade --init calibrated", TORCH_MODULES)
    on_interrupt(output_detail(output, checkpoint, verified=opts.verify))
    screen = console()

    from dataclasses import replace

    capture = None if cmd.capture is None else replace(cmd.capture_opts, engine=cmd.capture)
    if (cache is not None or capture is not None) and opts.init != "calibrated":
        from eagle_convert.errors import UsageError

        raise UsageError("--cache and --capture are for --init calibrated")
    if capture is not None and cache is None:
        cache = output.expanduser().resolve().with_name(output.name + ".cache")

    def calibrate(ckpt: Checkpoint, plan: UpgradePlan) -> NormInit:
        return _calibrate(ckpt, target, plan, opts, quiet=as_json, cache=cache, capture=capture).norm_init()

    def show_plan(run: UpgradeRun) -> None:
        if not as_json:
            from eagle_convert.cli.render.upgrade import render_plan

            render_plan(screen, run.plan, output, dry_run=dry_run, link=run.link)

    run = upgrade_draft(
        checkpoint,
        output,
        opts,
        target=target,
        force=cmd.force,
        dry_run=dry_run,
        calibrate=calibrate if opts.init == "calibrated" or opts.calibration_prompts is not None else None,
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
        yield ByteProgress(display) if show else None


def _calibrate(
    ckpt: Checkpoint,
    target: str | None,
    plan: UpgradePlan,
    opts: UpgradeOptions,
    *,
    quiet: bool,
    cache: Path | None = None,
    capture: CaptureOptions | None = None,
) -> Calibration:
    """--init calibrated: measure the fc_norm values on the target (finetune.calibrate)."""
    from eagle_convert.errors import UsageError
    from eagle_convert.finetune import calibrate_fc_norm

    if opts.init != "calibrated":
        raise UsageError("--calibration-prompts is for --init calibrated")
    if target is None:
        raise UsageError("--init calibrated needs --target (the target model's local folder)")
    from eagle_convert.cli.progress import ProgressDisplay

    with ProgressDisplay(json_mode=quiet) as display:
        cal = calibrate_fc_norm(
            ckpt,
            target,
            aux_ids=plan.aux.ids,
            release=plan.release,
            prompts=opts.calibration_prompts,
            say=None if quiet else display.say,
            on_tick=display.tick,
            cache=cache,
            capture=capture,
        )
    if not quiet:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.calibrate import render_calibration

        render_calibration(console(), cal, norm_output=plan.norm_output)
    return cal


def register(group: click.Group) -> None:
    group.add_command(upgrade_cmd)
