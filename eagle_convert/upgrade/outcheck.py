"""validate's static errors on the output as planned, computed once per plan.

Two steps need them: the plan (the card's compatibility sentence is written only for an output
validate accepts) and the preflight (which refuses such an output before a byte is written). On a
crafted header of 200,000 tensors each pass costs about a second, so the plan keeps the answer with
the shape it was computed for (config, tensor names, dtypes and shapes: all the static rules read);
a plan changed after planning is checked again.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle_convert.draft import Checkpoint, describe
from eagle_convert.upgrade.outfiles import PlannedFile
from eagle_convert.validate import Finding, build_context, run_static
from eagle_convert.vllm_model import Release


@dataclass(frozen=True)
class OutputCheck:
    """The errors of one planned output and the vLLM class it builds, with what they were computed for."""

    key: tuple[Any, ...]
    errors: tuple[Finding, ...]
    impl: str | None


def output_key(files: Sequence[PlannedFile], config: dict[str, Any]) -> tuple[Any, ...]:
    """What the static rules read of a planned output: its config and each tensor's name, dtype, shape."""
    tensors = tuple((f.filename, t.name, t.dtype, tuple(t.shape)) for f in files for t in f.tensors)
    return (json.dumps(config, sort_keys=True, default=str), tensors)


def static_errors(
    out: Checkpoint, key: tuple[Any, ...], release: Release, shared: dict[Hashable, Any] | None = None
) -> OutputCheck:
    """validate's static errors for `release` without a target (the pairing is `validate --target`'s job).
    `shared`: the `Context.memo` the card's matrix of the same output reuses (the vocabulary maps, read once)."""
    ctx = build_context(out, describe(out, release, read_vocab=False), shared=shared)
    return OutputCheck(key, tuple(f for f in run_static(ctx)[0] if f.level == "error"), ctx.impl)
