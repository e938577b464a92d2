"""The engine worker's ``smoke`` mode: generate with the real vLLM engine and count accepted drafts.

Spec-decode counters are read from ``LLM.get_metrics()`` before and after generation (and,
where this vLLM has them, per request). Runs inside
``python -m eagle_convert.vllm.worker smoke``.
"""

from __future__ import annotations

import math
import time
import traceback

from eagle_convert.vllm.errors import one_line_error

__all__ = ["run_smoke"]


def _metric_sum(metrics, name: str) -> float:
    return float(sum(getattr(m, "value", 0) for m in metrics if m.name == name))


def _metric_vector(metrics, name: str) -> list[int]:
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


def run_smoke(req: dict) -> dict:
    t0 = time.perf_counter()
    out: dict = {"ok": False, "error": None, "timings": {}}
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    out["vllm_version"] = vllm.__version__
    kwargs = dict(
        model=req["target"],
        enforce_eager=True,
        max_model_len=int(req["max_model_len"]),
        dtype=req.get("dtype", "auto"),
        seed=int(req["seed"]),
        disable_log_stats=False,
        tensor_parallel_size=int(req["tensor_parallel_size"]),
        max_num_seqs=int(req.get("max_num_seqs", 8)),
    )
    if req.get("draft"):
        kwargs["speculative_config"] = {
            "method": req.get("method", "eagle3"),
            "model": req["draft"],
            "num_speculative_tokens": int(req["num_speculative_tokens"]),
        }
        import dataclasses

        from vllm.engine.arg_utils import EngineArgs

        fields = {f.name for f in dataclasses.fields(EngineArgs)}
        if req.get("per_request", True) and "per_request_spec_decode_metrics" in fields:
            kwargs["per_request_spec_decode_metrics"] = "summary"  # vLLM >= 0.32 (or so)
    stage = "engine"
    try:
        t1 = time.perf_counter()
        llm = LLM(**kwargs)
        out["timings"]["engine_start_s"] = round(time.perf_counter() - t1, 3)
        stage = "generate"
        prompts = [
            TokensPrompt(prompt_token_ids=[int(t) for t in p]) if isinstance(p, list) else p for p in req["prompts"]
        ]
        params = SamplingParams(
            max_tokens=int(req["max_new_tokens"]),
            temperature=float(req["temperature"]),
            seed=int(req["seed"]),
            ignore_eos=True,
        )
        before = llm.get_metrics()
        t2 = time.perf_counter()
        results = llm.generate(prompts, params, use_tqdm=False)
        gen_s = time.perf_counter() - t2
        after = llm.get_metrics()
    except Exception as exc:
        out["error"] = one_line_error(exc)
        out["stage"] = stage
        if req.get("traceback"):
            out["traceback"] = traceback.format_exc()
        return out

    outputs = [list(r.outputs[0].token_ids) for r in results]
    per_request = None
    if kwargs.get("per_request_spec_decode_metrics"):
        per_request = []
        for r in results:
            m = getattr(r.outputs[0], "spec_decode_metrics", None)
            per_request.append(m.to_dict() if m is not None and hasattr(m, "to_dict") else None)
    names = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens")
    drafts, draft_tokens, accepted = (int(_metric_sum(after, n) - _metric_sum(before, n)) for n in names)
    pos_after = _metric_vector(after, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_before = _metric_vector(before, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_before += [0] * (len(pos_after) - len(pos_before))
    n_tokens = sum(len(o) for o in outputs)
    out.update(
        ok=True,
        outputs=outputs,
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted=accepted,
        accepted_per_pos=[a - b for a, b in zip(pos_after, pos_before)],
        seconds=round(gen_s, 4),
        tokens_per_s=(n_tokens / gen_s) if gen_s > 0 else math.inf,
        per_request=per_request,
    )
    out["timings"]["generate_s"] = round(gen_s, 4)
    t3 = time.perf_counter()
    try:  # stop the engine core processes before this process exits (the parent kills leftovers)
        llm.llm_engine.engine_core.shutdown()
    except Exception:
        pass
    out["timings"]["shutdown_s"] = round(time.perf_counter() - t3, 3)
    out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out
