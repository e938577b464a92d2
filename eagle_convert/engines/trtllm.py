"""TensorRT-LLM's rules for an EAGLE-3 / 3.1 draft (PyTorch backend), read from its `main` branch.

Read, never run, from NVIDIA/TensorRT-LLM at these commits (each file as the code index held it):
`tensorrt_llm/_torch/models/modeling_speculative.py` @ 00679c66c3e3, `tensorrt_llm/llmapi/llm_args.py`
@ 000439672005 (the version of llm_args.py at fcd3f31682808 cited before has no eagle3_layers_to_capture),
`tensorrt_llm/_torch/speculative/eagle3.py` @ 001e67005b4f. The code index serves these files by character
offset and the repository is too large to mirror, so rules cite class and function, not line. No tagged release was
confirmed to hold the EAGLE-3.1 flags (fc_norm, norm_output: PR #14988), so the release is named by
the commit of the draft class: "main@00679c6".
"""

from __future__ import annotations

from eagle_convert.engines.rules import EngineRules

_MODEL = "_torch/models/modeling_speculative.py @ 00679c66c3e3"
_ARGS = "llmapi/llm_args.py @ 000439672005"
_EAGLE3 = "_torch/speculative/eagle3.py @ 001e67005b4f"

TRTLLM_MAIN = EngineRules(
    engine="trtllm",
    release="main@00679c6",
    title="TensorRT-LLM",
    aux_ids_path=None,
    aux_ids_serving_key="eagle3_layers_to_capture",
    offset="plus-one",
    offsets={},
    sorts_ids=True,
    default_ids="{1, N//2-1, N-4}, each the output of that layer",
    fc_norm_keys=("fc_norm",),
    norm_output_paths=("norm_output", "eagle_config.return_hidden_post_norm"),
    norm_before_fc_paths=("eagle_config.norm_before_fc",),
    norm_before_fc_mla=True,
    fc_norm_excludes_norm_before_fc=True,
    norm_before_residual=False,
    architectures=frozenset(),
    mla_architecture=None,
    fallback=None,
    reads_speculators=False,
    d2t_needs_draft_vocab_size=True,
    window_flag=None,
    window_mla=False,
    embed_from_target=True,
    lm_head_from="shipped",
    cites={
        "aux_ids": f"{_ARGS} EagleDecodingConfig.eagle3_layers_to_capture",
        "offset": f"{_EAGLE3} Eagle3OneModelSpecMetadata.maybe_capture_hidden_states (hidden_states + "
        "residual after layer id: the output of that layer)",
        "sorted": f"{_EAGLE3} Eagle3OneModelSpecMetadata.__post_init__ (sorted(list(layers_to_capture)))",
        "default_ids": f"{_EAGLE3} Eagle3OneModelSpecMetadata.__post_init__ (1, N//2 - 1, N - 4)",
        "fc_norm": f"{_MODEL} Eagle3DraftModel.__init__ (getattr(config, 'fc_norm', False); one norm per "
        "spec_config.num_capture_layers)",
        "norm_output": f"{_MODEL} Eagle3DraftModel.__init__ (eagle_config.return_hidden_post_norm or norm_output)",
        "norm_before_fc": f"{_MODEL} Eagle3DraftModel.__init__ (eagle_config.get('norm_before_fc', False) only)",
        "norm_flags_both": f"{_MODEL} Eagle3ForCausalLM.apply_eagle3_fc (fc_norm, elif norm_before_fc)",
        "norm_before_residual": f"{_MODEL} Eagle3DecoderLayer.forward (residual = hidden_states before hidden_norm)",
        "architectures": f"{_MODEL} get_draft_model (the class comes from spec_config.eagle3_model_arch, "
        f"'llama3' or 'mistral_large3'; MLA when the config has kv_lora_rank, Eagle3ForCausalLM.__init__); "
        f"{_ARGS} EagleDecodingConfig.eagle3_model_arch",
        "speculators": f"no speculators_config in {_MODEL} or {_ARGS}",
        "d2t": f"{_MODEL} Eagle3DraftModel.__init__ (d2t only when draft_vocab_size differs from vocab_size) "
        "and _ensure_draft_vocab_size (a missing draft_vocab_size defaults to vocab_size)",
        "embed": f"{_MODEL} Eagle3DraftModel.__init__ (embed_tokens = None, taken from the target by "
        "Eagle3ForCausalLM.load_weights_from_target_model, unless target_hidden_size differs from hidden_size)",
        "lm_head": f"{_MODEL} Eagle3ForCausalLM.load_weights (load_lm_head_from_target unless a weight name "
        "contains 'lm_head') and load_weights_from_target_model (lm_head = target_model.lm_head)",
        "window": "no draft sliding window in the files read",
    },
)

RELEASES: tuple[EngineRules, ...] = (TRTLLM_MAIN,)

# The deciding units (relative to the tensorrt_llm package). No wheel of main@00679c6 exists, so no
# fingerprints ship: an installed TensorRT-LLM is always unverified (E707).
DECIDING: dict[str, tuple[str, ...]] = {
    "_torch/models/modeling_speculative.py": (
        "Eagle3DecoderLayer.forward",
        "Eagle3DraftModel.__init__",
        "Eagle3ForCausalLM.apply_eagle3_fc",
        "get_draft_model",
        "_ensure_draft_vocab_size",
        "Eagle3ForCausalLM.load_weights",
        "Eagle3ForCausalLM.load_weights_from_target_model",
    ),
    "_torch/speculative/eagle3.py": ("Eagle3OneModelSpecMetadata.__post_init__",),
    "llmapi/llm_args.py": ("EagleDecodingConfig",),
}
