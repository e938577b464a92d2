"""How vLLM reads a draft: one home for every vLLM rule, each citing vLLM's source."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.vllm_model.acceptance import AcceptanceMetrics
    from eagle_convert.vllm_model.attention import (
        rope_declared,
        rope_is_nested,
        rope_parameters,
        rope_theta_declared,
        sliding_windows,
    )
    from eagle_convert.vllm_model.changes import CHANGES, Change
    from eagle_convert.vllm_model.config import (
        MAX_COUNT,
        VllmDraftConfig,
        as_list,
        eagle_section,
        flatten_speculators,
        inner_config,
        lookup,
        mtp_rewrite,
        positive_int,
        read_config,
    )
    from eagle_convert.vllm_model.deciding import unit_digests
    from eagle_convert.vllm_model.features import (
        VllmFeatures,
        detect_features,
        features_of,
        vllm_available,
        vllm_package_dir,
        vllm_version,
    )
    from eagle_convert.vllm_model.fingerprints import (
        Drift,
        FingerprintCheck,
        check_release,
        known_fingerprint_releases,
        matching_release,
    )
    from eagle_convert.vllm_model.method import architecture_for_method, guess_method, served_method
    from eagle_convert.vllm_model.platform import cpu_build, engine_device_problem
    from eagle_convert.vllm_model.releases import KNOWN_RELEASES, NEWEST_RELEASE, OLDEST_RELEASE, Release, all_releases
    from eagle_convert.vllm_model.serve_config import (
        ServeConfig,
        load_speculative_config,
        parse_serve_config,
        recorded_k,
        speculative_config_for,
    )
    from eagle_convert.vllm_model.speculative import EAGLE3_METHOD, LOSSY_REJECTION, no_k_source
    from eagle_convert.vllm_model.tables import (
        ARCHITECTURES,
        ARCHITECTURES_FROM,
        AUX_ID_LOCATIONS,
        DEFAULT_ROPE_THETA,
        DRAFT_CLASSES,
        DRAFT_QUANT_SOURCE,
        EMBED_SHARING,
        FLAG_NAMES,
        MLA_DIM_DEFAULTS,
        PARALLEL_DRAFTING_ARCHITECTURES,
        ROPE_DEFAULTS,
        ROPE_KEYS,
        ROPE_TYPES_UNSCALED_MAX_LEN,
        SAFE_MODEL_TYPE,
        SLIDING_WINDOW_FIELDS,
        SPECULATORS_ARCHITECTURES,
        SPECULATORS_KINDS_IN,
        TEXT_CONFIG_KEYS,
        WRITE_ARCHITECTURE,
        default_aux_ids,
    )
    from eagle_convert.vllm_model.verifier import verifier_problem
    from eagle_convert.vllm_model.versions import (
        ALL,
        TESTED_VERSION,
        VllmVersionStatus,
        default_release,
        installed_status,
        status_for,
    )
    from eagle_convert.vllm_model.weights import Unknown, unknown_name, vllm_name
else:
    __getattr__, __dir__ = attach(__name__, __file__)
