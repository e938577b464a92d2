"""Synthetic 8B-shaped EAGLE-3 draft checkpoints for benchmarks.

The draft uses vLLM's native layout (``fc.weight`` [H, 3H], one decoder layer ``layers.0.*``
whose q/k/v projections take the 2H concatenation of embedding and hidden state, ``norm``,
``lm_head`` [Vd, H], ``d2t``/``t2d`` vocabulary maps, optionally ``embed_tokens`` [V, H]) and a
``LlamaForCausalLMEagle3`` config.json with top-level ``eagle_aux_hidden_state_layer_ids``.

Weights are pseudo-random but valid floats (small magnitudes, no NaN/Inf), generated in chunks
and streamed through :mod:`eagle_convert.io.writer`, so building never holds more than a chunk in
memory. Generation is deterministic for a given seed: ``StreamSource`` re-generates the same
bytes, which lets ``verify_file`` check a built file.

    python -m benchmarks.synth OUT [--with-embed] [--scale 0.125] [--dtype bf16]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from eagle_convert.io.atomic import atomic_output_dir
from eagle_convert.io.outfile import OutFile, OutTensor, StreamSource
from eagle_convert.io.writer import plan_shards, write_file, write_index

__all__ = ["DEFAULT_DIMS", "build_synthetic_draft", "draft_tensors", "scaled_dims"]

#: Llama-3.1-8B target, EAGLE-3 draft with a 32k draft vocabulary.
DEFAULT_DIMS: dict[str, int] = {
    "hidden": 4096,
    "intermediate": 14336,
    "heads": 32,
    "kv_heads": 8,
    "vocab": 128256,
    "draft_vocab": 32000,
    "target_layers": 32,
}

_GEN_CHUNK_ELEMS = 8 << 20  # 16 MiB of bf16 per generated chunk

# Per dtype: safetensors name, config torch_dtype, little-endian numpy code, bit pattern of 1.0.
_DTYPES: dict[str, tuple[str, str, str, int]] = {
    "bf16": ("BF16", "bfloat16", "<u2", 0x3F80),
    "fp16": ("F16", "float16", "<u2", 0x3C00),
    "fp32": ("F32", "float32", "<u4", 0x3F800000),
}


def scaled_dims(scale: float) -> dict[str, int]:
    """DEFAULT_DIMS shrunk by ``scale`` (0 < scale <= 1), keeping head_dim 128 and the GQA ratio."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    d = DEFAULT_DIMS
    head_dim = d["hidden"] // d["heads"]
    heads = max(1, round(d["heads"] * scale))
    return {
        "hidden": heads * head_dim,
        "intermediate": max(128, round(d["intermediate"] * scale / 128) * 128),
        "heads": heads,
        "kv_heads": max(1, heads * d["kv_heads"] // d["heads"]),
        "vocab": max(64, round(d["vocab"] * scale)),
        "draft_vocab": max(32, round(d["draft_vocab"] * scale)),
        "target_layers": d["target_layers"],
    }


def _random_floats(dtype: str, nelems: int, seed: list[int]) -> Iterator[bytes]:
    """Chunks of ``nelems`` pseudo-random finite floats, magnitudes ~0.008..0.25, as LE bytes."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < nelems:
        n = min(_GEN_CHUNK_ELEMS, nelems - done)
        bits = rng.integers(0, 1 << 16, n, dtype=np.uint16)
        if dtype == "fp16":
            # sign, exponent field 8..9 (2^-7..2^-6 scale), random mantissa
            bits &= 0x87FF
            bits |= 0x2000
            yield bits.astype("<u2", copy=False).tobytes()
        else:
            # bf16: sign, exponent field 120..123 (2^-7..2^-4 scale), random mantissa;
            # fp32 is the same value widened exactly (bf16 is the top half of an fp32).
            bits &= 0x81FF
            bits |= 0x3C00
            if dtype == "fp32":
                yield (bits.astype("<u4") << 16).tobytes()
            else:
                yield bits.astype("<u2", copy=False).tobytes()
        done += n


def _vocab_maps(vocab: int, draft_vocab: int, seed: int) -> tuple[bytes, bytes]:
    """(d2t, t2d) bytes: target_id = draft_id + d2t[draft_id]; t2d[target_id] marks kept ids."""
    if not 0 < draft_vocab <= vocab:
        raise ValueError(f"draft_vocab must be in (0, vocab={vocab}], got {draft_vocab}")
    rng = np.random.default_rng([seed, 0xD2])
    kept = np.sort(rng.choice(vocab, draft_vocab, replace=False)).astype(np.int64)
    d2t = (kept - np.arange(draft_vocab, dtype=np.int64)).astype("<i8")
    t2d = np.zeros(vocab, dtype=np.bool_)
    t2d[kept] = True
    return d2t.tobytes(), t2d.tobytes()


def draft_tensors(
    *,
    hidden: int,
    intermediate: int,
    heads: int,
    kv_heads: int,
    vocab: int,
    draft_vocab: int,
    with_embed: bool,
    dtype: str = "bf16",
    seed: int = 0,
) -> list[OutTensor]:
    """The draft's tensors, name-sorted; big ones as re-iterable StreamSources."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    if hidden % heads or heads % kv_heads:
        raise ValueError(f"hidden {hidden}, heads {heads}, kv_heads {kv_heads} do not divide")
    st_dtype, _, np_code, one = _DTYPES[dtype]
    itemsize = np.dtype(np_code).itemsize
    head_dim = hidden // heads
    h = hidden
    weights: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, 3 * h),
        "layers.0.self_attn.q_proj.weight": (heads * head_dim, 2 * h),
        "layers.0.self_attn.k_proj.weight": (kv_heads * head_dim, 2 * h),
        "layers.0.self_attn.v_proj.weight": (kv_heads * head_dim, 2 * h),
        "layers.0.self_attn.o_proj.weight": (h, heads * head_dim),
        "layers.0.mlp.gate_proj.weight": (intermediate, h),
        "layers.0.mlp.up_proj.weight": (intermediate, h),
        "layers.0.mlp.down_proj.weight": (h, intermediate),
        "lm_head.weight": (draft_vocab, h),
    }
    if with_embed:
        weights["embed_tokens.weight"] = (vocab, h)
    norms = [
        "layers.0.input_layernorm.weight",
        "layers.0.hidden_norm.weight",
        "layers.0.post_attention_layernorm.weight",
        "norm.weight",
    ]
    tensors: list[OutTensor] = []
    for name, shape in weights.items():
        nelems = shape[0] * shape[1]
        tensor_seed = [seed, zlib.crc32(name.encode())]

        def chunks(nelems: int = nelems, tensor_seed: list[int] = tensor_seed) -> Iterator[bytes]:
            return _random_floats(dtype, nelems, tensor_seed)

        tensors.append(OutTensor(name, st_dtype, shape, StreamSource(nelems * itemsize, chunks)))
    ones = np.full(h, one, dtype=np_code).tobytes()
    tensors += [OutTensor(name, st_dtype, (h,), ones) for name in norms]
    if draft_vocab != vocab:  # a full-vocabulary draft has no maps (vLLM: draft_id_to_target_id is None)
        d2t, t2d = _vocab_maps(vocab, draft_vocab, seed)
        tensors.append(OutTensor("d2t", "I64", (draft_vocab,), d2t))
        tensors.append(OutTensor("t2d", "BOOL", (vocab,), t2d))
    return sorted(tensors, key=lambda t: t.name)


