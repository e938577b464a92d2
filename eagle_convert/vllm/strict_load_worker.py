"""The session worker's ``load_check`` op: load each draft with vLLM's own loader and report.

vLLM builds its engine config for the target and the draft, then loads the draft through
``get_model`` with two loader hooks installed (`vllm/hooks.py`: sentinel fill on create,
unwritten scan and applied config after loading), in this process, on a one-rank gloo group.
Runs inside ``python -m eagle_convert.vllm.session_worker``.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
import traceback
from pathlib import Path

from eagle_convert.vllm.errors import one_line_error
from eagle_convert.vllm.hooks import applied_config, fill_sentinel, scan_unwritten


def _aux_layers(vc) -> dict:
    """Target layers vLLM taps for the draft: the V1 runner's lookup (vLLM <= 0.33: CPU, and GPU
    without the V2 runner), the V2 runner's (`eagle3_utils.get_eagle3_aux_layers_from_config`, the
    only one from 0.34.0), the target's default (2, N//2, N-3), and which of them the runner this
    machine would use (`runners.runner_kind`) takes."""
    from types import SimpleNamespace

    from eagle_convert.vllm.runners import V1_RUNNER, has_v1_runner, runner_kind
    from eagle_convert.vllm_model import default_aux_ids

    out: dict = {}
    n = vc.model_config.get_total_num_hidden_layers()
    out["aux_layers_default"] = list(default_aux_ids(n))
    v1_present = has_v1_runner()
    if v1_present:
        try:
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            v1 = GPUModelRunner._get_eagle3_aux_layers_from_config(
                SimpleNamespace(speculative_config=vc.speculative_config)
            )
            out["aux_layers_v1"] = list(v1) if v1 else None
        except Exception as exc:
            out["aux_layers_v1_error"] = one_line_error(exc)
    else:
        out["aux_layers_v1_error"] = f"this vLLM has no Model Runner V1 ({V1_RUNNER})"
    try:
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

        v2 = get_eagle3_aux_layers_from_config(vc.speculative_config)
        out["aux_layers_v2"] = list(v2) if v2 else None
    except Exception as exc:
        out["aux_layers_v2_error"] = one_line_error(exc)
    if v1_present:  # what V1 would tap (validate compares it with its V1 table)
        out["aux_layers_used_v1"] = out.get("aux_layers_v1") or out["aux_layers_default"]
    out["model_runner"] = runner_kind(vc)
    if out["model_runner"] == "v2":
        out["aux_layers_used"] = out.get("aux_layers_v2") or out["aux_layers_default"]
    else:
        out["aux_layers_used"] = out.get("aux_layers_used_v1") or out["aux_layers_default"]
    return out


def run_check_many(req: dict) -> dict:
    """Check every draft in ``req["drafts"]`` against ``req["target"]``, one after another."""
    t0 = time.perf_counter()
    results = []
    for draft in req["drafts"]:
        r = run_check({**req, "draft": draft})
        r["draft"] = draft
        results.append(r)
    return {"ok": all(r["ok"] for r in results), "results": results, "seconds": round(time.perf_counter() - t0, 3)}


def run_check(req: dict) -> dict:
    t0 = time.perf_counter()
    out: dict = {
        "ok": False,
        "loaded": [],
        "unwritten": [],
        "unwritten_keys": [],
        "unused": [],
        "shared_from_target": [],
        "problems": [],
        "error": None,
        "timings": {},
    }
    import torch
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    out["vllm_version"] = vllm.__version__
    out["timings"]["import_s"] = round(time.perf_counter() - t0, 3)
    from eagle_convert.vllm_model import speculative_config_for

    spec = speculative_config_for(req["draft"], int(req.get("num_speculative_tokens", 3)), req.get("speculative"))
    try:
        vc = EngineArgs(
            model=req["target"],
            dtype=req.get("dtype", "auto"),
            max_model_len=int(req.get("max_model_len", 512)),
            enforce_eager=True,
            speculative_config=spec,
            seed=0,
        ).create_engine_config()
    except Exception as exc:  # config-time failures: arch not registered, bad config.json, ...
        out["error"] = one_line_error(exc)
        out["stage"] = "config"
        return out
    out["timings"]["config_s"] = round(time.perf_counter() - t0, 3)

    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.model_loader import base_loader, get_model
    from vllm.model_executor.model_loader.utils import get_draft_load_config
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        from eagle_convert.vllm.runners import cpu_accelerator_noop

        cpu_accelerator_noop()
    elif current_platform.is_cuda_alike():
        torch.cuda.set_device(0)

    state: dict = {}
    orig_create = base_loader.BaseModelLoader.create_model
    orig_pwal = base_loader.process_weights_after_loading

    def create_model(self, *a, **kw):
        model = orig_create(self, *a, **kw)
        fill_sentinel(model)
        state["model"] = model
        return model

    def process_weights_after_loading(model, *a, **kw):
        state["scan"] = scan_unwritten(model)
        state["has_own_embed_tokens"] = bool(getattr(model, "has_own_embed_tokens", False))
        state["has_own_lm_head"] = bool(getattr(model, "has_own_lm_head", False))
        state["applied"] = applied_config(model)
        return orig_pwal(model, *a, **kw)

    base_loader.BaseModelLoader.create_model = create_model
    base_loader.process_weights_after_loading = process_weights_after_loading
    init_dir = tempfile.mkdtemp(prefix="eagle-convert-dist-")
    stage = "init"
    try:
        with set_current_vllm_config(vc):
            init_distributed_environment(
                world_size=1,
                rank=0,
                local_rank=0,
                backend="gloo",
                distributed_init_method=f"file://{init_dir}/store",
            )
            initialize_model_parallel(1, 1)
            stage = "load"
            t1 = time.perf_counter()
            get_model(
                vllm_config=vc,
                model_config=vc.speculative_config.draft_model_config,
                load_config=get_draft_load_config(vc),
            )
            out["timings"]["load_s"] = round(time.perf_counter() - t1, 3)
    except Exception as exc:
        out["error"] = one_line_error(exc)
        out["stage"] = stage
        if req.get("traceback"):
            out["traceback"] = traceback.format_exc()
    finally:
        base_loader.BaseModelLoader.create_model = orig_create
        base_loader.process_weights_after_loading = orig_pwal
        try:
            from vllm.distributed import destroy_distributed_environment, destroy_model_parallel

            destroy_model_parallel()
            destroy_distributed_environment()
        except Exception:
            pass
        for f in Path(init_dir).iterdir():
            f.unlink(missing_ok=True)
        os.rmdir(init_dir)

    if "scan" in state:
        loaded, unwritten, unused = state["scan"]
        draft_cfg = vc.speculative_config.draft_model_config.hf_config
        target_cfg = vc.model_config.hf_config
        shared = []
        # Mirror V1's SpecDecodeBaseProposer._maybe_share_embeddings / _maybe_share_lm_head: a draft
        # without its own embed_tokens (same width, PP 1) or lm_head gets the target's. V2's
        # eagle/utils.py maybe_share_target_embed shares without the width check: a narrower missing
        # embedding stays reported unwritten here, as either runner fails with it.
        if not state["has_own_embed_tokens"] and getattr(draft_cfg, "hidden_size", None) == (
            target_cfg.get_text_config().hidden_size
        ):
            shared.append("model.embed_tokens.weight")
        draft_vocab = getattr(draft_cfg, "draft_vocab_size", None) or draft_cfg.vocab_size
        if not state["has_own_lm_head"] and draft_vocab == vc.model_config.get_vocab_size():
            shared.append("lm_head.weight")
        kept = [(u, ks) for u, ks in unwritten if u not in shared]
        out["loaded"] = loaded
        out["unused"] = unused
        out["applied"] = applied = {**state["applied"], **_aux_layers(vc)}
        # The target appends one state per tapped id in 0..N (0 = embeddings, k = after layer k):
        # duplicate or out-of-range ids give fewer states than fc expects.
        n_aux, used = applied.get("num_aux_hidden_states"), applied.get("aux_layers_used")
        n_layers = vc.model_config.get_total_num_hidden_layers()
        taps = sorted({int(i) for i in used or () if 0 <= int(i) <= n_layers})
        if applied.get("use_aux_hidden_state") and n_aux and used and len(taps) != n_aux:
            out["problems"].append(
                f"fc expects {n_aux} aux hidden states but vLLM taps {len(taps)} target layer(s) "
                f"{taps} for ids {list(used)}: the first draft step fails"
            )
        out["unwritten"] = [u for u, _ in kept]
        out["unwritten_keys"] = [k for _, ks in kept for k in ks]
        out["unwritten_key_map"] = {u: ks for u, ks in kept}
        out["shared_from_target"] = [u for u, _ in unwritten if u in shared]
    elif out["error"] is None:
        out["error"] = "internal: the loader hook did not run (vLLM loader changed?)"
    out["ok"] = out["error"] is None and not out["unwritten"] and not out["problems"]
    state.clear()  # free the draft before the next one in a batch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out
