"""SGLang's rules for an EAGLE-3 / 3.1 draft, read from the sglang 0.5.23 wheel (`sglang/srt/...`).

Read, never run: `pip download sglang==0.5.23 --no-deps`, unzipped. Paths below are relative to
`sglang/srt/` in that wheel.
"""

from __future__ import annotations

from eagle_convert.engines.rules import EngineRules, Offset

# Target classes whose set_eagle3_layers_to_capture does not add 1 to every id (models/*.py).
_FIRST_ID: Offset = "first-id"  # ids[0] == 1: add 1, else take the ids as they are
_MAX_ID: Offset = "max-id"  # max(ids) == N: take the ids as they are, else add 1

SGLANG_0_5_23 = EngineRules(
    engine="sglang",
    release="0.5.23",
    title="SGLang",
    aux_ids_path="eagle_config.eagle_aux_hidden_state_layer_ids",
    aux_ids_serving_key=None,
    offset="plus-one",
    offsets={
        "DeepseekV2ForCausalLM": _FIRST_ID,
        "DeepseekV3ForCausalLM": _FIRST_ID,  # subclass of DeepseekV2ForCausalLM (models/deepseek_v2.py)
        "DeepseekV32ForCausalLM": _FIRST_ID,
        "MistralLarge3ForCausalLM": _FIRST_ID,  # models/mistral_large_3.py, a DeepseekV3ForCausalLM
        "GlmMoeDsaForCausalLM": _FIRST_ID,  # models/glm4_moe.py, a DeepseekV2ForCausalLM
        "KimiK25ForConditionalGeneration": _FIRST_ID,  # models/kimi_k25.py delegates to its DeepSeek-V3 LM
        "Glm4MoeLiteForCausalLM": _FIRST_ID,
        "GptOssForCausalLM": _MAX_ID,
    },
    sorts_ids=False,
    default_ids="[2, N//2, N-3] captured at the input of those layers",
    fc_norm_keys=("fc_norm", "use_aux_norm"),
    norm_output_paths=("norm_output",),
    norm_before_fc_paths=("eagle_config.norm_before_fc", "norm_before_fc"),
    norm_before_fc_mla=False,
    fc_norm_excludes_norm_before_fc=False,
    norm_before_residual=False,
    architectures=frozenset({"LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"}),
    mla_architecture="Eagle3DeepseekV2ForCausalLM",
    fallback="TransformersForCausalLM",
    reads_speculators=False,
    d2t_needs_draft_vocab_size=False,
    window_flag="--speculative-draft-window-size",
    window_mla=False,
    embed_from_target=True,
    lm_head_from="draft-vocab-size",
    cites={
        "aux_ids": "model_executor/model_runner_components/spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state",
        "offset": "models/llama.py LlamaForCausalLM.set_eagle3_layers_to_capture: id + 1, captured at the input "
        "of that layer",
        "offset_first_id": "models/deepseek_v2.py DeepseekV2ForCausalLM.set_eagle3_layers_to_capture and "
        "models/glm4_moe_lite.py Glm4MoeLiteForCausalLM.set_eagle3_layers_to_capture (+1 only if "
        "layer_ids[0] == 1)",
        "offset_max_id": "models/gpt_oss.py GptOssForCausalLM.set_eagle3_layers_to_capture (ids kept when "
        "max(layer_ids) == num_hidden_layers)",
        "default_ids": "models/llama.py set_eagle3_layers_to_capture(None): [2, N//2, N-3]",
        "fc_norm": "models/llama_eagle3.py LlamaModel.__init__ (fc_norm or use_aux_norm); "
        "models/kimi_k25_eagle3.py Eagle3MLAModel.__init__ (the same)",
        "fc_width": "models/llama_eagle3.py LlamaModel.__init__ (num_aux_hidden_states, else len(eagle_config ids), "
        "else 3); models/kimi_k25_eagle3.py _get_eagle_aux_layer_count (eagle_config ids, else top-level ids, else 3)",
        "norm_output": "models/llama_eagle3.py LlamaModel.__init__ getattr(config, 'norm_output', False)",
        "norm_before_fc": "models/llama_eagle3.py LlamaModel.__init__ (eagle_config.norm_before_fc, else "
        "top-level); models/kimi_k25_eagle3.py Eagle3MLAModel reads neither",
        "norm_before_residual": "models/llama_eagle3.py LlamaDecoderLayer.forward (input layer: residual = "
        "hidden_states before hidden_norm); models/kimi_k25_eagle3.py Eagle3MLADecoderLayer.forward (the same)",
        "architectures": "models/registry.py ModelRegistry._normalize_archs / resolve_model_cls (an "
        "unregistered name falls back to TransformersForCausalLM); EntryClass of models/llama_eagle3.py and "
        "models/kimi_k25_eagle3.py",
        "speculators": "no speculators_config anywhere in the wheel",
        "d2t": "models/llama_eagle3.py LlamaForCausalLMEagle3.load_weights (d2t -> hot_token_id, t2d skipped)",
        "window": "arg_groups/fields/spec.py speculative_draft_window_size (--speculative-draft-window-size: "
        "LlamaForCausalLMEagle3 honours it, MLA drafters silently ignore it); models/llama_eagle3.py "
        "LlamaForCausalLMEagle3.__init__",
        "embed": "speculative/eagle_worker_v2.py EagleDraftWorker.init_lm_head (L336-363: set_embed with the "
        "target's embedding for every EAGLE-3 draft) and models/llama.py LlamaForCausalLM.set_embed (L910: "
        "skipped only when target_hidden_size differs from hidden_size); models/kimi_k25_eagle3.py "
        "Eagle3DeepseekV2ForCausalLM.set_embed (L404, the same)",
        "lm_head": "models/llama_eagle3.py LlamaForCausalLMEagle3.__init__ (L300-314: tie_word_embeddings makes "
        "lm_head embed_tokens; no draft_vocab_size sets load_lm_head_from_target) and "
        "speculative/eagle_worker_v2.py EagleDraftWorker.init_lm_head (L356-360: set_embed_and_head with the "
        "target's head); models/kimi_k25_eagle3.py (L350-360, the same)",
    },
)

