"""A synthetic Llama-3.1-8B-shaped *target* for a synthetic draft, as a sparse safetensors file.

`validate DRAFT --target TARGET` reads the target's config, its headers, and rows of its embedding
and lm_head. This builds the whole 8B layout (embed_tokens, 32 decoder layers, norm, lm_head; 16 GB
of bf16 as the header says) but writes data only where the checks look: the embedding is the draft's
own (`embed_tokens.weight`, copied in-kernel), and the lm_head rows at the draft's d2t-mapped ids
are the draft's lm_head rows (a draft initialised from its target). Everything else is a hole, so
the file takes ~2 GiB of disk and reads as zeros.

    python -m benchmarks.synth_target OUT --draft bench-out/synth-8b-embed
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.synth import DEFAULT_DIMS
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.io.tensordata import read_array

__all__ = ["build_synthetic_target", "target_layout"]


def target_layout(dims: dict[str, int] = DEFAULT_DIMS) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor of a Llama target with these dimensions, in file order."""
    h, i, v, n = dims["hidden"], dims["intermediate"], dims["vocab"], dims["target_layers"]
    hd = h // dims["heads"]
    kv = dims["kv_heads"] * hd
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (v, h))]
    for k in range(n):
        p = f"model.layers.{k}."
        out += [
            (p + "self_attn.q_proj.weight", (h, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "mlp.down_proj.weight", (h, i)),
            (p + "input_layernorm.weight", (h,)),
            (p + "post_attention_layernorm.weight", (h,)),
        ]
    return out + [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]


def _config(dims: dict[str, int]) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": dims["hidden"],
        "intermediate_size": dims["intermediate"],
        "num_attention_heads": dims["heads"],
        "num_key_value_heads": dims["kv_heads"],
        "num_hidden_layers": dims["target_layers"],
        "vocab_size": dims["vocab"],
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def build_synthetic_target(out: Path, draft: Path, dims: dict[str, int] = DEFAULT_DIMS) -> Path:
    """Write `out`/config.json and a sparse `out`/model.safetensors matching the synthetic `draft`."""
    layout = target_layout(dims)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in layout:
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    base = 8 + len(raw)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = open_checkpoint(draft)
    path = out / "model.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(base + offset)  # holes everywhere: zeros on read, no disk blocks
        fd = fh.fileno()
        embed, head = ckpt.tensors.get("embed_tokens.weight"), ckpt.tensors["lm_head.weight"]
        if embed is not None:  # the draft's embedding is the target's (the usual, frozen case)
            with open(draft / embed.file, "rb") as src:
                start, left, dst = (
                    embed.offset,
                    embed.nbytes,
                    base + header["model.embed_tokens.weight"]["data_offsets"][0],
                )
                while left:
                    n = os.copy_file_range(src.fileno(), fd, left, start, dst)
                    start, dst, left = start + n, dst + n, left - n
        ids = np.arange(head.shape[0]) + read_array(ckpt, "d2t").astype(np.int64)
        row = head.nbytes // head.shape[0]
        lm_base = base + header["lm_head.weight"]["data_offsets"][0]
        with open(draft / head.file, "rb") as src:
            for i, t in enumerate(ids.tolist()):
                os.pwrite(fd, os.pread(src.fileno(), row, head.offset + i * row), lm_base + t * row)
    (out / "config.json").write_text(json.dumps(_config(dims), indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth_target", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--draft", type=Path, required=True, help="a synthetic draft (benchmarks.synth)")
    args = parser.parse_args(argv)
    path = build_synthetic_target(args.out, args.draft)
    st = (path / "model.safetensors").stat()
    print(f"{path}: {st.st_size / 2**30:.2f} GiB apparent, {st.st_blocks * 512 / 2**30:.2f} GiB on disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
