"""The capture cache: a target's aux states and logits for a draft, captured once (vLLM or the
reference target) into safetensors shards, and read back as training features."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.cache.capture import CaptureResult, capture_cache, check_capture_options, draft_features_spec
    from eagle_convert.cache.check import check_cache
    from eagle_convert.cache.options import CAPTURE_ENGINES, CaptureOptions
    from eagle_convert.cache.source import CachedTarget, target_head_weights
    from eagle_convert.cache.store import CACHE_FORMAT, MANIFEST, SEQUENCES, Manifest, read_manifest
else:
    __getattr__, __dir__ = attach(__name__, __file__)
