"""The short TTT fine-tune of an upgraded draft: plan and refusals, then the torch run."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.finetune.calibrate import Calibration, calibrate_fc_norm
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
else:
    __getattr__, __dir__ = attach(__name__, __file__)
