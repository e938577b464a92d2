"""The worker side of ``drift --cross-check vllm``: the fed-back RMS by depth from vLLM's own draft.

Request ``{"op": "drift", "target", "draft", "speculative_config", "max_new_tokens",
"max_model_len", "dtype", "seed", "prompts": [[ids]]}``: one engine (the target with the draft
speculating, greedy, ``ignore_eos``, one request at a time so every round's rows are one
request's), then per prompt ``drift_ext``'s hooks are armed, the prompt is generated and the rounds
taken. The engine stops after the request. Not a public API: the shapes are private to
``session.py``.
"""

from __future__ import annotations

import time
import traceback

from eagle_convert.vllm.errors import one_line_error
from eagle_convert.vllm.worker_io import base_engine_kwargs, shutdown_engine


def _kwargs(req: dict) -> dict:
    from eagle_convert.vllm.drift_ext import EXTENSION

    return dict(
        base_engine_kwargs(req),
        max_num_seqs=1,  # one request per step: a round's rows are one request's
        speculative_config=dict(req["speculative_config"]),
        worker_extension_cls=EXTENSION,
    )


def run_drift_rounds(req: dict) -> dict:
    """Generate every prompt with the hooks armed; per prompt its tokens and rounds."""
    t0 = time.perf_counter()
    out: dict = {"ok": False, "timings": {}, "stage": "engine", "requests": []}
    llm = None
    try:
        import vllm
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        out["vllm_version"] = vllm.__version__
        llm = LLM(**_kwargs(req))
        out["timings"]["engine_start_s"] = round(time.perf_counter() - t0, 3)
        params = SamplingParams(max_tokens=int(req["max_new_tokens"]), temperature=0.0, ignore_eos=True)
        t1 = time.perf_counter()
        for i, ids in enumerate(req["prompts"]):
            out["stage"] = f"generate (prompt {i})"
            armed = llm.collective_rpc("eagle_convert_drift_arm")
            if not all(a.get("armed") for a in armed):
                raise RuntimeError(f"the drift hooks could not be armed: {armed}")
            res = llm.generate([TokensPrompt(prompt_token_ids=[int(t) for t in ids])], params, use_tqdm=False)
            taken = llm.collective_rpc("eagle_convert_drift_take")
            rounds: list = next((t["rounds"] for t in taken if t.get("rounds")), [])
            out["requests"].append({"tokens": list(res[0].outputs[0].token_ids), "rounds": rounds})
        out["timings"]["generate_s"] = round(time.perf_counter() - t1, 3)
        config = getattr(llm.llm_engine, "model_config", None)
        out["dtype"] = str(getattr(config, "dtype", "?")).replace("torch.", "")
        out["ok"] = True
    except Exception as exc:
        out["error"] = one_line_error(exc)
        out["traceback"] = traceback.format_exc()[-4000:]
    finally:
        if llm is not None:
            shutdown_engine(llm)
            del llm
            import gc

            gc.collect()
        out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out
