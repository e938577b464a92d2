"""vLLM's rules for reading an EAGLE-3 draft config, as tables: the only copy in eagle-convert.

Every table names the vLLM source it was read from, at 0.32.0, and holds for 0.33.0 too (its draft
files are byte-identical) and for 0.34.0 unless it says otherwise. What moved between 0.21.0 and 0.34.0
is in `releases.py` (behaviours) or carries its releases here (the registered architectures) and in
`rewrites.py` (the MTP rewrite lists). Paths are relative to the installed `vllm/` package. When vLLM changes
one of these, change it here and nowhere else: `tests/test_vllm_model.py` fails if a table's
entries are written down a second time anywhere in the package or in `schemas/`.
"""

from __future__ import annotations

from dataclasses import dataclass

FLAG_NAMES = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")


@dataclass(frozen=True)
class DraftClass:
    """One EAGLE-3 draft implementation class and the config fields its constructor reads."""

    name: str
    module: str  # model_executor/models/<module>.py
    attention: str  # llama | qwen3 | mla
    # Where the class reads A (the number of aux hidden states) from, first set wins, else 3.
    aux_count_from: tuple[str, ...]
    reads_norm_before_fc: bool  # builds input_norm when norm_before_fc is on
    reads_use_aux_hidden_state: bool  # honours eagle_config.use_aux_hidden_state = False


# model_executor/models/llama_eagle3.py LlamaModel.__init__, qwen3_eagle3.py Qwen3Model.__init__,
# deepseek_eagle3.py DeepseekV2Model.__init__ (the MLA class always builds fc, never input_norm).
DRAFT_CLASSES: dict[str, DraftClass] = {
    c.name: c
    for c in (
        DraftClass(
            "Eagle3LlamaForCausalLM",
            "llama_eagle3",
            "llama",
            ("num_aux_hidden_states", "eagle_config.eagle_aux_hidden_state_layer_ids"),
            True,
            True,
        ),
        DraftClass(
            "Eagle3Qwen3ForCausalLM",
            "qwen3_eagle3",
            "qwen3",
            (
                "num_aux_layers",
                "num_aux_hidden_states",
                "eagle_aux_hidden_state_layer_ids",
                "eagle_config.eagle_aux_hidden_state_layer_ids",
            ),
            True,
            True,
        ),
        DraftClass(
            "Eagle3DeepseekV2ForCausalLM",
            "deepseek_eagle3",
            "mla",
            ("num_aux_hidden_states", "eagle_config.eagle_aux_hidden_state_layer_ids"),
            False,
            False,
        ),
    )
}

# model_executor/models/registry.py `_SPECULATIVE_DECODING_MODELS`: the EAGLE-3 entries of any known release,
# architecture name -> implementation class (11 up to 0.33.0; 0.34.0 drops the 3 P-EAGLE names: 8).
ARCHITECTURES: dict[str, str] = {
    "Eagle3LlamaForCausalLM": "Eagle3LlamaForCausalLM",
    "LlamaForCausalLMEagle3": "Eagle3LlamaForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen2_5vlForCausalLM": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen3vlForCausalLM": "Eagle3LlamaForCausalLM",
    "PeagleLlamaForCausalLM": "Eagle3LlamaForCausalLM",
    "PEagleDraftModel": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen3ForCausalLM": "Eagle3Qwen3ForCausalLM",
    "PeagleQwen3ForCausalLM": "Eagle3Qwen3ForCausalLM",
    "Eagle3DeepseekV2ForCausalLM": "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM": "Eagle3DeepseekV2ForCausalLM",
}
# P-EAGLE (parallel drafting) names: registered 0.22.0-0.33.0 (releases "peagle"; 0.34.0 removed P-EAGLE).
PARALLEL_DRAFTING_ARCHITECTURES = frozenset({"PeagleLlamaForCausalLM", "PEagleDraftModel", "PeagleQwen3ForCausalLM"})
# Registered later than 0.21.0 (the rest already are): the changes.CHANGES key that brings each.
ARCHITECTURES_FROM = {
    "PeagleLlamaForCausalLM": "peagle",
    "PEagleDraftModel": "peagle",
    "Eagle3Qwen3ForCausalLM": "qwen3_class",
    "PeagleQwen3ForCausalLM": "qwen3_class",
}
# No longer registered after some release: the changes.CHANGES key whose `last` is the final one
# (0.34.0 registry.py `_SPECULATIVE_DECODING_MODELS` has no P-EAGLE name).
ARCHITECTURES_UNTIL = dict.fromkeys(PARALLEL_DRAFTING_ARCHITECTURES, "peagle")

