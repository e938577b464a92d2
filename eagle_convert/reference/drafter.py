"""A torch reference of the EAGLE-3 / EAGLE-3.1 draft exactly as vLLM computes it.

Mirrors `vllm/model_executor/models/llama_eagle3.py`, `qwen3_eagle3.py` and `deepseek_eagle3.py`
(vLLM 0.32; the MLA attention of the last is `reference/mla.py`): the
same module tree under canonical (vLLM-native) names, the same fused add+RMSNorm casting, rope
positions taken from the target token positions, `combine_hidden_states`, the (normed, aux)
return pair and the d2t offset scatter. Unquantised, one device (CPU or GPU), no tensor parallelism.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from eagle_convert.reference.mla import MLAAttention, MLAConfig, mla_config_from_dict, mla_inv_freq
from eagle_convert.vllm_model import DEFAULT_ROPE_THETA, Release, read_config, rope_parameters


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """vLLM's `ir.ops.rms_norm`: statistics in fp32, weight applied in the weight dtype."""
    orig = x.dtype
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf.to(weight.dtype) * weight).to(orig)


def fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """vLLM's `fused_add_rms_norm`: returns (norm(x + residual), x + residual)."""
    orig = x.dtype
    s = x.float() + residual.float()
    new_residual = s.to(orig)
    s = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    return (s.to(weight.dtype) * weight).to(orig), new_residual


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor, residual: Tensor | None = None):
        if residual is None:
            return rms_norm(x, self.weight, self.eps)
        return fused_add_rms_norm(x, residual, self.weight, self.eps)


