"""What the engine worker's loader hooks do to, and read from, a draft vLLM has built.

Before loading, every parameter is filled with a sentinel (NaN, or ``SENTINEL_INT`` for
integer parameters); after loading, any parameter still holding it was never written by the
checkpoint. ``scan_unwritten`` names those parameters, per shard for stacked ones, with the
on-disk keys that should have filled them; ``applied_config`` records the flags the built
draft actually uses. Used by `vllm/strict_load_worker.py`; torch is imported lazily.
"""

from __future__ import annotations

import re

SENTINEL_INT = -12345


def fill_sentinel(model) -> None:
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.numel() == 0:
                continue
            if p.is_floating_point() or p.is_complex():
                p.data.fill_(float("nan"))
            elif p.dtype != torch.bool:
                p.data.fill_(SENTINEL_INT)


def _sentinel_mask(p):
    import torch

    if p.is_floating_point() or p.is_complex():
        return torch.isnan(p)
    if p.dtype == torch.bool:
        return torch.zeros_like(p, dtype=torch.bool)
    return p == SENTINEL_INT


def _packed_mapping(model) -> dict[str, list[str]]:
    mapping = dict(getattr(model, "packed_modules_mapping", {}) or {})
    mapping.setdefault("qkv_proj", ["q_proj", "k_proj", "v_proj"])
    mapping.setdefault("gate_up_proj", ["gate_proj", "up_proj"])
    return mapping


def _checkpoint_key(vllm_name: str) -> str:
    """vLLM parameter name -> the on-disk EAGLE-3 key that fills it (canonical layout)."""
    if vllm_name == "draft_id_to_target_id":
        return "d2t"
    if vllm_name.startswith("model."):
        return vllm_name[len("model.") :]
    return vllm_name


_UNUSED_PARAM = re.compile(r"model\.layers\.(\d+)\.hidden_norm\.weight")


def scan_unwritten(model) -> tuple[list[str], list[tuple[str, list[str]]], list[str]]:
    """Fully written parameter names, (unwritten name, checkpoint keys that fill it) pairs, and
    unwritten parameters the forward pass never reads (``layers.{k>=1}.hidden_norm``).

    A stacked parameter (qkv_proj, gate_up_proj, ...) that is only partly unwritten is reported
    per shard as ``name[shard]``; any other partly unwritten parameter as ``name[partial]``.
    """
    import torch

    modules = dict(model.named_modules())
    packed = _packed_mapping(model)
    loaded: list[str] = []
    unused: list[str] = []
    unwritten: list[tuple[str, list[str]]] = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() == 0:
                loaded.append(name)  # nothing to hold a sentinel (e.g. a placeholder)
                continue
            mask = _sentinel_mask(p.data)
            if not bool(mask.any()):
                loaded.append(name)
                continue
            mod_name, _, pname = name.rpartition(".")
            parent, _, leaf = mod_name.rpartition(".")
            sizes = list(getattr(modules.get(mod_name), "output_sizes", None) or [])
            shards = packed.get(leaf)
            if shards and len(sizes) == len(shards) and p.dim() >= 1 and p.shape[0] == sum(sizes):
                missing, start = [], 0
                for shard, size in zip(shards, sizes):
                    if bool(mask[start : start + size].any()):
                        missing.append(shard)
                    start += size
                keys = [_checkpoint_key(f"{parent}.{s}.{pname}") for s in missing]
                if len(missing) == len(shards):
                    unwritten.append((name, keys))
                else:
                    unwritten.extend((f"{name}[{s}]", [k]) for s, k in zip(missing, keys))
                continue
            if (unused_m := _UNUSED_PARAM.fullmatch(name)) and int(unused_m.group(1)) > 0:
                unused.append(name)  # built on every layer, read only by layer 0
                continue
            label = name if bool(mask.all()) else f"{name}[partial]"
            unwritten.append((label, [_checkpoint_key(name)]))
    return loaded, unwritten, unused


def applied_config(model) -> dict:
    """What the built draft actually uses (flags after vLLM's config translation)."""
    inner = getattr(model, "model", None)
    cfg = getattr(model, "config", None)
    d2t = getattr(model, "draft_id_to_target_id", None)
    return {
        "class": type(model).__name__,
        "use_aux_hidden_state": getattr(inner, "use_aux_hidden_state", None),
        "num_aux_hidden_states": getattr(inner, "num_aux_hidden_states", None)
        or getattr(inner, "num_aux_layers", None),
        "fc_input_size": getattr(inner, "fc_input_size", None),
        "fc_norm": getattr(inner, "fc_norm", None) is not None,
        "norm_output": bool(getattr(inner, "norm_output", False)),
        "norm_before_fc": bool(getattr(inner, "norm_before_fc", False)),
        "norm_before_residual": bool(getattr(cfg, "norm_before_residual", False)),
        "num_hidden_layers": getattr(cfg, "num_hidden_layers", None),
        "draft_vocab_size": getattr(cfg, "draft_vocab_size", None),
        "has_d2t_parameter": d2t is not None,
        "eagle_aux_hidden_state_layer_ids": getattr(cfg, "eagle_aux_hidden_state_layer_ids", None),
    }
