"""eagle-convert: inspect, upgrade (EAGLE-3 to 3.1), validate, diff, smoke-test and fine-tune EAGLE-3 drafts.

The library API, one call per command (each name is loaded on first use, so `import eagle_convert`
stays cheap: no torch, numpy, vLLM, click or rich until a call needs them)::

    import eagle_convert as ec

    report = ec.inspect_checkpoint("path/to/draft")        # what `inspect --json` prints
    print(report.info.variant, report.info.vllm_architecture)

    ckpt = ec.open_checkpoint("path/to/draft")             # folder, .safetensors/.bin file or hub repo
    release = ec.default_release()                         # the installed vLLM's, else the newest known
    info = ec.describe(ckpt, release)                      # how that release reads it
    plan = ec.plan_upgrade(ckpt, info)                     # pure: nothing is written yet
    ec.apply_upgrade(plan, "path/to/out")                  # EAGLE-3.1 draft, written atomically
    ec.upgrade_draft("path/to/draft", "path/to/out2")      # all of `upgrade`: refusals, preflight, apply
    print(ec.validate_checkpoint("path/to/out").errors)    # []: no vLLM loader rule broken
    print([t["name"] for t in ec.diff_checkpoints("path/to/draft", "path/to/out").added])

`run_smoke(target, [draft, ...], MeasureOptions(...))` measures acceptance, `finetune_draft(draft, target, out)`
fine-tunes an upgraded draft and `calibrate_fc_norm(draft, target, aux_ids=..., release=...)` (the
upgrade plan's) measures fc_norm values for `plan_upgrade(norm_init=...)`; these need the `smoke` extra (torch).
`write_model_card(folder, acceptance=...)` (re)writes a draft's README.md and `push_draft(folder,
"org/name")` uploads a validated draft to the hub. `run_report(draft, target, out)` runs the whole
upgrade story side by side (resumable; `ReportOptions` holds its settings). Errors derive from
`EagleConvertError`; the command line (`eagle_convert.cli`) maps them to exit codes.
"""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach  # not typing's: see _lazy
from eagle_convert._version import __version__

# public name -> the module that defines it (loaded by __getattr__ on first use).
_API: dict[str, str] = {
    "EagleConvertError": "eagle_convert.errors",
    "CheckpointRef": "eagle_convert.draft.checkpoint",
    "Checkpoint": "eagle_convert.draft.checkpoint",
    "open_checkpoint": "eagle_convert.draft.checkpoint",
    "DraftInfo": "eagle_convert.draft.info",
    "describe": "eagle_convert.draft.info",
    "default_release": "eagle_convert.vllm_model.versions",
    "InspectReport": "eagle_convert.draft.inspect",
    "inspect_checkpoint": "eagle_convert.draft.inspect",
    "UpgradePlan": "eagle_convert.upgrade.plan",
    "plan_upgrade": "eagle_convert.upgrade.plan",
    "UpgradeResult": "eagle_convert.upgrade.apply",
    "apply_upgrade": "eagle_convert.upgrade.apply",
    "UpgradeRun": "eagle_convert.upgrade.run",
    "plan_upgrade_draft": "eagle_convert.upgrade.run",
    "upgrade_draft": "eagle_convert.upgrade.run",
    "ValidationReport": "eagle_convert.validate.run",
    "validate_checkpoint": "eagle_convert.validate.run",
    "CheckpointDiff": "eagle_convert.diff",
    "diff_checkpoints": "eagle_convert.diff",
    "MeasureOptions": "eagle_convert.measure.options",
    "SmokeReport": "eagle_convert.measure.results",
    "run_smoke": "eagle_convert.measure.smoke",
    "FinetunePlan": "eagle_convert.finetune.plan",
    "FinetuneResult": "eagle_convert.finetune.plan",
    "plan_finetune": "eagle_convert.finetune.plan",
    "finetune_draft": "eagle_convert.finetune.run",
    "run_finetune": "eagle_convert.finetune.run",
    "Calibration": "eagle_convert.finetune.calibrate",
    "calibrate_fc_norm": "eagle_convert.finetune.calibrate",
    "model_card": "eagle_convert.draft.card",
    "write_model_card": "eagle_convert.draft.card",
    "PushPlan": "eagle_convert.push",
    "PushResult": "eagle_convert.push",
    "plan_push": "eagle_convert.push",
    "push_draft": "eagle_convert.push",
    "ReportOptions": "eagle_convert.report.stages",
    "ReportResult": "eagle_convert.report.run",
    "run_report": "eagle_convert.report.run",
}

__all__ = ["__version__", *_API]

if TYPE_CHECKING:  # what type checkers and IDEs see
    from eagle_convert.diff import CheckpointDiff, diff_checkpoints
    from eagle_convert.draft.card import model_card, write_model_card
    from eagle_convert.draft.checkpoint import Checkpoint, CheckpointRef, open_checkpoint
    from eagle_convert.draft.info import DraftInfo, describe
    from eagle_convert.draft.inspect import InspectReport, inspect_checkpoint
    from eagle_convert.errors import EagleConvertError
    from eagle_convert.finetune.calibrate import Calibration, calibrate_fc_norm
    from eagle_convert.finetune.plan import FinetunePlan, FinetuneResult, plan_finetune
    from eagle_convert.finetune.run import finetune_draft, run_finetune
    from eagle_convert.measure.options import MeasureOptions
    from eagle_convert.measure.results import SmokeReport
    from eagle_convert.measure.smoke import run_smoke
    from eagle_convert.push import PushPlan, PushResult, plan_push, push_draft
    from eagle_convert.report.run import ReportResult, run_report
    from eagle_convert.report.stages import ReportOptions
    from eagle_convert.upgrade.apply import UpgradeResult, apply_upgrade
    from eagle_convert.upgrade.plan import UpgradePlan, plan_upgrade
    from eagle_convert.upgrade.run import UpgradeRun, plan_upgrade_draft, upgrade_draft
    from eagle_convert.validate.run import ValidationReport, validate_checkpoint
    from eagle_convert.vllm_model.versions import default_release
else:  # at run time each name is loaded from its module on first access (PEP 562)
    __getattr__, __dir__ = attach(__name__, _API)