@dataclass(frozen=True)
class DraftConfig:
    """The config fields vLLM's EAGLE-3 draft classes read, resolved the way vLLM resolves them."""

    hidden_size: int
    target_hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    vocab_size: int
    draft_vocab_size: int
    num_aux_hidden_states: int
    aux_layer_ids: tuple[int, ...] | None
    rope_theta: float = DEFAULT_ROPE_THETA  # from vllm_model.rope_parameters (draft_config_from_dict)
    rope_scaling: dict[str, Any] | None = None  # the same dict when its rope_type is not "default"
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    use_aux_hidden_state: bool = True
    attention_bias: bool = False
    mlp_bias: bool = False
    qwen3: bool = False
    logit_scale: float = 1.0
    mla: MLAConfig | None = None  # MLA attention (vLLM's deepseek_eagle3.py) instead of Llama/Qwen3
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def draft_config_from_dict(config: dict[str, Any], release: Release) -> DraftConfig:
    """Resolve a draft config.json (native or speculators) into the values vLLM `release` would use
    (the command's entry resolves the release: the reference engine mirrors that release's CPU runner).

    How vLLM reads it (config path, class, flags, aux ids and count) is `vllm_model.read_config`,
    and the rope (which dict wins, the class's default theta) is `vllm_model.rope_parameters`, as
    validate describes it; only the size fields are read here.
    """
    view = read_config(config, release)
    cfg = view.vcfg
    if view.attention != "mla" and cfg.get("model_type") in ("kimi_k2", "deepseek_v2", "deepseek_v3"):
        raise NotImplementedError(f"{view.architecture}: an MLA config under a non-MLA draft class")
    qwen3 = view.attention == "qwen3"
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    ids = view.aux_ids  # the ids of vLLM's CPU runner: V1 up to 0.33.0, V2 from 0.34.0
    rope = rope_parameters(cfg)
    mla = mla_config_from_dict(cfg, rope) if view.attention == "mla" else None
    rope_type = rope["rope_type"]
    flags = view.flags
    return DraftConfig(
        hidden_size=hidden,
        target_hidden_size=int(cfg.get("target_hidden_size") or hidden),
        num_hidden_layers=int(cfg["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        intermediate_size=int(cfg["intermediate_size"]),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        vocab_size=int(cfg["vocab_size"]),
        draft_vocab_size=int(cfg.get("draft_vocab_size") or cfg["vocab_size"]),
        num_aux_hidden_states=int(view.aux_count or 3),
        aux_layer_ids=tuple(int(i) for i in ids) if ids else None,
        rope_theta=float(rope["rope_theta"]),
        rope_scaling=None if rope_type == "default" else rope,
        norm_before_residual=flags["norm_before_residual"],
        norm_before_fc=flags["norm_before_fc"],
        fc_norm=flags["fc_norm"],
        norm_output=flags["norm_output"],
        use_aux_hidden_state=flags["use_aux"],
        attention_bias=bool(cfg.get("attention_bias", cfg.get("bias", False))),
        mlp_bias=bool(cfg.get("mlp_bias", False)) and mla is None,  # DeepseekV2MLP has no bias
        qwen3=qwen3,
        logit_scale=float(cfg.get("logit_scale", 1.0)),
        mla=mla,
        raw=dict(cfg),
    )


def rope_inv_freq(cfg: DraftConfig) -> Tensor:
    """Inverse frequencies (fp32) for the default, linear and llama3 rope types."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    sc = cfg.rope_scaling
    if sc is None:
        return inv
    kind, factor = sc["rope_type"], float(sc.get("factor", 1.0))
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        old = float(sc["original_max_position_embeddings"])
        lo, hi = float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        return torch.where(medium, smoothed, out)
    raise NotImplementedError(f"rope type {kind!r} is not implemented in the reference drafter")


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Neox-style rotation (vLLM Llama/Qwen3 use `is_neox_style=True`). x: [B, h, T, d]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class DraftObserver(Protocol):
    """What a drafter reports when `EagleDrafter.observer` is set (drift, `drift/`): observing
    never changes what is computed, it only receives copies of intermediate values.

    `attention(layer, probs)`: one attention layer's probabilities, fp32 `[B, heads, T, S]` (query
    rows T of this pass, every cached key S). `states(name, value)`: "aux" (the target's aux
    states as given), "fc_input" (after input_norm / fc_norm, what `fc` reads) and, once per pass,
    "fed" (the state fed back to the next step: pre-norm, or post-norm with `norm_output`).
    """

    def attention(self, layer: int, probs: Tensor) -> None: ...

    def states(self, name: str, value: Tensor) -> None: ...


def attention_probs(q: Tensor, k: Tensor, mask: Tensor, scale: float) -> Tensor:
    """Softmax attention weights in fp32 (what SDPA applies), for an observer. k: expanded to q's heads."""
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


class KVSlot(Protocol):
    """Where one attention layer keeps its keys/values; decides what each query may see."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor: ...


def expand_kv(x: Tensor, groups: int) -> Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


class CacheSlot:
    """Incremental causal KV cache; `truncate` drops entries, as vLLM overwrites rejected slots."""

    def __init__(self, observe: Callable[[Tensor], None] | None = None) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.observe = observe  # receives the attention probabilities of every pass

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def truncate(self, n: int) -> None:
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k[:, :, :n], self.v[:, :, :n]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        past = len(self)
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        t, s = q.shape[2], self.k.shape[2]
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=past)
        groups = q.shape[1] // k.shape[1]
        keys = expand_kv(self.k, groups)
        if self.observe is not None:
            self.observe(attention_probs(q, keys, mask, scale))
        return F.scaled_dot_product_attention(q, keys, expand_kv(self.v, groups), attn_mask=mask, scale=scale)


class DraftCache:
    """Per-layer cache slots of one draft sequence; length is the number of cached positions."""

    def __init__(self, num_layers: int, observer: DraftObserver | None = None) -> None:
        self.slots = [
            CacheSlot(None if observer is None else partial(observer.attention, i)) for i in range(num_layers)
        ]

    def __len__(self) -> int:
        return len(self.slots[0])

    def truncate(self, n: int) -> None:
        for s in self.slots:
            s.truncate(n)


class Attention(nn.Module):
    def __init__(self, cfg: DraftConfig, in_dim: int) -> None:
        super().__init__()
        nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(in_dim, nh * hd, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(in_dim, nkv * hd, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(in_dim, nkv * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(nh * hd, cfg.hidden_size, bias=cfg.attention_bias and not cfg.qwen3)
        if cfg.qwen3:  # per-head RMSNorm on q and k before rope
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.qwen3 = cfg.qwen3

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, slot: KVSlot) -> Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.nh, self.hd)
        k = self.k_proj(x).view(b, t, self.nkv, self.hd)
        v = self.v_proj(x).view(b, t, self.nkv, self.hd)
        if self.qwen3:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = slot.attend(q, k, v, self.hd**-0.5)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        h, i, bias = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.gate_proj = nn.Linear(h, i, bias=bias)
        self.up_proj = nn.Linear(h, i, bias=bias)
        self.down_proj = nn.Linear(i, h, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """vLLM's draft `LlamaDecoderLayer`: layer 0 reads [input_layernorm(emb) ‖ hidden_norm(h)]."""

    def __init__(self, cfg: DraftConfig, idx: int) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.idx = idx
        self.norm_before_residual = cfg.norm_before_residual
        in_dim = 2 * h if idx == 0 else h
        self.self_attn: nn.Module = (
            MLAAttention(cfg.mla, h, cfg.num_attention_heads, in_dim, lambda d: RMSNorm(d, cfg.rms_norm_eps))
            if cfg.mla is not None
            else Attention(cfg, in_dim)
        )
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)  # built in every layer, used in layer 0
        self.post_attention_layernorm = RMSNorm(h, cfg.rms_norm_eps)

    def forward(
        self, embeds: Tensor, hidden: Tensor, residual: Tensor | None, cos: Tensor, sin: Tensor, slot: KVSlot
    ) -> tuple[Tensor, Tensor]:
        if self.idx == 0:
            embeds = self.input_layernorm(embeds)
            if self.norm_before_residual:
                hidden = self.hidden_norm(hidden)
                residual = hidden
            else:
                residual = hidden
                hidden = self.hidden_norm(hidden)
            hidden = torch.cat([embeds, hidden], dim=-1)
        else:
            hidden, residual = self.input_layernorm(hidden, residual)
        hidden = self.self_attn(hidden, cos, sin, slot)
        hidden, residual = self.post_attention_layernorm(hidden, residual)
        return self.mlp(hidden), residual


