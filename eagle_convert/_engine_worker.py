"""Subprocess worker that runs the real vLLM for `engine_check` and `vllm_smoke`.

    python -m eagle_convert._engine_worker {check|smoke} < request.json

Reads one JSON request on stdin and prints exactly one JSON line on stdout (the real stdout;
everything vLLM prints is sent to stderr). vLLM's global state (distributed groups, current
config, Prometheus registry, engine processes) lives and dies with this process.
Not a public API: the request/response shapes are private to engine_check.py and vllm_smoke.py.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

SENTINEL_INT = -12345


def one_line_error(exc: BaseException) -> str:
    """``Type: first meaningful line`` of an exception (vLLM messages can be very long)."""
    name = type(exc).__name__
    msg = str(exc).strip()
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__module__.startswith("pydantic"):
        try:  # pydantic ValidationError: the first error's message and its wrapped exception type
            first = errors()[0]
            msg = str(first.get("msg", msg))
            inner = (first.get("ctx") or {}).get("error")
            if isinstance(inner, BaseException):
                name = type(inner).__name__
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        except Exception:
            pass
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    # Drop the long lists vLLM appends (every parameter, every registered architecture).
    for cut in (" The available parameters", " Supported architectures:"):
        text = text.split(cut, 1)[0]
    if len(text) > 500:
        text = text[:497] + "..."
    return f"{name}: {text}" if text else name


# ----------------------------------------------------------------------------------- check


def _fill_sentinel(model) -> None:
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.numel() == 0:
                continue
            if p.is_floating_point() or p.is_complex():
                p.data.fill_(float("nan"))
            elif p.dtype != torch.bool:
                p.data.fill_(SENTINEL_INT)


def _sentinel_mask(p):
    import torch

    if p.is_floating_point() or p.is_complex():
        return torch.isnan(p)
    if p.dtype == torch.bool:
        return torch.zeros_like(p, dtype=torch.bool)
    return p == SENTINEL_INT


def _packed_mapping(model) -> dict[str, list[str]]:
    mapping = dict(getattr(model, "packed_modules_mapping", {}) or {})
    mapping.setdefault("qkv_proj", ["q_proj", "k_proj", "v_proj"])
    mapping.setdefault("gate_up_proj", ["gate_proj", "up_proj"])
    return mapping


def _checkpoint_key(vllm_name: str) -> str:
    """vLLM parameter name -> the on-disk EAGLE-3 key that fills it (canonical layout)."""
    if vllm_name == "draft_id_to_target_id":
        return "d2t"
    if vllm_name.startswith("model."):
        return vllm_name[len("model."):]
    return vllm_name


_UNUSED_PARAM = re.compile(r"model\.layers\.(\d+)\.hidden_norm\.weight")


def _scan_unwritten(model) -> tuple[list[str], list[tuple[str, list[str]]], list[str]]:
    """Fully written parameter names, (unwritten name, checkpoint keys that fill it) pairs, and
    unwritten parameters the forward pass never reads (``layers.{k>=1}.hidden_norm``).

    A stacked parameter (qkv_proj, gate_up_proj, ...) that is only partly unwritten is reported
    per shard as ``name[shard]``; any other partly unwritten parameter as ``name[partial]``.
    """
    import torch

    modules = dict(model.named_modules())
    packed = _packed_mapping(model)
    loaded: list[str] = []
    unused: list[str] = []
    unwritten: list[tuple[str, list[str]]] = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() == 0:
                loaded.append(name)  # nothing to hold a sentinel (e.g. a placeholder)
                continue
            mask = _sentinel_mask(p.data)
            if not bool(mask.any()):
                loaded.append(name)
                continue
            mod_name, _, pname = name.rpartition(".")
            parent, _, leaf = mod_name.rpartition(".")
            sizes = list(getattr(modules.get(mod_name), "output_sizes", None) or [])
            shards = packed.get(leaf)
            if shards and len(sizes) == len(shards) and p.dim() >= 1 and p.shape[0] == sum(sizes):
                missing, start = [], 0
                for shard, size in zip(shards, sizes):
                    if bool(mask[start:start + size].any()):
                        missing.append(shard)
                    start += size
                keys = [_checkpoint_key(f"{parent}.{s}.{pname}") for s in missing]
                if len(missing) == len(shards):
                    unwritten.append((name, keys))
                else:
                    unwritten.extend((f"{name}[{s}]", [k]) for s, k in zip(missing, keys))
                continue
            if _UNUSED_PARAM.fullmatch(name) and int(_UNUSED_PARAM.fullmatch(name).group(1)) > 0:
                unused.append(name)  # built on every layer, read only by layer 0
                continue
            label = name if bool(mask.all()) else f"{name}[partial]"
            unwritten.append((label, [_checkpoint_key(name)]))
    return loaded, unwritten, unused


def _applied_config(model) -> dict:
    """What the built draft actually uses (flags after vLLM's config translation)."""
    inner = getattr(model, "model", None)
    cfg = getattr(model, "config", None)
    d2t = getattr(model, "draft_id_to_target_id", None)
    return {
        "class": type(model).__name__,
        "use_aux_hidden_state": getattr(inner, "use_aux_hidden_state", None),
        "num_aux_hidden_states": getattr(inner, "num_aux_hidden_states", None)
        or getattr(inner, "num_aux_layers", None),
        "fc_input_size": getattr(inner, "fc_input_size", None),
        "fc_norm": getattr(inner, "fc_norm", None) is not None,
        "norm_output": bool(getattr(inner, "norm_output", False)),
        "norm_before_fc": bool(getattr(inner, "norm_before_fc", False)),
        "norm_before_residual": bool(getattr(cfg, "norm_before_residual", False)),
        "num_hidden_layers": getattr(cfg, "num_hidden_layers", None),
        "draft_vocab_size": getattr(cfg, "draft_vocab_size", None),
        "has_d2t_parameter": d2t is not None,
        "eagle_aux_hidden_state_layer_ids": getattr(cfg, "eagle_aux_hidden_state_layer_ids", None),
    }


def _aux_layers(vc) -> dict:
    """Target layers vLLM taps for the draft: the V1 runner's (CPU, and GPU without the V2 runner)
    and the V2 runner's config lookups, and the target's default (2, N//2, N-3)."""
    from types import SimpleNamespace

    out: dict = {}
    n = vc.model_config.get_total_num_hidden_layers()
    out["aux_layers_default"] = [2, n // 2, n - 3]
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        v1 = GPUModelRunner._get_eagle3_aux_layers_from_config(
            SimpleNamespace(speculative_config=vc.speculative_config)
        )
        out["aux_layers_v1"] = list(v1) if v1 else None
    except Exception as exc:
        out["aux_layers_v1_error"] = one_line_error(exc)
    try:
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

        v2 = get_eagle3_aux_layers_from_config(vc.speculative_config)
        out["aux_layers_v2"] = list(v2) if v2 else None
    except Exception as exc:
        out["aux_layers_v2_error"] = one_line_error(exc)
    out["aux_layers_used_v1"] = out.get("aux_layers_v1") or out["aux_layers_default"]
    try:  # which runner this machine would use (V2 needs Triton, i.e. a GPU)
        out["model_runner"] = "v2" if vc.use_v2_model_runner else "v1"
    except Exception:
        out["model_runner"] = "v1"
    if out["model_runner"] == "v2":
        out["aux_layers_used"] = out.get("aux_layers_v2") or out["aux_layers_default"]
    else:
        out["aux_layers_used"] = out["aux_layers_used_v1"]
    return out


def run_check_many(req: dict) -> dict:
    """Check every draft in ``req["drafts"]`` against ``req["target"]``, one after another."""
    t0 = time.perf_counter()
    results = []
    for draft in req["drafts"]:
        r = run_check({**req, "draft": draft})
        r["draft"] = draft
        results.append(r)
    return {"ok": all(r["ok"] for r in results), "results": results,
            "seconds": round(time.perf_counter() - t0, 3)}


def run_check(req: dict) -> dict:
    t0 = time.perf_counter()
    out: dict = {"ok": False, "loaded": [], "unwritten": [], "unwritten_keys": [], "unused": [],
                 "shared_from_target": [], "problems": [], "error": None, "timings": {}}
    import torch

    import vllm
    from vllm.engine.arg_utils import EngineArgs

    out["vllm_version"] = vllm.__version__
    out["timings"]["import_s"] = round(time.perf_counter() - t0, 3)
    spec = {"method": req.get("method", "eagle3"), "model": req["draft"],
            "num_speculative_tokens": int(req.get("num_speculative_tokens", 3))}
    try:
        vc = EngineArgs(
            model=req["target"], dtype=req.get("dtype", "auto"),
            max_model_len=int(req.get("max_model_len", 512)), enforce_eager=True,
            speculative_config=spec, seed=0,
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
        from vllm.v1.worker.cpu_model_runner import _set_torch_accelerator_to_noop

        _set_torch_accelerator_to_noop()
    elif current_platform.is_cuda_alike():
        torch.cuda.set_device(0)

    state: dict = {}
    orig_create = base_loader.BaseModelLoader.create_model
    orig_pwal = base_loader.process_weights_after_loading

    def create_model(self, *a, **kw):
        model = orig_create(self, *a, **kw)
        _fill_sentinel(model)
        state["model"] = model
        return model

    def process_weights_after_loading(model, *a, **kw):
        state["scan"] = _scan_unwritten(model)
        state["has_own_embed_tokens"] = bool(getattr(model, "has_own_embed_tokens", False))
        state["has_own_lm_head"] = bool(getattr(model, "has_own_lm_head", False))
        state["applied"] = _applied_config(model)
        return orig_pwal(model, *a, **kw)

    base_loader.BaseModelLoader.create_model = create_model
    base_loader.process_weights_after_loading = process_weights_after_loading
    init_dir = tempfile.mkdtemp(prefix="eagle-convert-dist-")
    stage = "init"
    try:
        with set_current_vllm_config(vc):
            init_distributed_environment(
                world_size=1, rank=0, local_rank=0, backend="gloo",
                distributed_init_method=f"file://{init_dir}/store",
            )
            initialize_model_parallel(1, 1)
            stage = "load"
            t1 = time.perf_counter()
            get_model(vllm_config=vc, model_config=vc.speculative_config.draft_model_config,
                      load_config=get_draft_load_config(vc))
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
        # Mirror SpecDecodeBaseProposer._maybe_share_embeddings / _maybe_share_lm_head: a draft
        # without its own embed_tokens (same width, PP 1) or lm_head gets the target's.
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


# ----------------------------------------------------------------------------------- smoke


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
        model=req["target"], enforce_eager=True, max_model_len=int(req["max_model_len"]),
        dtype=req.get("dtype", "auto"), seed=int(req["seed"]), disable_log_stats=False,
        tensor_parallel_size=int(req["tensor_parallel_size"]),
        max_num_seqs=int(req.get("max_num_seqs", 8)),
    )
    if req.get("draft"):
        kwargs["speculative_config"] = {
            "method": req.get("method", "eagle3"), "model": req["draft"],
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
            TokensPrompt(prompt_token_ids=[int(t) for t in p]) if isinstance(p, list) else p
            for p in req["prompts"]
        ]
        params = SamplingParams(
            max_tokens=int(req["max_new_tokens"]), temperature=float(req["temperature"]),
            seed=int(req["seed"]), ignore_eos=True,
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
    names = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens")
    drafts, draft_tokens, accepted = (
        int(_metric_sum(after, n) - _metric_sum(before, n)) for n in names
    )
    pos_after = _metric_vector(after, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_before = _metric_vector(before, "vllm:spec_decode_num_accepted_tokens_per_pos")
    pos_before += [0] * (len(pos_after) - len(pos_before))
    n_tokens = sum(len(o) for o in outputs)
    out.update(
        ok=True, outputs=outputs, num_drafts=drafts, num_draft_tokens=draft_tokens,
        num_accepted=accepted, accepted_per_pos=[a - b for a, b in zip(pos_after, pos_before)],
        seconds=round(gen_s, 4), tokens_per_s=(n_tokens / gen_s) if gen_s > 0 else math.inf,
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


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in ("check", "smoke"):
        print("usage: python -m eagle_convert._engine_worker {check|smoke} < request.json",
              file=sys.stderr)
        return 2
    req = json.loads(sys.stdin.read())
    # Keep the real stdout for the one JSON line; route every other print/log to stderr.
    sys.stdout.flush()
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        result = run_check_many(req) if argv[0] == "check" else run_smoke(req)
    except Exception as exc:  # import failures and bugs: still answer with one JSON line
        result = {"ok": False, "error": one_line_error(exc), "stage": "worker",
                  "traceback": traceback.format_exc()}
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip slow/unsafe interpreter teardown of vLLM's threads
