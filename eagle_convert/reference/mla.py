"""Multi-head latent attention (MLA) of vLLM's MLA EAGLE-3 draft, in torch.

vLLM 0.32.0 `model_executor/models/deepseek_eagle3.py` builds every draft layer's attention as
`deepseek_v2.py::DeepseekV2MLAAttention` (layer 0 reads `[embeds ‖ hidden]`, `input_size = 2H`),
computed by `model_executor/layers/mla.py::MultiHeadLatentAttentionWrapper.forward`:

    q     = q_b_proj(q_a_layernorm(q_a_proj(x)))        (q_proj(x) when q_lora_rank is None)
    c, kr = split(kv_a_proj_with_mqa(x), [kv_lora_rank, qk_rope_head_dim])
    k_nope, v = split(kv_b_proj(kv_a_layernorm(c)), [qk_nope_head_dim, v_head_dim]) per head
    q_nope, q_pe = split(q, [qk_nope_head_dim, qk_rope_head_dim]) per head
    q_pe, kr = rope(q_pe), rope(kr)                     (interleaved pairs: `is_neox_style=False`)
    attention of [q_nope ‖ q_pe] on [k_nope ‖ kr] (kr shared by every head), values v,
    scale (qk_nope_head_dim + qk_rope_head_dim) ** -0.5 (times mscale² for deepseek_yarn)
    o_proj(out)

vLLM's backends compute the same function either expanded (prefill: `kv_b_proj` applied to the
cached latent) or absorbed (decode: `W_UK` folded into q, `W_UV` into the output, attention over
the 576-wide latent cache); this module always expands and hands per-head keys and values to the
layer's `KVSlot`, so the decoding cache, the TTT trainer's extended-diagonal slots and any slot
that observes attention work unchanged. The rope follows
`rotary_embedding/__init__.py::get_rope`: "default" rope, or `deepseek_scaling_rope.py::
DeepseekScalingRotaryEmbedding` when the config's rope has a type (`deepseek_yarn`: yarn inverse
frequencies, cos/sin times mscale(mscale) / mscale(mscale_all_dim), and the softmax scale times
mscale(mscale_all_dim)²; `deepseek_llama_scaling` when `attention_factor` is 1.0: no softmax factor).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from eagle_convert.vllm_model import MLA_DIM_DEFAULTS


@dataclass(frozen=True)
class MLAConfig:
    """The MLA fields vLLM's draft layer reads, with the rope it builds for them resolved."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_type: str = "default"  # default | deepseek_yarn | deepseek_llama_scaling
    rope_factor: float = 1.0
    original_max_position: int = 4096
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    rope_mscale: float = 1.0  # cos and sin are multiplied by it
    softmax_scale: float = 1.0  # (qk_nope_head_dim + qk_rope_head_dim) ** -0.5, with the yarn factor

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


def _yarn_mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def mla_config_from_dict(cfg: dict[str, Any], rope: dict[str, Any]) -> MLAConfig:
    """The MLA fields of a draft config and its rope dict (`vllm_model.rope_parameters`).

    Raises:
        NotImplementedError: the MLA layer uses an activation vLLM rejects (only silu).
    """
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise NotImplementedError(f"MLA draft hidden_act {act!r}: vLLM's DeepseekV2MLP supports only silu")
    dims = {k: cfg[k] if k in cfg else v for k, v in MLA_DIM_DEFAULTS.items()}
    nope, pe = int(dims["qk_nope_head_dim"]), int(dims["qk_rope_head_dim"])
    scale = (nope + pe) ** -0.5
    kind = str(rope.get("rope_type", "default"))
    fields: dict[str, Any] = {}
    if kind != "default":
        kind = "deepseek_llama_scaling" if rope.get("attention_factor") == 1.0 else "deepseek_yarn"
        factor = float(rope["factor"])
        mscale, mscale_all = float(rope.get("mscale", 1.0)), float(rope.get("mscale_all_dim", 0.0))
        fields = {
            "rope_factor": factor,
            "original_max_position": int(rope["original_max_position_embeddings"]),
            "beta_fast": float(rope.get("beta_fast", 32)),
            "beta_slow": float(rope.get("beta_slow", 1)),
            "rope_mscale": _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all),
        }
        if kind == "deepseek_yarn":
            scale *= _yarn_mscale(factor, mscale_all) ** 2
    q_lora = dims["q_lora_rank"]
    return MLAConfig(
        q_lora_rank=None if q_lora is None else int(q_lora),
        kv_lora_rank=int(dims["kv_lora_rank"]),
        qk_nope_head_dim=nope,
        qk_rope_head_dim=pe,
        v_head_dim=int(dims["v_head_dim"]),
        rope_type=kind,
        softmax_scale=scale,
        **fields,
    )


