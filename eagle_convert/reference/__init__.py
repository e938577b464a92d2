"""Torch reference engine: an EAGLE-3 / 3.1 drafter with vLLM's exact math, a chain speculative
decoding loop with vLLM's counters, and a training-time-test (TTT) trainer.

Imports torch; the static parts of eagle_convert must not import this package.
"""

from eagle_convert.reference.data import load_drafter
from eagle_convert.reference.drafter import DraftConfig, EagleDrafter, draft_config_from_dict
from eagle_convert.reference.loop import SpecResult, greedy_generate, speculative_generate, summarize
from eagle_convert.reference.target import TargetModel, default_aux_ids

__all__ = [
    "DraftConfig", "EagleDrafter", "SpecResult", "TargetModel", "default_aux_ids",
    "draft_config_from_dict", "greedy_generate", "load_drafter", "speculative_generate",
    "summarize",
]
