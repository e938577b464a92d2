"""Upgrade writes only what `validate` accepts: the planned output is validated before a byte is written.

An upgrade rewrites the config (a registered architecture, a model_type vLLM does not turn into an
MTP model, explicit aux ids, the aux count) and adds `fc_norm`; every other tensor is carried as
it is. A draft whose tensors fit no vLLM EAGLE-3 class (TorchSpec's GLM-4 MoE draft: routed
experts where every vLLM 0.32 EAGLE-3 class has a dense MLP) used to be written anyway, under a
registered architecture, and `validate` then rejected the output. So the upgrade runs validate's
static rules (no target: the pairing is `validate --target`'s job) on the output as planned (the
plan's config and tensor names over the input's bytes, plus the new tensors' bytes) and refuses
when they find an error: one rule, the same verdict as `validate` on the written folder, and no
table of fixable codes to keep in step with the rules.
"""

from __future__ import annotations

from eagle_convert.draft import Checkpoint, describe
from eagle_convert.errors import EagleConvertError, UpgradeRefusedError
from eagle_convert.upgrade.outcheck import output_key, static_errors
from eagle_convert.upgrade.outfiles import planned_output
from eagle_convert.upgrade.plan import UpgradePlan, plan_upgrade
from eagle_convert.validate import Finding


def planned_checkpoint(plan: UpgradePlan) -> Checkpoint:
    """The output `plan` would write, as validate reads a checkpoint (no bytes copied)."""
    return planned_output(plan.checkpoint, plan.files, plan.config_after, sharded=plan.sharded)


def _planned_errors(plan: UpgradePlan) -> tuple[list[Finding], str | None]:
    """validate's static errors on the planned output and its vLLM class: the plan's own check where the
    plan has not changed since."""
    key = output_key(plan.files, plan.config_after)
    check = plan.output_check
    if check is None or check.key != key:
        check = plan.output_check = static_errors(planned_checkpoint(plan), key, plan.release)
    return list(check.errors), check.impl


def output_errors(plan: UpgradePlan) -> list[Finding]:
    """The errors `validate` (static, no target) would report for the folder `plan` writes."""
    return _planned_errors(plan)[0]


def _codes(findings: list[Finding]) -> str:
    """`E101 missing-tensor (layers.0.mlp.up_proj.weight and 2 more) and E102 ...`: each code once."""
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    parts = []
    for code, group in sorted(by_code.items()):
        first = min(group, key=lambda f: f.where)
        where = first.where or first.message
        more = f" and {len(group) - 1} more" if len(group) > 1 else ""
        parts.append(f"{code} {group[0].slug} ({where}{more})")
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def _default_layout_fixes(plan: UpgradePlan) -> bool:
    """Whether the errors come from the layout asked for: the same upgrade with `--layout vllm` has none."""
    if plan.layout == "vllm":
        return False
    ckpt = plan.checkpoint
    try:
        alt = plan_upgrade(
            ckpt,
            describe(ckpt, plan.release, read_vocab=False),
            norm_output=plan.norm_output,
            aux_layer_ids=list(plan.aux.ids),
            norm_init=plan.norm_init,
        )
    except EagleConvertError:
        return False
    return not output_errors(alt)


def refuse_invalid_output(plan: UpgradePlan) -> None:
    """Raise `UpgradeRefusedError` when validate would reject the upgraded draft; see the module docstring."""
    errors, impl = _planned_errors(plan)
    if not errors:
        return
    src = plan.checkpoint.description
    before = {f.code for f in static_errors(plan.checkpoint, (), plan.release).errors}  # the input's own
    made = [f for f in errors if f.code not in before]
    head = f"{src}: validate would reject the upgraded draft (vLLM class {impl or 'none'}): {_codes(errors)}"
    if made:
        why = f" ({_codes(made)} not in the input: the upgrade's own doing)" if len(made) < len(errors) else ""
        why = why or ", none in the input: the upgrade's own doing"
        hint = "an eagle-convert bug: please report it with the draft's config.json"
    elif _default_layout_fixes(plan):
        why = f", kept from the input by {{layout={plan.layout}}}"
        hint = "use {layout=vllm}, whose output validate accepts"
    else:
        why = ", as in the input: the upgrade carries every tensor but fc_norm as it is, so it cannot fix them"
        hint = f"fix the draft first; eagle-convert validate {src} gives each finding's fix"
    raise UpgradeRefusedError(head + why, hint=hint, options=("layout",))