def mla_inv_freq(mla: MLAConfig, theta: float) -> Tensor:
    """Inverse frequencies (fp32) of the `qk_rope_head_dim` rotary embedding, yarn-corrected for
    the deepseek scaling types (`DeepseekScalingRotaryEmbedding._compute_inv_freq`)."""
    d = mla.qk_rope_head_dim
    pos = theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    if mla.rope_type == "default":
        return 1.0 / pos

    def dim_of(rotations: float) -> float:  # common.py::yarn_find_correction_dim
        return d * math.log(mla.original_max_position / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = float(max(math.floor(dim_of(mla.beta_fast)), 0))
    high = float(min(math.ceil(dim_of(mla.beta_slow)), d - 1))
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (high frequencies), 0: interpolate
    return (1.0 / (mla.rope_factor * pos)) * (1 - keep) + (1.0 / pos) * keep


def apply_rope_interleaved(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """GPT-J-style rotation of pairs (x[2i], x[2i+1]) (`common.py::rotate_gptj`). x: [B, h, T, d],
    cos/sin: [B, 1, T, d/2] fp32."""
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.flatten(-2).to(x.dtype)


class Attends(Protocol):
    """A layer's key/value slot (`drafter.KVSlot`)."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor: ...


class MLAAttention(nn.Module):
    """One draft layer's MLA; parameter names are vLLM's checkpoint names (`self_attn.q_a_proj` ...).

    `norm(dim)` builds the RMSNorm the drafter uses everywhere (vLLM's casting), so q_a_layernorm and
    kv_a_layernorm round as the other norms do."""

    def __init__(
        self, mla: MLAConfig, hidden_size: int, num_heads: int, in_dim: int, norm: Callable[[int], nn.Module]
    ) -> None:
        super().__init__()
        self.mla, self.nh = mla, num_heads
        if mla.q_lora_rank is not None:
            self.q_a_proj = nn.Linear(in_dim, mla.q_lora_rank, bias=False)
            self.q_a_layernorm = norm(mla.q_lora_rank)
            self.q_b_proj = nn.Linear(mla.q_lora_rank, num_heads * mla.qk_head_dim, bias=False)
        else:
            self.q_proj = nn.Linear(in_dim, num_heads * mla.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(in_dim, mla.kv_lora_rank + mla.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = norm(mla.kv_lora_rank)
        self.kv_b_proj = nn.Linear(mla.kv_lora_rank, num_heads * (mla.qk_nope_head_dim + mla.v_head_dim), bias=False)
        self.o_proj = nn.Linear(num_heads * mla.v_head_dim, hidden_size, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, slot: Attends) -> Tensor:
        m, b, t = self.mla, x.shape[0], x.shape[1]
        if m.q_lora_rank is not None:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        else:
            q = self.q_proj(x)
        q = q.view(b, t, self.nh, m.qk_head_dim).transpose(1, 2)  # [B, h, T, qk]
        latent, k_pe = self.kv_a_proj_with_mqa(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, t, self.nh, m.qk_nope_head_dim + m.v_head_dim)
        k_nope, v = kv.transpose(1, 2).split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
        q_nope, q_pe = q.split([m.qk_nope_head_dim, m.qk_rope_head_dim], dim=-1)
        cos, sin = cos * m.rope_mscale, sin * m.rope_mscale
        q_pe = apply_rope_interleaved(q_pe, cos, sin)
        k_pe = apply_rope_interleaved(k_pe[:, None], cos, sin).expand(b, self.nh, t, m.qk_rope_head_dim)
        out = slot.attend(torch.cat([q_nope, q_pe], dim=-1), torch.cat([k_nope, k_pe], dim=-1), v, m.softmax_scale)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.nh * m.v_head_dim))
