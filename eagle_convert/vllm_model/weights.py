"""How vLLM's EAGLE-3 `load_weights` maps on-disk tensor names onto the draft's parameters, per release."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.vllm_model.releases import Release

# The hand-written `*Model.load_weights` loops (up to 0.24.0) rename these checkpoint parts into vLLM's
# fused parameters before `params_dict[name]`: llama_eagle3.py / qwen3_eagle3.py LlamaModel.load_weights
# and deepseek_eagle3.py DeepseekV2Eagle3Model.load_weights `stacked_params_mapping`.
_STACKED: dict[str, tuple[tuple[str, str], ...]] = {
    "llama": (
        (".q_proj", ".qkv_proj"),
        (".k_proj", ".qkv_proj"),
        (".v_proj", ".qkv_proj"),
        (".gate_proj", ".gate_up_proj"),
        (".up_proj", ".gate_up_proj"),
    ),
    "mla": (
        (".gate_proj", ".gate_up_proj"),
        (".up_proj", ".gate_up_proj"),
        (".q_a_proj", ".fused_qkv_a_proj"),
        (".kv_a_proj_with_mqa", ".fused_qkv_a_proj"),
    ),
}
_STACKED["qwen3"] = _STACKED["llama"]
VALUE_ERROR = "There is no module or parameter named ..."


def vllm_name(name: str) -> str | None:
    """The parameter an on-disk name loads into (without vLLM's own `model.`), None if dropped.

    model_executor/models/llama_eagle3.py `Eagle3LlamaForCausalLM.load_weights` (vLLM 0.32): names
    containing `t2d` (and `mask_hidden` without parallel drafting) are skipped, `d2t` and `lm_head`
    stay top-level, `midlayer.` becomes `layers.0.`, and everything else gets `model.` prepended, so
    a name that already starts with `model.` (NeMo) becomes `model.model.*` and fails.
    """
    if "t2d" in name or "mask_hidden" in name:
        return None
    if "d2t" in name or "lm_head" in name:
        return name
    return name.replace("midlayer.", "layers.0.", 1)


@dataclass(frozen=True)
class Unknown:
    """What one release's load_weights does with a name its draft class has no parameter for."""

    error: str | None  # "KeyError" / "ValueError" when the load raises, None when it does not
    what: str  # "raises KeyError: 'layers.0.self_attn.qkv_proj.bias'", "drops it silently", ...
    key: str | None = None  # the name a KeyError carries

    @property
    def raises(self) -> bool:
        return self.error is not None


def unknown_name(vname: str, attention: str | None, release: Release) -> Unknown:
    """What `release` does with the draft tensor `vname` (as `vllm_name` gives it) it has no parameter for.

    The outer `Eagle3*ForCausalLM.load_weights` keeps names with `lm_head` / `d2t` top-level and puts
    `model.` before the rest. From 0.25.0 every class loads through `AutoWeightsLoader`
    (model_executor/models/utils.py `AutoWeightsLoader.load_weights`): an unexpected `.bias` is
    ignored, any other name raises ValueError (`Release.unknown_tensor`). Up to 0.24.0 the `model.*`
    names go to the class's hand-written `*Model.load_weights`: Llama / Qwen3 raise KeyError at
    `params_dict[name]` (after renaming into the fused qkv_proj / gate_up_proj), the MLA loop skips
    unknown names (`if name not in params_dict: continue`) except the fused ones; top-level names meet
    the outer AutoWeightsLoader, which before 0.25.0 ignores no `.bias` and raises ValueError.
    """
    if release.has("auto_weights_loader"):
        if vname.endswith(".bias"):
            return Unknown(None, "ignores it (AutoWeightsLoader drops unexpected .bias tensors)")
        return Unknown("ValueError", f"raises `{VALUE_ERROR}`")
    outer = vname if ("lm_head" in vname or "d2t" in vname) else f"model.{vname}"
    if not outer.startswith("model."):
        return Unknown(
            "ValueError", f"raises ValueError `{VALUE_ERROR}` (its AutoWeightsLoader ignores no .bias before 0.25.0)"
        )
    key = outer.removeprefix("model.")
    for part, fused in _STACKED.get(attention or "llama", _STACKED["llama"]):
        if part in key:
            key = key.replace(part, fused)
            break
    if attention == "mla" and key == outer.removeprefix("model."):
        return Unknown(None, "drops it silently (DeepseekV2Eagle3Model.load_weights skips unknown names up to 0.24.0)")
    return Unknown("KeyError", f"raises KeyError: {key!r}", key)
