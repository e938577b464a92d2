"""The keys and values `vllm serve --speculative-config` accepts, per vLLM release: data keyed by ranges.

vLLM builds `SpeculativeConfig(**speculative_config)` (engine/arg_utils.py
`EngineArgs.create_speculative_config`), so the keys are the fields of the `SpeculativeConfig` class
in config/speculative.py of each release and an unknown key fails the engine start. Each entry names
the first (and, where it left, the last) release and was read from that release's
config/speculative.py (`SpeculativeConfig` fields; the `SpeculativeMethod`, `RejectionSampleMethod` and
`DraftSampleMethod` literals); 0.21.0 is the oldest release read, so "0.21.0" means "0.21.0 or earlier".
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.vllm_model.changes import version_key
from eagle_convert.vllm_model.releases import OLDEST_RELEASE, Release

SOURCE = "config/speculative.py SpeculativeConfig"
NO_K_MOVED = "0.34.0"  # E902's raise moved to v1/worker/gpu/spec_decode/speculator_config.py (L225)


@dataclass(frozen=True)
class Since:
    """A key or value that a release range accepts (`last` None: still in the newest known release)."""

    name: str
    first: str = OLDEST_RELEASE
    last: str | None = None

    def covers(self, release: Release) -> bool:
        v = version_key(release.version)
        return v >= version_key(self.first) and (self.last is None or v <= version_key(self.last))

    def span(self) -> str:
        if self.last is None:
            return "every known release" if self.first == OLDEST_RELEASE else f"vLLM {self.first} and later"
        return f"vLLM {self.first}-{self.last}" if self.first != OLDEST_RELEASE else f"vLLM up to {self.last}"


# SpeculativeConfig's fields a user sets (0.21.0 ... 0.34.0 config/speculative.py, class SpeculativeConfig;
# 0.34.0's custom_method is `field(init=False)`, set by vLLM for a plugin method, not a user key).
KEYS: tuple[Since, ...] = (
    *(
        Since(name)
        for name in (
            "enforce_eager",
            "num_speculative_tokens",
            "model",
            "method",
            "draft_tensor_parallel_size",
            "tensor_parallel_size",
            "quantization",
            "moe_backend",
            "attention_backend",
            "max_model_len",
            "revision",
            "code_revision",
            "use_local_argmax_reduction",
            "prompt_lookup_max",
            "prompt_lookup_min",
            "parallel_drafting",
            "suffix_decoding_max_tree_depth",
            "suffix_decoding_max_cached_requests",
            "suffix_decoding_max_spec_factor",
            "suffix_decoding_min_token_prob",
            "draft_load_config",
            "rejection_sample_method",
            "synthetic_acceptance_rates",
            "synthetic_acceptance_length",
            "draft_sample_method",
        )
    ),
    Since("disable_padded_drafter_batch", last="0.33.0"),  # V1-only: gone with V1 in 0.34.0
    Since("num_speculative_tokens_per_batch_size", "0.24.0"),
    Since("use_heterogeneous_vocab", "0.25.0", "0.33.0"),
    Since("kv_cache_dtype", "0.26.0"),
    Since("dspark_draft_topk", "0.28.0"),
    Since("enable_adaptive_verification", "0.28.0"),
    Since("index_share_for_mtp_iteration", "0.29.0"),
    Since("disable_eagle_block_drop", "0.30.0"),
    Since("disable_lookahead_block_hashes", "0.33.0"),
    Since("draft_lm_head_quantization", "0.33.0"),  # V2 only; needs a draft that shares the target's lm_head
    Since("fly_window_size", "0.33.0"),
    Since("fly_entropy_threshold", "0.33.0"),
    Since("fly_entropy_top_k", "0.33.0"),
    Since("xpress_topc", "0.33.0"),
    Since("draft_decode_context_parallel_size", "0.34.0"),  # 0.34.0 L484: 1 or the target's DCP size
    Since("suffix_decoding_corpus_tokens", "0.34.0"),  # L592
    Since("speculator_options", "0.34.0"),  # L700: only for a plugin method that lists it
)
# Fields vLLM fills itself: create_speculative_config overwrites the target_* ones and __post_init__
# builds the draft_* ones from `model`.
INTERNAL_KEYS = ("target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config")
# create_speculative_config turns "-" into "_" in every key from 0.26.0 (before: a dashed key is unknown).
DASHES_FROM = "0.26.0"

# `SpeculativeMethod` (0.22.0 adds custom_class, 0.25.0 dspark, 0.33.0 drops medusa and mlp_speculator,
# 0.34.0 drops custom_class (`_validate_method` L1625: "Unknown speculative method") and adds
# nemotron3_5_transcribe_mtp; the *_mtp names follow the MTP model types of each release). 0.34.0 also takes any
# name a plugin registers with `register_speculative_method`: that cannot be checked without the plugin.
METHODS: tuple[Since, ...] = (
    *(
        Since(name)
        for name in (
            "ngram",
            "ngram_gpu",
            "draft_model",
            "suffix",
            "eagle",
            "eagle3",
            "extract_hidden_states",
            "dflash",
            "mtp",
            "deepseek_mtp",
            "ernie_mtp",
            "exaone4_5_mtp",
            "exaone_moe_mtp",
            "gemma4_mtp",
            "glm4_moe_lite_mtp",
            "glm4_moe_mtp",
            "glm_ocr_mtp",
            "hy_v3_mtp",
            "longcat_flash_mtp",
            "mimo_mtp",
            "mimo_v2_mtp",
            "nemotron_h_mtp",
            "pangu_ultra_moe_mtp",
            "qwen3_5_mtp",
            "qwen3_next_mtp",
            "step3p5_mtp",
        )
    ),
    Since("medusa", last="0.32.0"),
    Since("mlp_speculator", last="0.32.0"),
    Since("custom_class", "0.22.0", "0.33.0"),
    Since("minimax_m3_mtp", "0.24.0"),
    Since("bailing_hybrid_mtp", "0.25.0"),
    Since("dspark", "0.25.0"),
    Since("inkling_mtp", "0.26.0"),
    Since("kimi_k3_mtp", "0.27.0"),
    Since("bailing_hybrid_v3_mtp", "0.28.0"),
    Since("dots3_note_mtp", "0.28.0"),
    Since("hy_v4_mtp", "0.29.0"),
    Since("qwen4_exp_mtp", "0.29.0"),
    Since("glm5_next_mtp", "0.30.0"),
    Since("step5_mtp", "0.33.0"),
    Since("nemotron3_5_transcribe_mtp", "0.34.0"),
)
EAGLE3_METHOD = "eagle3"

# `RejectionSampleMethod`: standard and block verify losslessly (the target's distribution, token for
# token at T = 0); synthetic accepts by calibrated rates and fly defers rejections inside an
# entropy-gated window, so neither reproduces the target's output.
REJECTION_METHODS: tuple[Since, ...] = (
    Since("standard"),
    Since("synthetic"),
    Since("block", "0.25.0"),
    Since("fly", "0.33.0"),
)
LOSSY_REJECTION = {
    "synthetic": "accepts draft tokens by calibrated rates, not by the target's probabilities",
    "fly": "is lossy by design: FLy defers rejections inside an entropy-gated window "
    '(vLLM 0.33.0 logs "FLy verification is a lossy speculative decoding method")',
}
# `DraftSampleMethod` (0.22.0 renamed gumbel to probabilistic).
DRAFT_SAMPLE_METHODS: tuple[Since, ...] = (
    Since("greedy"),
    Since("gumbel", last="0.21.0"),
    Since("probabilistic", "0.22.0"),
)
LM_HEAD_QUANTIZATIONS = ("fp8", "nvfp4")  # 0.33.0 `draft_lm_head_quantization: Literal["fp8", "nvfp4"]`

# From 0.34.0 one loop checks the method-specific options (config/speculative.py _METHOD_SPECIFIC_OPTIONS L109,
# SpeculativeConfig.__post_init__ L1394): a set (non-null) option the method's SpeculatorConfig does not
# list in `supported_options` raises "X is not supported with speculative method 'Y'." The EAGLE methods list only
# draft_lm_head_quantization (v1/worker/gpu/spec_decode/eagle/config.py EagleSpeculatorConfig.supported_options).
METHOD_OPTIONS_FROM = "0.34.0"
METHOD_SPECIFIC_OPTIONS = (
    "dspark_draft_topk",
    "draft_lm_head_quantization",
    "index_share_for_mtp_iteration",
    "xpress_topc",
    "speculator_options",
)
EAGLE_SUPPORTED_OPTIONS = frozenset({"draft_lm_head_quantization"})

# SpeculativeConfig.__post_init__ checks that run before any weight is read (0.33.0 L2014-2033):
FLY_MIN_K = 2  # "FLy requires num_speculative_tokens to be at least 2."


def no_k_source(release: Release) -> str:
    """Where `release` raises for a draft model served without num_speculative_tokens (E902)."""
    if release.at_least(NO_K_MOVED):
        return "v1/worker/gpu/spec_decode/speculator_config.py DraftModelSpeculatorConfig.configure"
    return "config/speculative.py SpeculativeConfig.__post_init__"


def accepted(table: tuple[Since, ...], release: Release) -> list[str]:
    """The names of `table` that `release` accepts, in table order."""
    return [s.name for s in table if s.covers(release)]


def entry(table: tuple[Since, ...], name: str) -> Since | None:
    return next((s for s in table if s.name == name), None)
