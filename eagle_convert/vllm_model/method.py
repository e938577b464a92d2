"""The speculative method vLLM runs for a served draft: apart from the config, it depends on the path."""

from __future__ import annotations

from eagle_convert.vllm_model.releases import Release
from eagle_convert.vllm_model.tables import METHOD_ARCH_PREFIX, METHOD_DEFAULT, METHOD_FROM_PATH, METHODS_KEPT


def guess_method(model_path: str) -> str:
    """The method vLLM picks for a draft served without `method` (from its path, see METHOD_FROM_PATH)."""
    lowered = model_path.lower()
    return next((method for part, method in METHOD_FROM_PATH if part in lowered), METHOD_DEFAULT)


def served_method(method: str | None, model_path: str, release: Release) -> tuple[str, bool]:
    """The method vLLM `release` runs for the configured `method` (None: unset) and the draft's path, and
    whether the path chose it.

    Up to 0.33.0 the path also replaces a configured method other than METHODS_KEPT that reaches the
    draft-model branch (draft_model, mtp and the *_mtp aliases, which vLLM first turns into mtp);
    from 0.34.0 a configured method is never changed (releases "path_overrides_method").
    """
    if method is None:
        return guess_method(model_path), True
    overridable = method == METHOD_DEFAULT or method == "mtp" or method.endswith("_mtp")
    if overridable and method not in METHODS_KEPT and release.has("path_overrides_method"):
        guessed = guess_method(model_path)
        if guessed != METHOD_DEFAULT:
            return guessed, True
    return method, False


def architecture_for_method(name: str, method: str) -> str:
    """The registry name EAGLEConfig makes of `name` for `method` (draft_model keeps it as written)."""
    prefix = METHOD_ARCH_PREFIX.get(method)
    if prefix is None or name.startswith(prefix) or (method != "eagle" and name.endswith(prefix)):
        return name
    return f"{prefix}{name}"
