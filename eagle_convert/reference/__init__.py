"""Torch reference engine: an EAGLE-3 / 3.1 drafter with vLLM's exact math (`drafter`), the target
wrapper (`target`), a chain speculative decoding loop with vLLM's counters (`loop`), draft loading
(`data`) and a training-time-test (TTT) trainer (`train`).

Imports torch; the static parts of eagle_convert must not import this package. Import from the
module that defines a name (`eagle_convert.reference.loop.speculative_generate`).
"""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
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
    from eagle_convert.reference.train import (
        StepInfo,
        heldout_accuracy,
        train_draft,
        trainable_names,
        ttt_loss,
        write_draft,
    )
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "aux_rms": "eagle_convert.reference.calibrate",
            "drafter_with_fc_norm": "eagle_convert.reference.calibrate",
            "fc_norm_values": "eagle_convert.reference.calibrate",
            "first_position_agreement": "eagle_convert.reference.calibrate",
            "drafter_from_state_dict": "eagle_convert.reference.data",
            "load_drafter": "eagle_convert.reference.data",
            "EagleDrafter": "eagle_convert.reference.drafter",
            "draft_config_from_dict": "eagle_convert.reference.drafter",
            "speculative_generate": "eagle_convert.reference.loop",
            "quiet_loading": "eagle_convert.reference.quiet",
            "KeepBest": "eagle_convert.reference.select",
            "expected_acceptance_length": "eagle_convert.reference.select",
            "TargetModel": "eagle_convert.reference.target",
            "StepInfo": "eagle_convert.reference.train",
            "heldout_accuracy": "eagle_convert.reference.train",
            "train_draft": "eagle_convert.reference.train",
            "trainable_names": "eagle_convert.reference.train",
            "ttt_loss": "eagle_convert.reference.train",
            "write_draft": "eagle_convert.reference.train",
        },
    )

__all__ = [
    "aux_rms",
    "draft_config_from_dict",
    "drafter_from_state_dict",
    "drafter_with_fc_norm",
    "EagleDrafter",
    "expected_acceptance_length",
    "fc_norm_values",
    "first_position_agreement",
    "heldout_accuracy",
    "KeepBest",
    "load_drafter",
    "quiet_loading",
    "speculative_generate",
    "StepInfo",
    "TargetModel",
    "train_draft",
    "trainable_names",
    "ttt_loss",
    "write_draft",
]
