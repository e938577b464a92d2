"""How vLLM's EAGLE-3 `load_weights` maps on-disk tensor names onto the draft's parameters."""

from __future__ import annotations


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
