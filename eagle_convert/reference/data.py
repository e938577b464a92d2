"""Reading a draft checkpoint into the reference drafter, the way vLLM loads it.

The checkpoint is opened by `draft.checkpoint.open_checkpoint`, the reader every command uses
(single file, sharded with or without index, `.bin`, NeMo `model/` and `model/consolidated/`
sub-folders, hub), and each tensor is read by byte range (`io.tensordata`). Names go through the
layout canonical map, as in validate; config resolution lives in `drafter.draft_config_from_dict`.
Loading is strict about unknown names (vLLM raises) and tolerant where vLLM is (`t2d`,
`mask_hidden`, `input_norm.` without `norm_before_fc`, unknown `.bias`, missing d2t).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from eagle_convert.draft import Checkpoint, CheckpointRef, canonical_map, open_checkpoint
from eagle_convert.io import tensor_torch
from eagle_convert.reference.drafter import DraftConfig, EagleDrafter, draft_config_from_dict
from eagle_convert.reference.target import resolve_device
from eagle_convert.vllm_model import Release


def load_state(ckpt: Checkpoint) -> dict[str, Tensor]:
    """Every tensor of the checkpoint under its vLLM-native name (`midlayer.` -> `layers.0.`,
    NeMo's `model.` prefix, legacy `aux_norm_*`), read by byte range with its stored dtype."""
    return {canon: tensor_torch(ckpt.source, ckpt.tensors[name]) for name, canon in canonical_map(ckpt.tensors).items()}


def load_drafter(
    path: str | Path | CheckpointRef | Checkpoint,
    release: Release,
    *,
    target_embed: Tensor | None = None,
    target_lm_head: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> EagleDrafter:
    """Build the drafter from anything `open_checkpoint` reads (or an opened `Checkpoint`), as
    vLLM `release` reads its config (`draft_config_from_dict`).
    Without `embed_tokens.weight` (or `lm_head`) the target's tensor is shared, as vLLM does.
    `device` None: `default_device()` (put the drafter where the target is)."""
    ckpt = path if isinstance(path, Checkpoint) else open_checkpoint(path, require_config=True)
    cfg = draft_config_from_dict(ckpt.config, release)
    sd = load_state(ckpt)
    return drafter_from_state_dict(
        cfg, sd, target_embed=target_embed, target_lm_head=target_lm_head, dtype=dtype, device=resolve_device(device)
    )


def drafter_from_state_dict(
    cfg: DraftConfig,
    sd: dict[str, Tensor],
    *,
    target_embed: Tensor | None = None,
    target_lm_head: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> EagleDrafter:
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
    missing = sorted(
        k
        for k in own
        if k not in sd and k != "d2t" and not (k.endswith("hidden_norm.weight") and not k.startswith("layers.0."))
    )
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