RELEASES: tuple[EngineRules, ...] = (SGLANG_0_5_23,)

# The units (relative to the sglang package) whose code the rules above were read from: fingerprinted
# from each release's wheel (eagle_convert/data/engine_fingerprints.json, scripts/engine_fingerprints.py)
# and compared with an installed SGLang's (engines/fingerprints.py). "*": every unit of the file.
_CAPTURE = "set_eagle3_layers_to_capture"
DECIDING: dict[str, tuple[str, ...]] = {
    "srt/models/llama_eagle3.py": ("*",),
    "srt/models/kimi_k25_eagle3.py": ("*",),
    "srt/models/registry.py": ("_ModelRegistry._normalize_archs", "_ModelRegistry.resolve_model_cls"),
    "srt/model_executor/model_runner_components/spec_aux_hidden_state.py": ("_resolve_eagle_aux_hidden_state",),
    "srt/models/llama.py": (f"LlamaForCausalLM.{_CAPTURE}", "LlamaModel.forward", "LlamaForCausalLM.set_embed"),
    "srt/models/deepseek_v2.py": (f"DeepseekV2ForCausalLM.{_CAPTURE}",),
    "srt/models/glm4_moe_lite.py": (f"Glm4MoeLiteForCausalLM.{_CAPTURE}",),
    "srt/models/gpt_oss.py": (f"GptOssForCausalLM.{_CAPTURE}",),
    "srt/models/kimi_k25.py": (f"KimiK25ForConditionalGeneration.{_CAPTURE}",),
    "srt/speculative/eagle_worker_v2.py": ("EagleDraftWorker.init_lm_head",),
}
