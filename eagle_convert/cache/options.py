"""`CaptureOptions`: how a capture runs (engine, parallelism, dtype, shards), declared once.

The `capture` command's click options and the capture flags of `finetune --capture` and
`upgrade --init calibrated --capture` are made from these fields (`optionspec`); `capture_cache`
takes the object, so its settings are not copied from one signature to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.optionspec import option

__all__ = ["CAPTURE_ENGINES", "DEFAULT_SHARD_SIZE", "CaptureOptions"]

CAPTURE_ENGINES = ("vllm", "reference")
DEFAULT_SHARD_SIZE = 64  # sequences per shard: what a kill can lose, and what is in memory at once
DTYPES = ("auto", "bfloat16", "float16", "float32")


@dataclass(frozen=True)
class CaptureOptions:
    """The engine that runs the target, its parallelism and dtype, and the cache's shard size."""

    engine: str = option(
        "vllm",
        choices=CAPTURE_ENGINES,
        help="Engine that runs the target: vllm (tensor/pipeline parallel if asked; the aux states as vLLM computes "
        "them) or reference (the torch target in one process, fp32 unless --dtype says otherwise).",
    )
    dtype: str = option(
        "auto",
        choices=DTYPES,
        help="The engine's dtype (auto: vLLM's choice from the target's config; the reference engine: fp32).",
    )
    tensor_parallel_size: int = option(1, min=1, help="vLLM tensor parallelism (GPUs per target replica).")
    pipeline_parallel_size: int = option(
        1,
        min=1,
        help="vLLM pipeline parallelism (stages per target replica; each rank captures the aux layers it "
        "holds, the last the logits, merged by layer id before a shard is written).",
    )
    shard_size: int = option(
        DEFAULT_SHARD_SIZE,
        min=1,
        help="Sequences per cache shard: a killed capture loses at most one shard, and one shard's tensors "
        "are in memory at a time.",
    )
    max_model_len: int | None = option(None, min=1, help="vLLM's max_model_len (default: the longest sequence plus 8).")
