"""Capture a target's aux states and logits for a draft into a cache (`cache/store.py`), shard by shard.

Two engines write the same format: ``vllm`` (the target in vLLM, tensor and pipeline parallel if
asked; `vllm/capture_ext.py` takes the states out of the running engine) and ``reference`` (the torch
reference target, `reference/target.py`: the fallback without vLLM and the equality baseline).
Only one shard's tensors are in memory at a time; progress ticks carry tokens/s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.cache.options import CaptureOptions
from eagle_convert.cache.store import (
    CACHE_FORMAT,
    CachePlan,
    Manifest,
    ShardEntry,
    file_sha256,
    open_manifest,
    sequences_sha256,
    shard_name,
)
from eagle_convert.errors import UsageError
from eagle_convert.extras import require
from eagle_convert.jsonable import dump
from eagle_convert.jsonable import key as jsonkey
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release


def check_capture_options(opts: CaptureOptions) -> None:
    """Refuse what no capture can run, before anything loads.

    Raises:
        UsageError: parallelism asked of the reference engine (`CaptureOptions` refuses the rest when built).
        MissingExtraError: engine vllm without vLLM installed.
    """
    parallel = opts.tensor_parallel_size > 1 or opts.pipeline_parallel_size > 1 or opts.distributed_executor_backend
    if opts.engine == "reference" and parallel:
        raise UsageError(
            "{engine=reference} runs the target in one process; {tensor_parallel_size}, "
            "{pipeline_parallel_size} and {distributed_executor_backend} need {engine=vllm}",
            options=("engine", "tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend"),
        )
    if opts.distributed_executor_backend == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError(
            "{distributed_executor_backend=ray}: Ray is not installed here",
            hint="pip install ray and start the Ray cluster first: docs/scale.md",
            options=("distributed_executor_backend",),
        )
    if opts.engine == "vllm":
        require("vllm", "capture --engine vllm")


@dataclass
class CaptureResult:
    out: Path = field(metadata=jsonkey("cache"))
    manifest: Manifest
    captured: list[int] = field(metadata=jsonkey("captured_shards"))  # shards captured by this run (the rest kept)
    seconds: float
    tokens: int = field(metadata=jsonkey("captured_tokens"))  # tokens this run captured
    prefill_seconds: float  # time inside the engine's prefills (vLLM) or forwards (reference)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_token(self) -> float:
        return self.manifest.bytes / max(self.manifest.tokens, 1)

    def to_dict(self) -> dict[str, Any]:
        """The cache, its plan and this run's numbers (`capture --json`, schemas/capture-report.schema.json)."""
        man, plan = self.manifest, self.manifest.plan
        keys = "cache engine engine_info aux_layer_ids sequences shards captured_shards tokens captured_tokens"
        return dump(
            self,
            f"{keys} seconds:3 prefill_seconds:3 tokens_per_s:1 bytes bytes_per_token:1",
            engine=plan.engine,
            engine_info=man.engine_info,
            aux_layer_ids=plan.aux_ids,
            sequences=plan.num_sequences,
            shards=len(man.shards),
            tokens=man.tokens,
            bytes=man.bytes,
        )


def draft_features_spec(draft: Path, target_layers: int, release: Release) -> tuple[list[int], list[int] | None]:
    """(aux ids as vLLM ``release`` reads the draft's config, the target id of every draft id or
    None when the vocabularies match).

    The draft is read as every command reads it (`open_checkpoint`, `describe`): the vocabulary
    sizes where vLLM finds them (a speculators config's top level holds ``draft_vocab_size``), and
    d2t under any layout's name and storage; so the rows stored here are the rows the trainer's
    drafter reads (`reference.load_drafter`'s ``draft_to_target``).

    Raises:
        UsageError: the draft has no config.json, its aux ids cannot be determined, or its
        vocabulary is reduced but it has no readable d2t.
    """
    from eagle_convert.draft import describe, open_checkpoint
    from eagle_convert.io import read_array
    from eagle_convert.vllm_model import read_config

    ckpt = open_checkpoint(draft, require_config=True)
    view = read_config(ckpt.config, release)
    ids = view.runtime_aux_ids(target_layers)
    if not ids:
        raise UsageError(f"{ckpt.description}: no aux layer ids, and the target's depth is unknown")
    aux_ids = sorted(set(int(i) for i in ids))
    info = describe(ckpt, release, read_vocab=False)
    if not info.vocab.reduced:
        return aux_ids, None
    d2t = info.disk_name("d2t")
    if d2t is None or tuple(ckpt.tensors[d2t].shape) != (info.draft_vocab_size,):
        raise UsageError(
            f"{ckpt.description}: draft_vocab_size {info.draft_vocab_size} < vocab_size {info.vocab_size} "
            f"but no d2t of {info.draft_vocab_size} entries; eagle-convert validate names what is wrong"
        )
    return aux_ids, [i + int(d) for i, d in enumerate(read_array(ckpt, d2t).tolist())]


def _reference_shard(target: Any, seqs: list[tuple[str, list[int]]], aux_ids, rows, path: Path, meta) -> float:
    import torch
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    for key, ids in seqs:
        res = target.forward(torch.tensor([ids], device=target.device), aux_ids=aux_ids)
        logits = res.logits[0]
        out[f"{key}.ids"] = torch.tensor(ids, dtype=torch.long)
        out[f"{key}.aux"] = res.aux[0].contiguous().cpu()
        out[f"{key}.argmax"] = logits.argmax(-1).long().cpu()
        out[f"{key}.logits"] = (logits if rows is None else logits[:, rows]).float().contiguous().cpu()
    seconds = time.perf_counter() - t0
    save_file(out, str(path), metadata=meta)
    return seconds


