"""`CaptureOptions`: how a capture runs (engine, parallelism, dtype, shards), declared once.

The `capture` command's click options and the capture flags of `finetune --capture` and
`upgrade --init calibrated --capture` are made from these fields (`optionspec`); `capture_cache`
takes the object, so its settings are not copied from one signature to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.optionspec import check, option

CAPTURE_ENGINES = ("vllm", "reference")
DEFAULT_SHARD_SIZE = 64  # sequences per shard: what a kill can lose, and what is in memory at once
DTYPES = ("auto", "bfloat16", "float16", "float32")
# vLLM 0.32 config/parallel.py DistributedExecutorBackend, less "uni" (one worker: nothing to choose)
# and "external_launcher" (torchrun starts the engine: not how capture runs it).
EXECUTOR_BACKENDS = ("mp", "ray")


@dataclass(frozen=True)
class CaptureOptions:
    """The engine that runs the target, its parallelism and dtype, and the cache's shard size."""

    engine: str = option(
        "vllm",
        choices=CAPTURE_ENGINES,
        help="Engine that runs the target: vllm (tensor/pipeline parallel if asked; the aux states as vLLM computes "
        "them) or reference (the torch target in one process on the first GPU torch sees, else the CPU; fp32 unless "
        "--dtype says otherwise).",
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
    distributed_executor_backend: str | None = option(
        None,
        choices=EXECUTOR_BACKENDS,
        help="vLLM's executor for the workers (vLLM 0.32 ParallelConfig.distributed_executor_backend): mp, one "
        "process per GPU on this node (vLLM's default when the world size fits it), or ray, workers placed "
        "on a Ray cluster's GPUs across nodes (start the cluster first; docs/scale.md). Default: vLLM's choice.",
    )
    shard_size: int = option(
        DEFAULT_SHARD_SIZE,
        min=1,
        help="Sequences per cache shard: a killed capture loses at most one shard, and one shard's tensors "
        "are in memory at a time.",
    )
    max_model_len: int | None = option(None, min=1, help="vLLM's max_model_len (default: the longest sequence plus 8).")

    def __post_init__(self) -> None:
        check(self)