class EagleDrafter(nn.Module):
    """The draft model; parameter names are the canonical checkpoint names."""

    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h, n_aux, th = cfg.hidden_size, cfg.num_aux_hidden_states, cfg.target_hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, h)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        if cfg.use_aux_hidden_state:
            if cfg.norm_before_fc:
                self.input_norm = RMSNorm(n_aux * th, cfg.rms_norm_eps)
            if cfg.fc_norm:
                self.fc_norm = nn.ModuleList(RMSNorm(th, cfg.rms_norm_eps) for _ in range(n_aux))
            self.fc = nn.Linear(n_aux * th, h, bias=False)
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(h, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        # A plain attribute: stays fp32 under `.to(dtype)`.
        self.inv_freq = rope_inv_freq(cfg) if cfg.mla is None else mla_inv_freq(cfg.mla, cfg.rope_theta)
        self.observer: DraftObserver | None = None  # set it before `new_cache()` to watch attention too

    @property
    def draft_to_target(self) -> Tensor:
        """Target id of every draft id (`i + d2t[i]`; identity when the vocabularies match)."""
        base = torch.arange(self.cfg.draft_vocab_size, device=self.d2t.device)
        return base if self.cfg.draft_vocab_size == self.cfg.vocab_size else base + self.d2t

    def combine_hidden_states(self, aux: Tensor) -> Tensor:
        """`[.., A*T]` target aux states (ascending layer order) -> `[.., H]` (input_norm, fc_norm, fc)."""
        if not self.cfg.use_aux_hidden_state:
            return aux
        if self.observer is not None:
            self.observer.states("aux", aux)
        if self.cfg.norm_before_fc:
            aux = self.input_norm(aux)
        if self.cfg.fc_norm:
            chunks = aux.chunk(self.cfg.num_aux_hidden_states, dim=-1)
            aux = torch.cat([n(c) for n, c in zip(self.fc_norm, chunks)], dim=-1)
        if self.observer is not None:
            self.observer.states("fc_input", aux)
        return self.fc(aux)

    def rope(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        inv = self.inv_freq  # a plain attribute: `.to(device)` does not move it
        if inv.device != positions.device:
            inv = self.inv_freq = inv.to(positions.device)
        freqs = positions.float()[..., None] * inv  # [B, T, d/2]
        cos, sin = freqs.cos()[:, None], freqs.sin()[:, None]  # [B, 1, T, d/2]
        return cos, sin

    def forward(
        self, input_ids: Tensor, positions: Tensor, hidden: Tensor, slots: list[KVSlot]
    ) -> tuple[Tensor, Tensor]:
        """One draft pass over `[B, T]` tokens. Returns (normed, aux): normed feeds `lm_head`,
        aux is fed back as the next hidden state (prenorm, or normed with `norm_output`)."""
        embeds = self.embed_tokens(input_ids)
        cos, sin = self.rope(positions)
        residual = None
        for layer, slot in zip(self.layers, slots):
            hidden, residual = layer(embeds, hidden, residual, cos, sin, slot)
        normed, prenorm = self.norm(hidden, residual)
        fed = normed if self.cfg.norm_output else prenorm
        if self.observer is not None:
            self.observer.states("fed", fed)
        return normed, fed

    def draft_logits(self, normed: Tensor) -> Tensor:
        """Logits over the draft vocabulary."""
        return self.lm_head(normed).float() * self.cfg.logit_scale

    def compute_logits(self, normed: Tensor) -> Tensor:
        """Logits over the target vocabulary: -inf except at `i + d2t[i]` (vLLM `compute_logits`)."""
        logits = self.draft_logits(normed)
        if self.cfg.draft_vocab_size == self.cfg.vocab_size:
            return logits
        out = logits.new_full((*logits.shape[:-1], self.cfg.vocab_size), float("-inf"))
        out[..., self.draft_to_target] = logits
        return out

    def new_cache(self) -> DraftCache:
        return DraftCache(len(self.layers), self.observer)
