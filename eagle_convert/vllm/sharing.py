"""Which drafts can share one vLLM engine: the swap key, and the fewest engines for a list of drafts.

vLLM builds a draft's modules from its config alone (vLLM 0.32.0 `v1/spec_decode/llm_base_proposer.py`
`_get_model` -> `model_executor/model_loader/utils.py` `initialize_model`) and then loads the
checkpoint's tensors into them. Two drafts whose configs agree on everything vLLM can read, and
whose checkpoints hold the same tensor names, shapes and dtypes, therefore build identical engines
that differ only in weight values: the second can be swapped into the first's engine
(`vllm/draft_swap.py`) and measures exactly what a fresh engine would. An upgrade, its calibrated
twin and its fine-tuned version are such a family; the EAGLE-3 original is not (it lacks
``fc_norm`` and the 3.1 flags).

Only keys no vLLM code reads are left out of the comparison: our own provenance record and the
Hugging Face bookkeeping fields. Anything else that differs, even a field that looks harmless,
gives a separate engine: a wrong "same" would measure one draft with another's settings.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from eagle_convert.draft import PROVENANCE_KEY, open_checkpoint
from eagle_convert.errors import EagleConvertError

FRESH_ENGINES_ENV = "EAGLE_CONVERT_FRESH_ENGINES"
# Read by no vLLM code path: eagle-convert's provenance, transformers' bookkeeping.
IGNORED_CONFIG_KEYS = frozenset({PROVENANCE_KEY, "_name_or_path", "transformers_version"})


def sharing_enabled() -> bool:
    """Engine sharing is on unless ``EAGLE_CONVERT_FRESH_ENGINES`` is set to a true value."""
    return os.environ.get(FRESH_ENGINES_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}


def swap_key(draft: str | Path) -> str | None:
    """Equal for drafts that build the same vLLM draft model and load the same tensors; None when
    the draft cannot be read (its own engine will then say why)."""
    try:
        ckpt = open_checkpoint(draft)
    except (EagleConvertError, OSError, ValueError):
        return None
    config = {k: v for k, v in ckpt.config.items() if k not in IGNORED_CONFIG_KEYS}
    tensors = sorted((n, t.dtype, list(t.shape)) for n, t in ckpt.tensors.items())
    blob = json.dumps([config, ckpt.storage == "bin", ckpt.prefix, tensors], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def engine_groups(drafts: Sequence[str | Path | None]) -> list[list[int]]:
    """Indices of ``drafts`` grouped by swap key, groups in order of first appearance (one engine
    start per group). ``None`` (the target alone) and unreadable drafts get a group of their own."""
    groups: dict[str, list[int]] = {}
    out: list[list[int]] = []
    for i, d in enumerate(drafts):
        key = swap_key(d) if d is not None else None
        if key is None:
            out.append([i])
        elif key in groups:
            groups[key].append(i)
        else:
            groups[key] = [i]
            out.append(groups[key])
    return out


def engine_order(drafts: Sequence[str | Path | None], share: bool = True) -> list[int]:
    """The order to run ``drafts`` in so that each group of swappable drafts is consecutive (the
    given order when ``share`` is off)."""
    if not share:
        return list(range(len(drafts)))
    return [i for group in engine_groups(drafts) for i in group]
