"""How the vLLM worker processes answer their parent: JSON lines on the real stdout, every other
print/log (vLLM's included) on stderr, and an exception still answered as one JSON line."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, TextIO

from eagle_convert.vllm.errors import one_line_error


def claim_stdout() -> TextIO:
    """Keep the real stdout for the JSON answers and route everything else written there to stderr."""
    sys.stdout.flush()
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return real_stdout


def failure_answer(exc: BaseException) -> dict:
    """The answer for an import failure or a bug: one line of error, the traceback's tail for --debug."""
    return {"ok": False, "error": one_line_error(exc), "stage": "worker", "traceback": traceback.format_exc()[-4000:]}


def base_engine_kwargs(req: dict) -> dict:
    """The ``LLM(...)`` arguments every op's engine starts from: the target, eager, its length, dtype, seed."""
    return dict(
        model=req["target"],
        enforce_eager=True,
        max_model_len=int(req["max_model_len"]),
        dtype=req.get("dtype", "auto"),
        seed=int(req.get("seed", 0)),
    )


def shutdown_engine(llm: Any) -> None:
    """Stop ``llm``'s engine core before the next engine starts (or the worker exits); a failure to
    stop is ignored. The caller then drops its reference and runs ``gc.collect()``.

    An engine core run in this process (`session._in_process_engine`) froze the heap and cached the
    environment when it started (vLLM 0.32.0 `v1/engine/core.py EngineCore.__init__`: `freeze_gc_heap`,
    `enable_envs_cache`): both are undone, so its memory can be collected and the next engine reads
    the environment as it is then (a capture's thread binding)."""
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:
        pass
    import gc

    gc.unfreeze()
    envs = sys.modules.get("vllm.envs")
    if envs is not None and hasattr(envs, "disable_envs_cache"):
        envs.disable_envs_cache()
