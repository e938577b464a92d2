"""vLLM's rewrite of a draft config into MTP (or another draft) before the EAGLE-3 class is chosen, as tables.

Read as `tables.py` is (vLLM 0.32.0, each entry with the releases it holds for); the only copy in
eagle-convert (`tests/test_vllm_model.py` fails if an entry is written down a second time). `config.py`
applies them (`read_config`'s rewrite check, E302).
"""

from __future__ import annotations

# config/speculative.py `SpeculativeConfig.hf_config_override`, applied to every draft config
# (installed by `compose_draft_hf_overrides`) before the EAGLE-3 class is chosen: these model types
# and architectures are rewritten into MTP (or other) drafts, so an EAGLE-3 draft carrying one of
# them is no longer built as EAGLE-3.
# model_type -> the first release that rewrites it (0.21.0: already in 0.21.0 or earlier).
MTP_MODEL_TYPES: dict[str, str] = {
    "dots3_note": "0.28.0",
    "deepseek_v3": "0.21.0",
    "deepseek_v32": "0.21.0",
    "glm_moe_dsa": "0.21.0",
    "deepseek_mtp": "0.21.0",
    "deepseek_v4": "0.21.0",
    "deepseek_v41": "0.30.0",
    "pangu_ultra_moe": "0.21.0",
    "pangu_ultra_moe_mtp": "0.21.0",
    "kimi_k3": "0.27.0",
    "ernie4_5_moe": "0.21.0",
    "ernie_mtp": "0.21.0",
    "nemotron_h_mtp": "0.21.0",
    "qwen3_next": "0.21.0",
    "qwen3_next_mtp": "0.21.0",
    "qwen4_exp": "0.29.0",
    "qwen4_exp_text": "0.29.0",
    "qwen4_exp_mtp": "0.29.0",
    "bailing_hybrid": "0.25.0",
    "bailing_hybrid_mtp": "0.25.0",
    "bailing_hybrid_v3_mtp": "0.28.0",
    "exaone_moe": "0.21.0",
    "exaone_moe_mtp": "0.21.0",
    "qwen3_5": "0.21.0",
    "qwen3_5_moe": "0.21.0",
    "qwen3_5_text": "0.28.0",
    "qwen3_5_moe_text": "0.22.0",
    "intern_s2_preview": "0.22.0",
    "interns2_mobius": "0.28.0",
    "longcat_flash": "0.21.0",
    "step3p5": "0.21.0",
    "step3p7": "0.23.0",
    "hy_v3": "0.21.0",
    "hy_v4": "0.29.0",
    "inkling_mm_model": "0.26.0",
    "inkling_model": "0.26.0",
    "gemma4_assistant": "0.21.0",
    "gemma4_unified_assistant": "0.23.0",
    "minimax_m3_vl": "0.24.0",
    "minimax_m3_mtp": "0.24.0",
    "glm5_next": "0.30.0",
    "step5": "0.33.0",
    "step5_vl": "0.33.0",
}
# Rewritten only in some releases: model_type -> (first, last).
MTP_MODEL_TYPES_RETIRED: dict[str, tuple[str, str]] = {"longcat_flash_ngram": ("0.26.0", "0.31.0")}
MTP_MODEL_TYPE_SUBSTRINGS = ("exaone4_5",)  # `if "exaone4_5" in hf_config.model_type`
# Rewritten only when the config also has num_nextn_predict_layers > 0.
MTP_MODEL_TYPES_WITH_NEXTN = frozenset({"nemotron_h", "nemotron_h_puzzle"})
# architectures[0] -> the first release that rewrites it.
MTP_ARCHITECTURES: dict[str, str] = {
    "MiMoForCausalLM": "0.21.0",
    "MiMoV2ForCausalLM": "0.21.0",
    "MiMoV2OmniForCausalLM": "0.21.0",
    "MiMoV2FlashForCausalLM": "0.21.0",
    "Glm4MoeForCausalLM": "0.21.0",
    "Glm4MoeLiteForCausalLM": "0.21.0",
    "GlmOcrForConditionalGeneration": "0.21.0",
    "BailingMoeV3ForCausalLM": "0.28.0",
    "BailingMoeV3VLForConditionalGeneration": "0.30.0",
    "Step3p5ForCausalLM": "0.23.0",
    "Step3p7ForConditionalGeneration": "0.23.0",
    "MiniMaxM3SparseForConditionalGeneration": "0.24.0",
    "MiniMaxM3MTP": "0.24.0",
    "Nemotron3_5TranscribeForConditionalGeneration": "0.34.0",  # -> nemotron3_5_transcribe_mtp (L993-1010)
}
# Matched anywhere in `architectures`, not only first (`X in architectures`, a set intersection in 0.33).
MTP_ARCHITECTURES_ANYWHERE: dict[str, str] = {
    "BailingMoeV2_5ForCausalLM": "0.25.0",
    "Step5ForCausalLM": "0.33.0",
    "Step5ForConditionalGeneration": "0.33.0",
}
# 0.33.0: architectures[0] RadioMBartPrefixForCausalLM with a truthy decoder.causal_vision_prefix
# becomes ParseAuxMTPModel (checked before every other rule).
MTP_CONDITIONAL_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "RadioMBartPrefixForCausalLM": ("decoder.causal_vision_prefix", "0.33.0"),
}
# A model_type rewritten only when a field is also set: model_type -> (that field, the first release).
# 0.34.0 L823-830: `text_config.model_type == "mistral_large_4"` with a truthy `mtp_config` becomes
# `get_mistral_large_4_dspark_config` (MistralLarge4DSparkModel); the top-level model_type counts too.
MTP_CONDITIONAL_MODEL_TYPES: dict[str, tuple[str, str]] = {"mistral_large_4": ("mtp_config", "0.34.0")}
# The sub-config that rule reads (`getattr(hf_config, "text_config", hf_config)`: only this name, not transformers'
# get_text_config, so not draft.target's reader).
MTP_CONDITIONAL_SUBCONFIG = "text_config"
# Not MTP, but rewritten all the same (to a class method eagle3 cannot use): architectures[0] -> (the class it
# becomes, the first release). MistralLarge3: an EAGLE-1 class; 0.34.0 hf_config_override also rewrites the
# DSpark / DFlash2 drafts for every method (DSparkDraftModel only with model_type qwen3, DFlash2DraftModel
# only with no_rope_layers: reported without that condition, as no EAGLE-3 draft carries either name).
REWRITTEN_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "MistralLarge3ForCausalLM": ("EagleMistralLarge3ForCausalLM", "0.21.0"),
    "DSparkDraftModel": ("Qwen3DSparkModel", "0.34.0"),
    "DFlash2DraftModel": ("DFlash2RicursiveDraftModel", "0.34.0"),
    "DSparkMiniMaxDraftModel": ("a minimax_m3_dspark draft", "0.34.0"),
}