def capture_cache(
    target: Path,
    draft: Path,
    sequences: Sequence[Sequence[int]],
    out: Path,
    opts: CaptureOptions | None = None,
    *,
    provenance: Sequence[dict[str, Any]] | None = None,
    force: bool = False,
    on_tick: OnTick | None = None,
    session: Any = None,
    reference_target: Any = None,
    release: Release,
) -> CaptureResult:
    """Capture every sequence into ``out``, resuming a killed capture of the same plan.

    Args:
        target: the target folder (vLLM or transformers loads it).
        draft: the draft folder: its aux ids (as vLLM reads them) and its vocabulary.
        sequences: token ids to prefill, one list per training sequence.
        out: the cache folder (created; a cache of the same plan is continued).
        opts: the engine, its dtype and parallelism, the shard size (default `CaptureOptions()`).
        provenance: per sequence, where it came from (prompt set, index, template); in the manifest.
        force: start over when ``out`` holds another plan's cache.
        on_tick: progress per shard (tokens/s in ``info``).
        session: an open ``EngineSession`` to use (vllm); reference_target: a loaded ``TargetModel``.
        release: the vLLM release whose reading of the draft's aux ids the capture follows (the
            command's entry resolves it).

    Returns:
        CaptureResult with the manifest, what this run captured and its speed.

    Raises:
        UsageError: bad arguments or another plan's cache in ``out``. MissingExtraError: vLLM is not
        installed (engine vllm). EngineError: vLLM failed.
    """
    o = opts or CaptureOptions()
    engine, dtype, shard_size = o.engine, o.dtype, o.shard_size
    check_capture_options(o)
    from eagle_convert.draft import load_target

    if not sequences:
        raise UsageError("capture needs at least one sequence")
    seqs = [[int(t) for t in s] for s in sequences]
    tgt = load_target(target)
    aux_ids, rows = draft_features_spec(Path(draft), int(tgt.num_layers or 0), release)
    plan = CachePlan(
        str(Path(target).resolve()),
        str(Path(draft).resolve()),
        engine,
        dtype,
        aux_ids,
        hashlib.sha256(json.dumps(rows).encode()).hexdigest(),
        sequences_sha256(seqs),
        len(seqs),
        shard_size,
    )
    out = Path(out)
    man, todo = open_manifest(out, plan, force=force)
    if provenance is not None:
        man.provenance = {str(i): dict(p) for i, p in enumerate(provenance)}
    man.save(out)  # before any shard: a kill after the first shard's rename still leaves a cache to resume
    tick = tick_or_nothing(on_tick)
    total = len(list(plan.shards()))
    t0, tokens, prefill, stack = time.perf_counter(), 0, 0.0, ExitStack()
    if engine == "vllm":  # the caller's session, else the one in use, else one closed below
        from eagle_convert.vllm import engine_session

        session = stack.enter_context(engine_session(session))
    if engine == "reference" and reference_target is None:
        import torch

        from eagle_convert.reference import TargetModel

        kw = {} if dtype == "auto" else {"dtype": getattr(torch, dtype)}  # auto: fp32, the reference's own
        reference_target = TargetModel.from_pretrained(target, **kw)  # GPU if torch sees one
    length = o.max_model_len or max(len(s) for s in seqs) + 8
    try:
        for n, idx in plan.shards():
            if n not in todo:
                continue
            part = [(f"s{i}", seqs[i]) for i in idx]
            final = out / shard_name(n)
            tmp = out / (final.name + ".tmp")
            # one key: safetensors writes its metadata map in no fixed order, and a shard's bytes must not vary
            meta = {"eagle_convert": json.dumps({"format": CACHE_FORMAT, "shard": n, "sequences": list(idx)})}
            t1 = time.perf_counter()
            if engine == "vllm":
                res = session.capture_shard(
                    target,
                    part,
                    aux_ids=aux_ids,
                    rows=rows,
                    path=tmp,
                    metadata=meta,
                    dtype=dtype,
                    tensor_parallel_size=o.tensor_parallel_size,
                    pipeline_parallel_size=o.pipeline_parallel_size,
                    executor=o.distributed_executor_backend,
                    max_model_len=length,
                )
                prefill += float(res["prefill_s"])
                man.engine_info = {"engine": "vllm", "vllm_version": res.get("vllm_version"), "dtype": res.get("dtype")}
            else:
                prefill += _reference_shard(reference_target, part, aux_ids, rows, tmp, meta)
                man.engine_info = {"engine": "reference", "dtype": str(reference_target.embed_weight.dtype)[6:]}
            _publish(tmp, final)
            n_tok = sum(len(s) for _, s in part)
            tokens += n_tok
            man.shards[n] = ShardEntry(
                final.name,
                list(idx),
                n_tok,
                final.stat().st_size,
                file_sha256(final),
                round(time.perf_counter() - t1, 3),
            )
            man.save(out)
            rate = tokens / max(time.perf_counter() - t0, 1e-9)
            tick(Tick("capture", len(man.shards), total, f"{rate:.0f} tokens/s"))
        man.save(out)
    finally:
        stack.close()
    return CaptureResult(out, man, [n for n in todo], time.perf_counter() - t0, tokens, prefill)


def _publish(tmp: Path, final: Path) -> None:
    """fsync the shard, rename it into place, fsync the folder: a listed shard survives a crash."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
