"""The tiny in-memory Llama target and EAGLE-3 draft config of the reference-engine tests.

One 4-layer fp32 Llama (vocab 96, hidden 32) built from a seed, and the one-layer draft config
that matches it; tests override single keys (``draft_vocab_size``, flags, ``torch_dtype``).
"""

from __future__ import annotations

import torch

from eagle_convert.reference.target import TargetModel

V, H, VD, AUX = 96, 32, 48, (1, 2, 3)


def tiny_target(seed: int = 0, *, peaked: bool = True, zero_lm_head: bool = False) -> TargetModel:
    """The target; ``peaked`` widens embeddings and lm_head so next-token distributions are peaked
    (something to learn); ``zero_lm_head`` makes greedy decoding always emit token 0."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=V,
        hidden_size=H,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        if peaked:
            model.model.embed_tokens.weight.normal_(0, 1.0)
            model.lm_head.weight.normal_(0, 0.5)
        if zero_lm_head:
            model.lm_head.weight.zero_()
    return TargetModel(model)


def tiny_draft_config(**kw) -> dict:
    """An EAGLE-3 draft config for `tiny_target` (one layer, draft vocab VD, aux ids AUX)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": H,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
        "rms_norm_eps": 1e-5,
        "vocab_size": V,
        "draft_vocab_size": VD,
        "eagle_aux_hidden_state_layer_ids": list(AUX),
        **kw,
    }
