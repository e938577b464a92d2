"""The behaviours that moved between vLLM releases 0.21.0 ... 0.34.0, as data: one `Change` each.

Each row cites the first (or last) release, file and function it was read from (paths relative to the
`vllm/` package of that release's CUDA wheel); `releases.Release` answers from them (`has`, `cite`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@functools.cache  # asked thousands of times per compatibility matrix (every Release.has)
def version_key(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a release string such as "0.32.0" (no local or pre-release part)."""
    major, minor, patch = (int(x) for x in version.split("."))
    return major, minor, patch


@dataclass(frozen=True)
class Change:
    """A behaviour present from `first` through `last` (None: before 0.21.0 / still in the newest)."""

    key: str
    first: str | None
    last: str | None
    what: str
    cite: str  # vLLM version, file and function (and the PR, where one is known)
    values: frozenset[str] = frozenset()  # the set a behaviour is keyed on, where it has one (rope types)

    def covers(self, version: str) -> bool:
        v = version_key(version)
        return (self.first is None or v >= version_key(self.first)) and (
            self.last is None or v <= version_key(self.last)
        )

    @property
    def span(self) -> str:
        """The releases it covers, as a person reads them ("0.22.0-0.22.1", "0.25.0 on", "up to 0.24.0")."""
        if self.first is None:
            return f"up to {self.last}" if self.last else "every release"
        if self.last is None:
            return f"{self.first} on"
        return self.first if self.first == self.last else f"{self.first}-{self.last}"