def draft_config(
    *,
    hidden: int,
    intermediate: int,
    heads: int,
    kv_heads: int,
    vocab: int,
    draft_vocab: int,
    target_layers: int,
    dtype: str = "bf16",
) -> dict[str, Any]:
    """config.json of the synthetic draft; aux ids are vLLM's default (2, L//2, L-3)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-05,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
        "eagle_aux_hidden_state_layer_ids": [2, target_layers // 2, target_layers - 3],
        "torch_dtype": _DTYPES[dtype][1],
    }


def build_synthetic_draft(
    out_dir: Path,
    *,
    hidden: int = DEFAULT_DIMS["hidden"],
    intermediate: int = DEFAULT_DIMS["intermediate"],
    heads: int = DEFAULT_DIMS["heads"],
    kv_heads: int = DEFAULT_DIMS["kv_heads"],
    vocab: int = DEFAULT_DIMS["vocab"],
    draft_vocab: int = DEFAULT_DIMS["draft_vocab"],
    target_layers: int = DEFAULT_DIMS["target_layers"],
    with_embed: bool,
    dtype: str = "bf16",
    seed: int = 0,
    max_shard_bytes: int | None = None,
    force: bool = False,
) -> Path:
    """Write the synthetic draft (config.json + safetensors) to ``out_dir``; return ``out_dir``.

    Written through an atomic temp dir: ``out_dir`` appears complete or not at all.
    """
    out_dir = Path(out_dir)
    tensors = draft_tensors(
        hidden=hidden,
        intermediate=intermediate,
        heads=heads,
        kv_heads=kv_heads,
        vocab=vocab,
        draft_vocab=draft_vocab,
        with_embed=with_embed,
        dtype=dtype,
        seed=seed,
    )
    config = draft_config(
        hidden=hidden,
        intermediate=intermediate,
        heads=heads,
        kv_heads=kv_heads,
        vocab=vocab,
        draft_vocab=draft_vocab,
        target_layers=target_layers,
        dtype=dtype,
    )
    files: list[OutFile] = plan_shards(tensors, max_shard_bytes=max_shard_bytes)
    with atomic_output_dir(out_dir, force=force) as tmp:
        for f in files:
            write_file(tmp, f)
        if len(files) > 1:
            write_index(tmp, files)
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output directory (must not exist unless --force)")
    parser.add_argument("--with-embed", action="store_true", help="include embed_tokens.weight [V, H]")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink all dimensions (0 < S <= 1)")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-shard-bytes", type=int, default=None)
    parser.add_argument("--force", action="store_true", help="replace an existing output")
    args = parser.parse_args(argv)
    dims = scaled_dims(args.scale)
    start = time.perf_counter()
    out = build_synthetic_draft(
        args.out,
        **dims,
        with_embed=args.with_embed,
        dtype=args.dtype,
        seed=args.seed,
        max_shard_bytes=args.max_shard_bytes,
        force=args.force,
    )
    wall = time.perf_counter() - start
    size = sum(p.stat().st_size for p in out.iterdir())
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{out}: {size / 2**30:.3f} GiB ({size} bytes), dims {dims}, built in {wall:.2f} s, peak RSS {rss_mib:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
