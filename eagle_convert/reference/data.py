"""Reading a draft checkpoint folder into the reference drafter, the way vLLM loads it.

Config resolution lives in `drafter.draft_config_from_dict`; tensor names go through the core
keymap; loading is strict about unknown names (vLLM raises) and tolerant where vLLM is (`t2d`,
`mask_hidden`, `input_norm.` without `norm_before_fc`, unknown `.bias`, missing d2t).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from eagle_convert.reference.drafter import DraftConfig, EagleDrafter, draft_config_from_dict
from eagle_convert.reference.target import resolve_device

__all__ = ["canonicalize_state_dict", "drafter_from_state_dict", "load_drafter", "load_state"]


def canonicalize_state_dict(sd: dict[str, Tensor]) -> dict[str, Tensor]:
    """Producer names -> canonical names through the core keymap (`midlayer.` -> `layers.0.`,
    NeMo's `model.` prefix, legacy `aux_norm_*`); the one place to swap canonicalisation."""
    from eagle_convert.draft.layout import canonical_map

    return {canon: sd[name] for name, canon in canonical_map(sd).items()}


def load_state(path: Path) -> dict[str, Tensor]:
    """Every tensor of a draft folder: single or indexed safetensors, or pytorch_model.bin."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if files:
        sd: dict[str, Tensor] = {}
        for f in files:
            sd.update(load_file(f))
        return sd
    return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)


def load_drafter(path: Path, *, target_embed: Tensor | None = None,
                 target_lm_head: Tensor | None = None, dtype: torch.dtype = torch.float32,
                 device: str | torch.device | None = None) -> EagleDrafter:
    """Build the drafter from a checkpoint folder. Without `embed_tokens.weight` (or `lm_head`)
    the target's tensor is shared, as vLLM does. `device` None: `default_device()` (put the
    drafter where the target is)."""
    path = Path(path)
    cfg = draft_config_from_dict(json.loads((path / "config.json").read_text()))
    sd = canonicalize_state_dict(load_state(path))
    return drafter_from_state_dict(cfg, sd, target_embed=target_embed,
                                   target_lm_head=target_lm_head, dtype=dtype,
                                   device=resolve_device(device))


def drafter_from_state_dict(cfg: DraftConfig, sd: dict[str, Tensor], *,
                            target_embed: Tensor | None = None,
                            target_lm_head: Tensor | None = None,
                            dtype: torch.dtype = torch.float32,
                            device: str | torch.device | None = None) -> EagleDrafter:
    """Strict load: unexpected names raise (as in vLLM); `t2d` is dropped, d2t defaults to zeros.
    The model is built on CPU and moved to `device` when one is given (None: stays on CPU, what
    the CPU-only trainer relies on)."""
    # The names vLLM's load_weights skips rather than rejects.
    skip = ["t2d", "mask_hidden"] + ([] if cfg.norm_before_fc else ["input_norm."])
    skip += [] if cfg.use_aux_hidden_state else ["fc."]
    sd = {k: v for k, v in sd.items() if not any(s in k for s in skip)}
    if "embed_tokens.weight" not in sd:
        if target_embed is None:
            raise ValueError("draft has no embed_tokens.weight; pass target_embed")
        sd["embed_tokens.weight"] = target_embed
    if "lm_head.weight" not in sd:
        if target_lm_head is None:
            raise ValueError("draft has no lm_head.weight; pass target_lm_head")
        sd["lm_head.weight"] = target_lm_head
    model = EagleDrafter(cfg)
    own = model.state_dict()
    unexpected = sorted(k for k in sd if k not in own and not k.endswith(".bias"))
    if unexpected:
        raise ValueError(f"There is no module or parameter named {unexpected}")
    missing = sorted(k for k in own if k not in sd and k != "d2t"
                     and not (k.endswith("hidden_norm.weight") and not k.startswith("layers.0.")))
    if missing:
        raise ValueError(f"checkpoint lacks {missing}")
    with torch.no_grad():
        for k, v in sd.items():
            if k in own:
                own[k].copy_(v.to(own[k].dtype) if k != "d2t" else v.long())
    model = model.to(dtype)
    if device is not None and torch.device(device).type != "cpu":
        model = model.to(device)
    return model
