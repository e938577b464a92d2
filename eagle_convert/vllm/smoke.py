"""Speculative decoding with the real vLLM: EAGLE-3 acceptance counters for one draft.

Runs ``LLM(target, speculative_config={"method": "eagle3", "model": draft, ...},
disable_log_stats=False, enforce_eager=True)`` in a subprocess worker (one engine start per
call), generates with ``ignore_eos=True`` and reads the spec-decode counters from
``LLM.get_metrics()`` (diffed around the generate call). Mean acceptance length is
``1 + accepted / drafts`` (as vLLM 0.32.0 computes it: ``v1/spec_decode/metrics.py``,
``SpecDecodingLogging.log``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle_convert.errors import EngineError
from eagle_convert.extras import require
from eagle_convert.vllm.check import run_worker
from eagle_convert.vllm_model.acceptance import AcceptanceMetrics


@dataclass
class VllmRun(AcceptanceMetrics):
    """Outputs and spec-decode counters of one vLLM generate call."""

    outputs: list[list[int]]  # generated token ids per prompt
    num_drafts: int
    num_draft_tokens: int
    num_accepted: int
    accepted_per_pos: list[int]  # accepted tokens at draft position 0..k-1
    seconds: float  # generate() wall time (engine start excluded)
    tokens_per_s: float
    vllm_version: str | None
    num_speculative_tokens: int = 0
    engine_start_s: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # Per prompt, vLLM's own per-request spec-decode metrics (``RequestSpecDecodeMetrics.to_dict``:
    # acceptance_histogram, num_draft_tokens, mean_acceptance_length, ...) where the installed
    # vLLM has ``per_request_spec_decode_metrics``; None otherwise.
    per_request: list[dict | None] | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            acceptance_length=self.acceptance_length,
            acceptance_rate=self.acceptance_rate,
            per_position_rate=self.per_position_rate,
        )
        return d


def run_vllm_spec_decode(
    target: Path,
    draft: Path | None,
    prompts: list[list[int]] | list[str],
    *,
    num_speculative_tokens: int = 3,
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    seed: int = 0,
    tensor_parallel_size: int = 1,
    max_model_len: int = 1024,
    dtype: str = "auto",
    method: str = "eagle3",
    per_request: bool = True,
    timeout_s: float = 600,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> VllmRun:
    """Generate ``max_new_tokens`` per prompt with ``draft`` speculating for ``target``.

    ``draft=None`` runs the target alone (counters stay 0), a baseline for outputs and speed.
    Prompts are strings or token-id lists (sent as ``TokensPrompt``). ``per_request`` asks vLLM
    for per-request acceptance metrics too (when it has them). Raises MissingExtraError when
    vLLM is missing, EngineError when the engine fails to start or generate, or the worker times out.
    """
    require("vllm", "a vLLM run")
    if not prompts:
        raise EngineError("no prompts given")
    request = {
        "target": str(Path(target).resolve()),
        "draft": str(Path(draft).resolve()) if draft is not None else None,
        "method": method,
        "prompts": [list(map(int, p)) if not isinstance(p, str) else p for p in prompts],
        "num_speculative_tokens": num_speculative_tokens,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "seed": seed,
        "tensor_parallel_size": tensor_parallel_size,
        "max_model_len": max_model_len,
        "dtype": dtype,
        "per_request": per_request,
    }
    res, tail, _seconds = run_worker("smoke", request, timeout_s=timeout_s, python=python, env=env)
    if not res.get("ok"):
        stage = res.get("stage") or "worker"
        raise EngineError(f"vLLM {stage} failed: {res.get('error')}")
    timings = dict(res.get("timings", {}))
    return VllmRun(
        outputs=[list(o) for o in res["outputs"]],
        num_drafts=int(res["num_drafts"]),
        num_draft_tokens=int(res["num_draft_tokens"]),
        num_accepted=int(res["num_accepted"]),
        accepted_per_pos=[int(x) for x in res["accepted_per_pos"]],
        seconds=float(res["seconds"]),
        tokens_per_s=float(res["tokens_per_s"]),
        vllm_version=res.get("vllm_version"),
        num_speculative_tokens=num_speculative_tokens if draft is not None else 0,
        engine_start_s=timings.get("engine_start_s"),
        timings=timings,
        per_request=res.get("per_request"),
    )
