"""`upgrade_draft(checkpoint, out)`: the whole upgrade, composed once for every entry point.

The CLI's `upgrade`, report's upgrade stage and the real-config fixtures all call this module, so
an input gets one policy whatever the door (P-EAGLE, the refusals, the preflight): open → refuse
what is not an EAGLE-3 draft `upgrade` handles → describe → read the target → plan → preflight →
[calibrate → re-plan] → [link] → check the output → atomic apply → verify.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft import Checkpoint, DraftInfo, Target, describe, ensure_draft, open_checkpoint
from eagle_convert.jsonable import dump, key
from eagle_convert.upgrade.apply import Progress, UpgradeResult, apply_upgrade, check_output
from eagle_convert.upgrade.configgen import read_target
from eagle_convert.upgrade.linkplan import LinkPlan, plan_link
from eagle_convert.upgrade.norminit import NormInit
from eagle_convert.upgrade.options import UpgradeOptions
from eagle_convert.upgrade.plan import UpgradePlan, plan_upgrade
from eagle_convert.upgrade.preflight import refuse_invalid_output
from eagle_convert.vllm_model import default_release

# (checkpoint, plan with ones) -> measured fc_norm values; the measuring lives above this layer.
Calibrate = Callable[[Checkpoint, UpgradePlan], NormInit]


@dataclass(frozen=True)
class UpgradeRun:
    """What `upgrade_draft` did: the final plan, its link plan, and the written result (None on a dry run)."""

    output: Path
    plan: UpgradePlan
    link: LinkPlan | None = field(default=None, metadata=key(omit_none=True))
    result: UpgradeResult | None = field(default=None, metadata=key(omit_none=True))
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """What `upgrade --json` prints."""
        return dump(self, "dry_run output plan link result")


def _open(
    checkpoint: str | Path | Checkpoint, target: str | Path | None
) -> tuple[Checkpoint, DraftInfo, Target | None]:
    """Open and describe the draft, refusing what `upgrade` cannot handle (the one place it is decided)."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(str(checkpoint))
    # Also P-EAGLE (schemas/layouts.json `unsupported_by`): the EAGLE-3.1 config writer cannot express it.
    ensure_draft(ckpt, "upgrade")
    # The release the upgrade's checks are for, resolved once here (the installed vLLM's, else the newest).
    info = describe(ckpt, default_release(), read_vocab=False)
    return ckpt, info, read_target(str(target)) if target else None


def plan_upgrade_draft(
    checkpoint: str | Path | Checkpoint,
    out: str | Path | None = None,
    opts: UpgradeOptions | None = None,
    *,
    target: str | Path | None = None,
    norm_init: NormInit | None = None,
) -> UpgradePlan:
    """The upgrade plan of a draft, refused exactly where `upgrade_draft` refuses it; writes nothing.

    Args:
        checkpoint: a folder, a .safetensors/.bin file, a hub repo (org/name[@revision]) or an
            opened `Checkpoint`.
        out: the output folder the plan's model card names (a placeholder when None).
        opts: the layout, `norm_output` and aux ids (default `UpgradeOptions()`; the fields about
            writing are not read).
        target: the target model (folder, config.json or org/name): vLLM's default aux ids and the
            speculators verifier.
        norm_init: the fc_norm values (default ones).

    Returns:
        The pure `UpgradePlan` (`apply_upgrade` writes it).

    Raises:
        NotADraftError: the checkpoint is no EAGLE-3 draft, or one `upgrade` does not handle (P-EAGLE).
        UpgradeRefusedError: the plan itself is refused (`upgrade.refusals`).
        EagleConvertError: the checkpoint or the target cannot be read.
    """
    ckpt, info, tinfo = _open(checkpoint, target)
    return plan_upgrade(ckpt, info, target=tinfo, norm_init=norm_init, out=out, **_plan_options(opts))


def _plan_options(opts: UpgradeOptions | None) -> dict[str, Any]:
    o = opts or UpgradeOptions()
    ids = None if o.aux_layer_ids is None else list(o.aux_layer_ids)
    return {"layout": o.layout, "norm_output": o.norm_output, "aux_layer_ids": ids, "engines": o.serve_for}


def upgrade_draft(
    checkpoint: str | Path | Checkpoint,
    out: str | Path,
    opts: UpgradeOptions | None = None,
    *,
    target: str | Path | None = None,
    force: bool = False,
    dry_run: bool = False,
    calibrate: Calibrate | None = None,
    on_plan: Callable[[UpgradeRun], None] | None = None,
    progress: Callable[[UpgradePlan], AbstractContextManager[Progress | None]] | None = None,
) -> UpgradeRun:
    """Upgrade an EAGLE-3 draft to EAGLE-3.1 into the new folder `out` (what `eagle-convert upgrade` does).

    Args:
        checkpoint: a folder, a .safetensors/.bin file, a hub repo or an opened `Checkpoint`.
        out: the output folder; it appears atomically and the input is never modified.
        opts: layout, flags, aux ids, `link` (reflink/hard-link the input's weight files and add
            one small shard), `verify` and `fsync` (default `UpgradeOptions()`). Its `init` and
            `calibration_prompts` are the caller's to turn into `calibrate`.
        target: the target model (folder, config.json or org/name).
        force: replace an existing `out`.
        dry_run: plan, preflight and check `out`; write nothing (`result` is None).
        calibrate: measures the fc_norm values from the checkpoint and the plan with ones (e.g.
            `finetune.calibrate_fc_norm`); called after the preflight and the output check, then
            the draft is re-planned with its values. None: fc_norm weights are ones.
        on_plan: called with the final plan (and link plan) before anything is written.
        progress: a context around the write, yielding the `Progress` that receives its bytes.

    Returns:
        The `UpgradeRun`: final plan, link plan and the written, verified `UpgradeResult`.

    Raises:
        NotADraftError: the checkpoint is no EAGLE-3 draft, or one `upgrade` does not handle (P-EAGLE).
        UpgradeRefusedError: the plan is refused, or validate would reject its output.
        OutputError: `out` is the input, inside it, or exists without `force`.
        VerificationError: the written output does not match the plan.
    """
    out = Path(out)
    o = opts or UpgradeOptions()
    ckpt, info, tinfo = _open(checkpoint, target)
    popts = _plan_options(o)
    plan = plan_upgrade(ckpt, info, target=tinfo, out=out, **popts)
    refuse_invalid_output(plan)  # what validate would reject is refused before calibrating, dry run included
    if calibrate is not None:
        check_output(plan, out, force=force)  # refuse before the slow part
        plan = plan_upgrade(ckpt, info, target=tinfo, out=out, norm_init=calibrate(ckpt, plan), **popts)
    lplan = plan_link(plan) if o.link else None
    check_output(plan, out, force=force)
    run = UpgradeRun(out, plan, lplan, dry_run=dry_run)
    if on_plan is not None:
        on_plan(run)
    if dry_run:
        return run
    with progress(plan) if progress is not None else nullcontext(None) as bytes_progress:
        kw: dict[str, Any] = {"force": force, "verify": o.verify, "progress": bytes_progress, "fsync": o.fsync}
        if lplan is not None:
            from eagle_convert.upgrade.link import apply_link

            result = apply_link(lplan, out, **kw)
        else:
            result = apply_upgrade(plan, out, **kw)
    return UpgradeRun(out, plan, lplan, result, dry_run=False)