# transformers_utils/configs/eagle.py `EAGLEConfig.__init__`, method "eagle3": a name that starts or
# ends with this is kept, any other name gets it as a prefix.
EAGLE3_PREFIX = "Eagle3"

# transformers_utils/configs/speculators/algos.py `update_eagle3` / `update_peagle`: the inner
# transformer_layer_config.model_type picks the class (any other raises `Unsupported model_type`),
# and flags absent at the top level get these defaults (norm_before_residual differs from the plain
# path, and update_peagle does not read fc_norm / norm_output at all).
SPECULATORS_ARCHITECTURES: dict[str, dict[str, str]] = {
    "eagle3": {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"},
    "peagle": {"llama": "PeagleLlamaForCausalLM", "qwen3": "PeagleQwen3ForCausalLM"},
}
SPECULATORS_FLAG_DEFAULTS: dict[str, dict[str, bool]] = {
    "eagle3": {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False, "norm_output": False},
    "peagle": {"norm_before_residual": False, "norm_before_fc": False},
}
# Speculators algorithms that only some releases build: kind -> the changes.CHANGES key that bounds them
# (peagle: registered from 0.22.0, algos.py SUPPORTED_SPECULATORS_TYPES; from 0.34.0 update_peagle only
# raises, releases "speculators_peagle_raises"). Both tables above hold for those releases only.
SPECULATORS_KINDS_IN = {"peagle": "peagle"}
# The plain path: the draft classes read each flag with getattr(config, flag, False).
PLAIN_FLAG_DEFAULTS: dict[str, bool] = dict.fromkeys(FLAG_NAMES, False)

# Where the model runners read aux layer ids (first set wins; none set -> the target's default).
# V1 (also the CPU runner), up to 0.33.0 (0.34.0 removed V1: releases "v1_runner"):
# v1/worker/gpu_model_runner.py `GPUModelRunner._get_eagle3_aux_layers_from_config`.
AUX_IDS_V1 = ("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids")
# Between the two, V1 tries DFlash's ids (plus one from 0.22.0: releases "v1_dflash_ids_shifted"), which
# any non-empty eagle_config object then replaces (config.read_config's `_aux_ids_v1`).
V1_DFLASH_AUX_IDS = "dflash_config.target_layer_ids"


@dataclass(frozen=True)
class AuxIdSource:
    """One place Model Runner V2 reads aux ids from, the first release that reads it, and the shift."""

    path: str
    first: str
    offset: int = 0  # added to each id: DFlash / DSpark count target layers from 0, EAGLE-3 after k layers


# V2 (the GPU default, for every target since 0.29, the only runner from 0.34: releases.V2_DEFAULT_SCOPE):
# v1/worker/gpu/spec_decode/eagle/eagle3_utils.py `get_eagle3_aux_layers_from_config`, in this order
# (0.22.0: top-level only; 0.24.0 adds dflash_config.target_layer_ids; 0.25.0 dspark_target_layer_ids and
# target_layer_ids; 0.27.0 the two layer_ids). It never reads eagle_config.eagle_aux_hidden_state_layer_ids.
# (0.33.0 keeps dspark ids unshifted for model_type deepseek_v41, which hf_config_override rewrites into
# MTP anyway: E302.)
AUX_IDS_V2_SOURCES = (
    AuxIdSource("eagle_aux_hidden_state_layer_ids", "0.21.0"),
    AuxIdSource("dflash_config.target_layer_ids", "0.24.0", 1),
    AuxIdSource("dspark_target_layer_ids", "0.25.0", 1),
    AuxIdSource("target_layer_ids", "0.25.0", 1),
    AuxIdSource("dflash_config.layer_ids", "0.27.0"),
    AuxIdSource("eagle_config.layer_ids", "0.27.0"),
)
AUX_IDS_V2 = tuple(s.path for s in AUX_IDS_V2_SOURCES)
# Every place a producer writes aux ids (the two above plus speculators' inner copy).
AUX_ID_LOCATIONS = (
    *dict.fromkeys((*AUX_IDS_V1, *AUX_IDS_V2)),
    "transformer_layer_config.eagle_aux_hidden_state_layer_ids",
)


def default_aux_ids(num_target_layers: int) -> tuple[int, int, int]:
    """vLLM's fallback when no ids are configured (id k = the residual stream after k layers).

    model_executor/models/interfaces.py `SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`.
    """
    n = num_target_layers
    return (2, n // 2, n - 3)


# --- eagle-convert's choices among vLLM's options (not vLLM rules, but bound to the tables above) ---

# The registered architecture eagle-convert writes (upgrade) and recommends (validate) per attention
# kind; each must be a key of ARCHITECTURES whose class has that attention.
WRITE_ARCHITECTURE = {
    "llama": "LlamaForCausalLMEagle3",
    "qwen3": "Eagle3Qwen3ForCausalLM",
    "mla": "Eagle3DeepseekV2ForCausalLM",
}
# A model_type no hf_config_override rule touches, per attention kind, for configs whose own model_type
# vLLM would rewrite into MTP. Published MLA drafts use kimi_k2 (transformers_utils/config.py maps it
# to DeepseekV3Config).
SAFE_MODEL_TYPE = {"llama": "llama", "qwen3": "qwen3", "mla": "kimi_k2"}

# --- What vLLM serves beyond the class: method, rope, sliding window, quantization, embeddings ---

# config/speculative.py `SpeculativeConfig.__post_init__`: without an explicit `method` the draft is
# `draft_model`, then the model path (lower-cased) picks one of these, first match wins; an MTP
# model_type picks mtp instead (0.33.0 SpeculativeMethod; medusa and mlp_speculator were removed in 0.33).
METHOD_FROM_PATH = (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"))
METHOD_DEFAULT = "draft_model"
# Configured methods the path never replaces; up to 0.33.0 it replaces the others that reach this branch
# (0.33.0 L1432-1496; releases "path_overrides_method", config.served_method).
METHODS_KEPT = ("eagle", "eagle3", "dflash", "dspark")
# transformers_utils/configs/eagle.py `EAGLEConfig.__init__`: the name prefix each method gives an
# architecture that neither starts (eagle3, dflash: nor ends) with it; `draft_model` keeps the name.
METHOD_ARCH_PREFIX = {"eagle": "Eagle", "eagle3": EAGLE3_PREFIX, "dflash": "DFlash"}

# Where vLLM reads a target's sizes: config/model.py `ModelConfig.__init__` sets `hf_text_config =
# get_hf_text_config(hf_config)` (transformers_utils/config.py, the same in vLLM 0.21.0-0.33.0), which
# is transformers' `PreTrainedConfig.get_text_config()`: the one of these sub-configs that is set, used
# whole (no top-level field is merged in); none set: the top level; more than one: transformers raises.
# num_hidden_layers, hidden_size, vocab_size, max_position_embeddings and the rope come from it
# (transformers_utils/model_arch_config_convertor.py `ModelArchConfigConvertorBase`); quantization_config
# and dtype are read at the top level first, then in `text_config` (`get_quantization_config`,
# `get_torch_dtype`). `draft.target.Target` is the one reader.
TEXT_CONFIG_KEYS = ("text_encoder", "decoder", "generator", "text_config")

# The rope keys that change vLLM's rotary embedding (model_executor/layers/rotary_embedding/__init__.py
# `get_rope`: rope_theta, rope_type and the keys each scaling type reads, e.g. YaRN's
# extra_kwargs), compared between draft and target.
ROPE_KEYS = (
    "rope_theta",
    "rope_type",
    "factor",
    "original_max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
    "low_freq_factor",
    "high_freq_factor",
    "partial_rotary_factor",
    "rope_dim",
)
# Values vLLM uses for a key the rope dict leaves out: rotary_embedding/__init__.py `get_rope`
# (partial_rotary_factor 1.0) and yarn_scaling_rope.py `YaRNScalingRotaryEmbedding.__init__`.
ROPE_DEFAULTS = {"partial_rotary_factor": 1.0, "beta_fast": 32, "beta_slow": 1, "truncate": True}
# The rope_theta a config without one gets: its transformers config class's default (transformers 5.19
# `RotaryEmbeddingConfigMixin.convert_rope_params_to_dict`: the class's `rope_theta` field, else
# `default_theta`, 10000 in `RotaryEmbeddingConfigMixin`), chosen by model_type (the text sub-config's
# for a composite target). vLLM 0.32 reads the standardized dict. Qwen3 drafts get 10000, not the 1e6
# Qwen3 checkpoints write: Qwen3Config keeps the mixin's default, and vLLM 0.32 qwen3.py
# `Qwen3DecoderLayer.__init__` calls `set_default_rope_theta(config, 1000000)`, which fills
# rope_parameters only where transformers left rope_theta out (it never does). Types not listed get
# DEFAULT_ROPE_THETA; tests/test_vllm_model.py checks every entry against the installed transformers.
DEFAULT_ROPE_THETA = 10000.0
ROPE_THETA_DEFAULTS: dict[str, float] = {
    "llama": DEFAULT_ROPE_THETA,  # LlamaConfig (Llama EAGLE-3 drafts)
    "qwen3": DEFAULT_ROPE_THETA,  # Qwen3Config (Qwen3 EAGLE-3 drafts)
    "deepseek_v3": DEFAULT_ROPE_THETA,  # DeepseekV3Config (MLA drafts; kimi_k2 maps to it)
    "qwen2_5_vl": 1000000.0,  # Qwen2_5_VLTextConfig.default_theta (composite: its text config's)
    "qwen2_5_vl_text": 1000000.0,
    "qwen3_vl": 500000.0,  # Qwen3VLTextConfig.default_theta
    "qwen3_vl_text": 500000.0,
    "qwen3_vl_moe": 500000.0,  # Qwen3VLMoeTextConfig.default_theta
    "qwen3_vl_moe_text": 500000.0,
    "llama4": 500000.0,  # Llama4TextConfig.default_theta
    "llama4_text": 500000.0,
    "gpt_oss": 150000.0,  # GptOssConfig.default_theta
    "minimax_m2": 5000000.0,  # MiniMaxM2Config.default_theta
}


def default_rope_theta(model_type: object) -> float:
    """The rope_theta transformers gives a config of `model_type` that sets none (ROPE_THETA_DEFAULTS)."""
    return (
        ROPE_THETA_DEFAULTS.get(model_type, DEFAULT_ROPE_THETA) if isinstance(model_type, str) else DEFAULT_ROPE_THETA
    )


# transformers' DeepseekV3Config defaults: what vLLM's config class gives an MLA field the draft's
# config.json leaves out (`kimi_k2` and `deepseek_v3` drafts load through it; vLLM 0.32
# model_executor/models/deepseek_eagle3.py reads these attributes off that config).
MLA_DIM_DEFAULTS: dict[str, int] = {
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}

# transformers `standardize_rope_params`: these types get original_max_position_embeddings, defaulting to
# the config's max_position_embeddings (before vLLM raises that to the target's context).
ROPE_TYPES_WITH_ORIGINAL_MAX = ("llama3", "yarn", "longrope")
# config/model.py `_get_and_verify_max_len`: a model's max_model_len is max_position_embeddings times the
# rope `factor`, except for these types (their max_position_embeddings is already the scaled length).
ROPE_TYPES_UNSCALED_MAX_LEN = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")

# Which config fields give a draft layer a sliding window, per draft class:
# model_executor/models/llama.py `LlamaAttention.__init__` reads layer_types[k] (k counted from the
# draft's first layer, llama_eagle3.py sets target_layer_count) and then sliding_window;
# qwen3_eagle3.py `Qwen3Eagle3DecoderLayer.__init__` reads layer_types, which transformers'
# Qwen3Config derives from max_window_layers when absent, and its sliding_window is None unless
# use_sliding_window is true;
# deepseek_eagle3.py builds DeepseekV2 attention, which reads none of them.
SLIDING_WINDOW_FIELDS = {
    "Eagle3LlamaForCausalLM": ("layer_types",),
    "Eagle3Qwen3ForCausalLM": ("layer_types", "use_sliding_window", "max_window_layers"),
    "Eagle3DeepseekV2ForCausalLM": (),
}
QWEN3_MAX_WINDOW_LAYERS = 28  # transformers Qwen3Config.max_window_layers default

# V1 v1/spec_decode/llm_base_proposer.py `_maybe_share_embeddings` (pipeline parallel size 1; up to 0.33.0):
# an EAGLE draft without embed_tokens, or with one `torch.equal` to the target's, shares the target's
# (widths permitting); any other shipped embed_tokens is kept and used as the draft's own. With pipeline
# parallelism vLLM always keeps the draft's own. `_maybe_share_lm_head` does the same for lm_head. V2
# v1/worker/gpu/spec_decode/eagle/utils.py `maybe_share_target_embed` / `_should_share` (0.34.0 L20 / L83, the
# only copy from 0.34.0) keeps the same rule without the width check, and from 0.34.0 keeps the draft's own
# copy when either module has no plain `.weight` (quantized packed weights: releases "share_needs_plain_weight").
EMBED_SHARING = (
    "vLLM shares the target's embedding only when the draft ships none or a bit-identical one, "
    "and otherwise drafts with the draft's own"
)

# model_executor/models/utils.py `get_draft_quant_config` (vLLM PRs #25883, #26590, #28435): every
# EAGLE-3 draft layer takes the quantization config of the draft's own ModelConfig, which
# config/model.py `ModelConfig._verify_quantization` reads from the draft's config.json
# `quantization_config` (SpeculativeConfig.quantization defaults to None for a separate draft); the
# target's quantization is never inherited.
DRAFT_QUANT_SOURCE = "quantization_config"
