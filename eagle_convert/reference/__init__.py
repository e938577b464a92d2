"""Torch reference engine: an EAGLE-3 / 3.1 drafter with vLLM's exact math (`drafter`), the target
wrapper (`target`), a chain speculative decoding loop with vLLM's counters (`loop`), draft loading
(`data`) and a training-time-test (TTT) trainer (`train`: the loop; `ttt`: the step; `batches`: the data).

Imports torch; the static parts of eagle_convert must not import this package. Import from the
module that defines a name (`eagle_convert.reference.loop.speculative_generate`).
"""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.reference.batches import heldout_accuracy, teacher_forced
    from eagle_convert.reference.calibrate import (
        aux_rms,
        drafter_with_fc_norm,
        fc_norm_values,
        first_position_agreement,
    )
    from eagle_convert.reference.data import drafter_from_state_dict, load_drafter
    from eagle_convert.reference.drafter import EagleDrafter, draft_config_from_dict
    from eagle_convert.reference.loop import speculative_generate
    from eagle_convert.reference.quiet import quiet_loading
    from eagle_convert.reference.select import KeepBest, expected_acceptance_length
    from eagle_convert.reference.target import TargetModel
    from eagle_convert.reference.train import StepInfo, train_draft, trainable_names, write_draft
    from eagle_convert.reference.ttt import ttt_loss
else:
    __getattr__, __dir__ = attach(__name__, __file__)
