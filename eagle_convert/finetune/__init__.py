"""The short TTT fine-tune of an upgraded draft: plan and refusals, then the torch run."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.finetune.calibrate import CALIBRATE_MODULES, Calibration, calibrate_fc_norm
    from eagle_convert.finetune.capture import capture_training_data
    from eagle_convert.finetune.distributed import serve_torchrun, torchrun_world
    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.plan import (
        BATCH_SIZE,
        HOLD_OUT_EVERY,
        LOSS_DECAY,
        STAGE_PARAMS,
        FinetuneEvent,
        FinetunePlan,
        FinetuneResult,
        held_out_al,
        plan_finetune,
    )
    from eagle_convert.finetune.run import finetune_draft, run_finetune
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "CALIBRATE_MODULES": "eagle_convert.finetune.calibrate",
            "Calibration": "eagle_convert.finetune.calibrate",
            "calibrate_fc_norm": "eagle_convert.finetune.calibrate",
            "capture_training_data": "eagle_convert.finetune.capture",
            "serve_torchrun": "eagle_convert.finetune.distributed",
            "torchrun_world": "eagle_convert.finetune.distributed",
            "FinetuneOptions": "eagle_convert.finetune.options",
            "BATCH_SIZE": "eagle_convert.finetune.plan",
            "FinetuneEvent": "eagle_convert.finetune.plan",
            "FinetunePlan": "eagle_convert.finetune.plan",
            "FinetuneResult": "eagle_convert.finetune.plan",
            "HOLD_OUT_EVERY": "eagle_convert.finetune.plan",
            "LOSS_DECAY": "eagle_convert.finetune.plan",
            "STAGE_PARAMS": "eagle_convert.finetune.plan",
            "held_out_al": "eagle_convert.finetune.plan",
            "plan_finetune": "eagle_convert.finetune.plan",
            "finetune_draft": "eagle_convert.finetune.run",
            "run_finetune": "eagle_convert.finetune.run",
        },
    )

__all__ = [
    "BATCH_SIZE",
    "calibrate_fc_norm",
    "capture_training_data",
    "CALIBRATE_MODULES",
    "Calibration",
    "finetune_draft",
    "FinetuneEvent",
    "FinetuneOptions",
    "FinetunePlan",
    "FinetuneResult",
    "held_out_al",
    "HOLD_OUT_EVERY",
    "LOSS_DECAY",
    "plan_finetune",
    "run_finetune",
    "serve_torchrun",
    "STAGE_PARAMS",
    "torchrun_world",
]
