"""How vLLM sets up a draft layer's attention from the read config: the rope dict and the sliding windows."""

from __future__ import annotations

from typing import Any

from eagle_convert.vllm_model.config import VllmDraftConfig, positive_int
from eagle_convert.vllm_model.tables import (
    QWEN3_MAX_WINDOW_LAYERS,
    ROPE_TYPES_WITH_ORIGINAL_MAX,
    SLIDING_WINDOW_FIELDS,
    default_rope_theta,
)


def rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The rope dict vLLM builds the rotary embedding from (transformers 5's reading, flat configs).

    transformers `convert_rope_params_to_dict` / `standardize_rope_params`, called through vLLM's
    `patch_rope_parameters`: a legacy `rope_scaling` wins over `rope_parameters`; theta comes from
    the dict, else top-level `rope_theta`, else the default of the config's class
    (`tables.default_rope_theta` of its model_type); YaRN-like types get
    `original_max_position_embeddings` from the dict, else max_position_embeddings (a top-level
    original_max_position_embeddings counts only for classes that declare it, e.g. Phi3: not drafts).
    The reference drafter builds its rotary embedding from this dict too.
    """
    legacy, params = config.get("rope_scaling"), config.get("rope_parameters")
    rope = dict(legacy) if isinstance(legacy, dict) and legacy else dict(params) if isinstance(params, dict) else {}
    rope.setdefault("rope_theta", config.get("rope_theta", default_rope_theta(config.get("model_type"))))
    rope.setdefault("rope_type", rope.pop("type", "default"))
    rope.pop("type", None)
    if rope["rope_type"] in ROPE_TYPES_WITH_ORIGINAL_MAX:
        rope.setdefault("original_max_position_embeddings", config.get("max_position_embeddings"))
    return rope


def rope_declared(config: dict[str, Any]) -> bool:
    """Whether the config sets any rope field (a config without one gets its class's rope)."""
    return any(k in config for k in ("rope_theta", "rope_scaling", "rope_parameters"))


def rope_is_nested(config: dict[str, Any]) -> bool:
    """Per-layer-type rope dicts (Gemma-style `rope_parameters`), which `rope_parameters` does not flatten."""
    params = config.get("rope_parameters")
    return isinstance(params, dict) and any(isinstance(v, dict) for v in params.values())


def rope_theta_declared(config: dict[str, Any]) -> bool:
    """Whether rope_theta is written (top level, rope_parameters or rope_scaling) rather than defaulted."""
    return any(
        isinstance(d, dict) and "rope_theta" in d
        for d in (config, config.get("rope_parameters"), config.get("rope_scaling"))
    )


def sliding_windows(view: VllmDraftConfig) -> list[int | None]:
    """The sliding window vLLM gives each draft layer (None: full attention); [] without a class."""
    cls, vcfg = view.draft_class, view.vcfg
    if cls is None:
        return []
    layers = positive_int(vcfg.get("num_hidden_layers")) or 1
    fields = SLIDING_WINDOW_FIELDS.get(cls.name, ())
    types = vcfg.get("layer_types") if "layer_types" in fields else None
    window = vcfg.get("sliding_window")
    if "use_sliding_window" in fields:  # transformers Qwen3Config.__post_init__: no window unless switched on
        window = window if vcfg.get("use_sliding_window") else None
        if not isinstance(types, list):
            first = vcfg.get("max_window_layers", QWEN3_MAX_WINDOW_LAYERS)
            types = [
                "sliding_attention"
                if window is not None and isinstance(first, int) and k >= first
                else "full_attention"
                for k in range(layers)
            ]
    if not isinstance(types, list):
        return [None] * layers
    return [window if k < len(types) and types[k] == "sliding_attention" else None for k in range(layers)]
