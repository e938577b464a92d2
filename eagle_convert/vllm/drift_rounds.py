"""Client of ``drift_worker``: the fed-back hidden state's RMS by draft depth, read from vLLM's draft.

``vllm_drift_rounds`` sends one ``drift`` request to an ``EngineSession``'s worker (one engine
start) and returns, per prompt, the tokens vLLM generated and every draft round it proposed: the
position drafted from and the per-token RMS of the state fed back at each depth 1..k
(`vllm/drift_ext.py` says which tensor that is in vLLM 0.32).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.errors import EngineError
from eagle_convert.vllm.session import EngineSession
from eagle_convert.vllm_model import speculative_config_for


@dataclass(frozen=True)
class VllmRound:
    """One ``propose`` of one request: the position drafted from, the fed-back RMS at depths 1..k."""

    position: int | None
    rms: tuple[float, ...]


@dataclass(frozen=True)
class VllmDriftRequest:
    tokens: list[int]
    rounds: list[VllmRound]


def _rounds(raw: list[dict[str, Any]]) -> list[VllmRound]:
    out = []
    for r in raw:
        pos = r.get("positions") or [None]
        out.append(VllmRound(None if pos[0] is None else int(pos[0]), tuple(float(d[0]) for d in r["rms"] if d)))
    return out


def vllm_drift_rounds(
    session: EngineSession,
    target: str | Path,
    draft: str | Path,
    prompts: list[list[int]],
    *,
    depth: int,
    max_new_tokens: int,
    max_model_len: int = 1024,
    dtype: str = "auto",
    seed: int = 0,
    timeout_s: float = 1800,
) -> tuple[list[VllmDriftRequest], dict[str, Any]]:
    """Generate each prompt alone (greedy, ``ignore_eos``) with vLLM, ``depth`` draft tokens per round
    (``num_speculative_tokens``); `timeout_s` bounds the worker's start and the whole request.

    Returns per prompt the tokens and rounds, and the worker's facts (vllm_version, dtype, timings);
    raises EngineError when vLLM is missing or the engine fails to start or generate.
    """
    draft_s = str(Path(draft).resolve())
    req = {
        "op": "drift",
        "target": str(Path(target).resolve()),
        "draft": draft_s,
        "speculative_config": speculative_config_for(draft_s, depth, None),
        "max_new_tokens": int(max_new_tokens),
        "max_model_len": int(max_model_len),
        "dtype": dtype,
        "seed": int(seed),
        "prompts": [[int(t) for t in p] for p in prompts],
    }
    res = session.request(req, timeout_s=timeout_s)
    session.engine_starts += 1
    if not res.get("ok"):
        raise EngineError(f"vLLM {res.get('stage') or 'worker'} failed for draft {draft}: {res.get('error')}")
    requests = [VllmDriftRequest(list(r["tokens"]), _rounds(r["rounds"])) for r in res["requests"]]
    facts = {k: res.get(k) for k in ("vllm_version", "dtype", "timings")}
    return requests, facts