CHANGES: tuple[Change, ...] = (
    Change(
        "fc_norm",
        "0.22.0",
        None,
        "the Llama and MLA draft classes build fc_norm.{i} and feed back the post-norm state (norm_output)",
        "0.22.0 model_executor/models/llama_eagle3.py LlamaModel.__init__ and deepseek_eagle3.py "
        "DeepseekV2Model.__init__ (vLLM #42764)",
    ),
    Change(
        "mla_fc_norm_applied",
        "0.23.0",
        None,
        "the MLA draft applies fc_norm to the aux chunks (0.22.x builds and loads it, never applies it)",
        "0.23.0 model_executor/models/deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM.combine_hidden_states "
        "(vLLM #43482)",
    ),
    Change(
        "peagle",
        "0.22.0",
        "0.33.0",
        "P-EAGLE architectures PeagleLlamaForCausalLM / PEagleDraftModel are registered",
        "0.22.0 model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS; 0.34.0 drops the three P-EAGLE "
        "names (registry.py, and llama_eagle3.py / qwen3_eagle3.py lose use_parallel_drafting and mask_hidden)",
    ),
    Change(
        "speculators_peagle_raises",
        "0.34.0",
        None,
        'a speculators `peagle` config raises ValueError "P-EAGLE (parallel drafting EAGLE-3) is not supported."',
        "0.34.0 transformers_utils/configs/speculators/algos.py update_peagle (L54), speculators/base.py "
        "build_vllm_speculative_config (L133)",
    ),
    Change(
        "parallel_drafting_eagle3_refused",
        "0.34.0",
        None,
        "speculative-config parallel_drafting: true raises for every method but dflash and dspark (the key is "
        "deprecated; a mask_hidden tensor is always skipped)",
        "0.34.0 config/speculative.py SpeculativeConfig._verify_args (L1689-1698); llama_eagle3.py "
        "Eagle3LlamaForCausalLM.load_weights (L424), qwen3_eagle3.py (L402)",
    ),
    Change(
        "qwen3_class",
        "0.24.0",
        None,
        "Eagle3Qwen3ForCausalLM / PeagleQwen3ForCausalLM exist",
        "0.24.0 model_executor/models/qwen3_eagle3.py, registry.py _SPECULATIVE_DECODING_MODELS (vLLM #43132)",
    ),
    Change(
        "fc_width_from_config",
        "0.22.0",
        None,
        "fc is sized from num_aux_hidden_states / the eagle_config aux ids (before: always 3 aux states)",
        "0.22.0 model_executor/models/llama_eagle3.py LlamaModel.__init__",
    ),
    Change(
        "eagle_config_norm_before_fc",
        "0.22.0",
        None,
        "eagle_config.norm_before_fc wins over the top-level value",
        "0.22.0 model_executor/models/llama_eagle3.py LlamaModel.__init__ (vLLM #42143)",
    ),
    Change(
        "v1_reads_eagle_config_aux_ids",
        "0.22.0",
        "0.33.0",
        "the V1 runner reads eagle_config.eagle_aux_hidden_state_layer_ids",
        "0.22.0 v1/worker/gpu_model_runner.py GPUModelRunner._get_eagle3_aux_layers_from_config (gone with V1 "
        "in 0.34.0)",
    ),
    Change(
        "v1_dflash_ids_shifted",
        "0.22.0",
        "0.33.0",
        "the V1 runner adds one to dflash_config.target_layer_ids (DFlash counts target layers from 0)",
        "0.22.0 v1/worker/gpu_model_runner.py GPUModelRunner._get_eagle3_aux_layers_from_config (gone with V1 "
        "in 0.34.0)",
    ),
    Change(
        "speculators_inner_class",
        "0.24.0",
        None,
        "a speculators config's inner model_type picks the class (before: always the Llama class)",
        "0.24.0 transformers_utils/configs/speculators/algos.py update_eagle3",
    ),
    Change(
        "speculators_top_level_31_flags",
        "0.25.0",
        None,
        "speculators update_eagle3 copies top-level fc_norm / norm_output over the inner values "
        "(before: only transformer_layer_config's values count)",
        "0.25.0 transformers_utils/configs/speculators/algos.py update_eagle3 (vLLM #46488)",
    ),
    Change(
        "auto_weights_loader",
        "0.25.0",
        None,
        "the draft classes load through AutoWeightsLoader: an unknown name raises ValueError and an "
        "unexpected `.bias` is ignored (before: KeyError for Llama/Qwen3, silently dropped for MLA)",
        "0.25.0 model_executor/models/utils.py AutoWeightsLoader.load_weights; llama_eagle3.py LlamaModel.load_weights",
    ),
    Change(
        "d2t_only_reduced",
        "0.30.0",
        None,
        "draft_id_to_target_id exists only when draft_vocab_size differs from the target vocabulary, so a "
        "d2t with a full vocabulary raises (before: it loads)",
        "0.30.0 model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.__init__",
    ),
    Change(
        "draft_context_raised",
        "0.27.0",
        None,
        "the draft's max_position_embeddings is raised to the target's max_model_len",
        "0.27.0 config/speculative.py SpeculativeConfig._maybe_override_draft_max_position_embeddings "
        "(vLLM #49343 for #48894)",
    ),
    Change(
        "draft_context_rope_gated",
        "0.33.0",
        None,
        "the draft context is raised only when every rope type is cache-only (`values`); for the others the "
        "V2 runner lowers the target's max_model_len to the draft's",
        "0.33.0 config/speculative.py SpeculativeConfig._maybe_override_draft_max_position_embeddings and "
        "_CACHE_ONLY_ROPE_TYPES, config/vllm.py VllmConfig._limit_max_model_len_to_draft",
        frozenset({"default", "linear", "llama3", "ntk", "proportional"}),
    ),
    Change(
        "v1_runner",
        None,
        "0.33.0",
        "Model Runner V1 exists: the CPU runner, the GPU fallback for what V2 lacks (P-EAGLE, a heterogeneous "
        "vocabulary, no Triton) and VLLM_USE_V2_MODEL_RUNNER=0; 0.34.0 removes it and V2 is the only runner",
        "0.33.0 v1/worker/gpu_model_runner.py, config/vllm.py VllmConfig.use_v2_model_runner; 0.34.0 deletes "
        "both (config/vllm.py _get_model_runner_unsupported_features L3123, platforms/interface.py "
        "Platform.validate_environ refuses VLLM_USE_V2_MODEL_RUNNER=0)",
    ),
    Change(
        "path_overrides_method",
        None,
        "0.33.0",
        "a configured method other than eagle / eagle3 / dflash / dspark (draft_model, mtp, *_mtp) is replaced "
        "by the one the draft path names (eagle-, eagle3, dflash, dspark); from 0.34.0 a configured method is "
        "never changed based on the draft checkpoint",
        "0.33.0 config/speculative.py SpeculativeConfig.__post_init__ (L1432-1496, the same branch in 0.21.0); "
        "0.34.0 SpeculativeConfig (L470) and v1/worker/gpu/spec_decode/speculator_config.py "
        "_resolve_checkpoint_config_class (L404)",
    ),
    Change(
        "share_needs_plain_weight",
        "0.34.0",
        None,
        "V2's _should_share keeps the draft's own embedding / lm_head when either module has no plain .weight "
        "tensor (quantized packed weights); before it read draft.weight unconditionally",
        "0.34.0 v1/worker/gpu/spec_decode/eagle/utils.py _should_share (L20)",
    ),
    Change(
        "v2_default_all_targets",
        "0.29.0",
        None,
        "Model Runner V2 is the GPU default for every target (before: dense targets and a list of MoE ones)",
        "0.29.0 config/vllm.py VllmConfig.use_v2_model_runner",
    ),
    Change(
        "v2_honours_use_aux",
        "0.33.0",
        None,
        "the V2 runner honours eagle_config.use_aux_hidden_state: false",
        "0.33.0 v1/worker/gpu/spec_decode/eagle/eagle3_utils.py requires_aux_hidden_states, "
        "v1/worker/gpu/model_runner.py",
    ),
    Change(
        "verifier_must_be_hub_id",
        "0.33.0",
        None,
        "`vllm serve DRAFT` with a speculators config needs verifier.name_or_path to be a hub repo id",
        "0.33.0 transformers_utils/config.py maybe_override_with_speculators",
    ),
    Change(
        "v1_embed_width_check",
        "0.25.0",
        "0.33.0",
        "V1 shares the target embedding only when its width matches the draft's",
        "0.25.0 v1/spec_decode/llm_base_proposer.py _maybe_share_embeddings (gone with V1 in 0.34.0)",
    ),
    Change(
        "v2_embed_share_unchecked",
        "0.30.0",
        None,
        "the V2 runner shares the target embedding with a draft that ships none, without comparing widths",
        "0.30.0 v1/worker/gpu/spec_decode/eagle/utils.py maybe_share_target_embed / _should_share "
        "(read from vLLM's repository; 0.34.0 eagle/utils.py L20 / L83, the only copy once V1 is gone)",
    ),
    Change(
        "draft_lm_head_quantization",
        "0.33.0",
        None,
        "speculative-config key draft_lm_head_quantization (needs a draft that shares the target's lm_head)",
        "0.33.0 config/speculative.py SpeculativeConfig, v1/worker/gpu/spec_decode/eagle/utils.py",
    ),
    Change(
        "rejection_sample_fly",
        "0.33.0",
        None,
        'speculative-config rejection_sample_method "fly" (lossy by design; k >= 2, fly_window_size < k)',
        "0.33.0 config/speculative.py SpeculativeConfig.rejection_sample_method",
    ),
    Change(
        "per_request_spec_decode_metrics",
        "0.29.0",
        None,
        "EngineArgs.per_request_spec_decode_metrics exists",
        "0.29.0 engine/arg_utils.py EngineArgs",
    ),
    Change(
        "mla_forces_deepseek_yarn",
        None,
        "0.27.1",
        "the MLA draft forces deepseek_yarn rope whatever its config says",
        "0.27.1 model_executor/models/deepseek_eagle3.py DeepseekV2Model.__init__",
    ),
)
