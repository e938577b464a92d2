"""The capture cache: a target's aux states and logits for a draft, captured once (vLLM or the
reference target) into safetensors shards, and read back as training features."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.cache.capture import CaptureResult, capture_cache, check_capture_options, draft_features_spec
    from eagle_convert.cache.check import check_cache
    from eagle_convert.cache.options import CAPTURE_ENGINES, CaptureOptions
    from eagle_convert.cache.source import CachedTarget, target_head_weights
    from eagle_convert.cache.store import CACHE_FORMAT, MANIFEST, SEQUENCES, Manifest, read_manifest
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "CaptureResult": "eagle_convert.cache.capture",
            "capture_cache": "eagle_convert.cache.capture",
            "check_capture_options": "eagle_convert.cache.capture",
            "draft_features_spec": "eagle_convert.cache.capture",
            "check_cache": "eagle_convert.cache.check",
            "CAPTURE_ENGINES": "eagle_convert.cache.options",
            "CaptureOptions": "eagle_convert.cache.options",
            "CachedTarget": "eagle_convert.cache.source",
            "target_head_weights": "eagle_convert.cache.source",
            "CACHE_FORMAT": "eagle_convert.cache.store",
            "MANIFEST": "eagle_convert.cache.store",
            "SEQUENCES": "eagle_convert.cache.store",
            "Manifest": "eagle_convert.cache.store",
            "read_manifest": "eagle_convert.cache.store",
        },
    )

__all__ = [
    "CACHE_FORMAT",
    "CAPTURE_ENGINES",
    "CachedTarget",
    "CaptureOptions",
    "CaptureResult",
    "MANIFEST",
    "Manifest",
    "SEQUENCES",
    "capture_cache",
    "check_cache",
    "check_capture_options",
    "draft_features_spec",
    "read_manifest",
    "target_head_weights",
]
