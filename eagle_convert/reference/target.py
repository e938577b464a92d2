"""The target side of the reference engine: an HF causal LM that also returns EAGLE-3 aux states.

Aux id k means "the residual stream after k decoder layers" (vLLM's `_maybe_add_hidden_state`:
id 0 is the embedding output, id k+1 is taken after layer k). The states are captured with
forward hooks rather than `output_hidden_states`, because HF's last entry is *after* the final
norm while vLLM's id N is before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor


def default_device() -> torch.device:
    """Where the reference engine runs when not told: the first GPU if torch sees one, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """`None` -> `default_device()`; a name ("cpu", "cuda", "cuda:1") -> that device."""
    return default_device() if device is None else torch.device(device)


@dataclass
class TargetOutput:
    logits: Tensor  # [B, T, V] fp32
    aux: Tensor | None  # [B, T, A*H], chunks in ascending layer-id order


class TargetModel:
    """Wraps `LlamaForCausalLM` / `Qwen3ForCausalLM` (any HF decoder with `.model.layers`)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model.eval()
        self.model.requires_grad_(False)
        inner = model.model
        self.layers = inner.layers
        self.num_layers = len(self.layers)
        self.hidden_size = int(model.config.hidden_size)
        self.vocab_size = int(model.config.vocab_size)
        self.embed_weight: Tensor = inner.embed_tokens.weight
        self.lm_head_weight: Tensor = model.lm_head.weight
        self._capture: dict[int, Tensor] | None = None
        self._wanted: set[int] = set()
        inner.embed_tokens.register_forward_hook(self._hook(0))
        for i, layer in enumerate(self.layers):
            layer.register_forward_hook(self._hook(i + 1))

    @property
    def device(self) -> torch.device:
        """The device of the weights; the decoding loop creates its tensors there."""
        return self.embed_weight.device

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, dtype: torch.dtype = torch.float32, device: str | torch.device | None = None
    ) -> TargetModel:
        """Load an HF checkpoint in `dtype` on `device` (None: `default_device()`)."""
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
        dev = resolve_device(device)
        if dev.type != "cpu":  # loaded on CPU; CPU runs stay exactly as before
            model = model.to(dev)
        return cls(model)

    def _hook(self, aux_id: int):
        def hook(_module, _inputs, output):
            if self._capture is not None and aux_id in self._wanted:
                self._capture[aux_id] = output[0] if isinstance(output, tuple) else output

        return hook

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    @staticmethod
    def truncate_cache(cache, length: int) -> None:
        """Keep the first `length` positions (rejected draft tokens are dropped)."""
        extra = int(cache.get_seq_length()) - length
        if extra > 0:
            cache.crop(-extra)

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        *,
        cache=None,
        aux_ids: Sequence[int] | None = None,
        attention_mask: Tensor | None = None,
    ) -> TargetOutput:
        """Run `[B, T]` tokens (continuing `cache` when given); return fp32 logits and aux states."""
        ids = sorted(set(aux_ids)) if aux_ids else []
        if any(i < 0 or i > self.num_layers for i in ids):
            raise ValueError(f"aux ids {ids} outside 0..{self.num_layers}")
        self._capture, self._wanted = {}, set(ids)
        try:
            out = self.model(
                input_ids=input_ids, past_key_values=cache, use_cache=cache is not None, attention_mask=attention_mask
            )
            aux = torch.cat([self._capture[i] for i in ids], dim=-1) if ids else None
        finally:
            self._capture, self._wanted = None, set()
        return TargetOutput(logits=out.logits.float(), aux=aux)
