"""A draft's config.json as one engine release reads it: the taps, the norms, the class it builds.

`read_draft` applies an `EngineRules` to a config; validate compares the result with what vLLM serves
(the draft as trained) and names each difference. A(k) below is the residual stream after k target
layers, vLLM's meaning of aux id k; every engine's default taps A(2), A(N//2), A(N-3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eagle_convert.engines.rules import EngineRules, Offset
from eagle_convert.vllm_model import default_aux_ids, lookup

DEFAULT = "default"  # the engine taps its default layers (the same three in every engine)


def int_ids(value: Any) -> list[int] | None:
    """A list of integer ids, or None for anything else (absent, null, not a list, a non-integer entry)."""
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return None
    return list(value)


def default_taps(n: int | None) -> tuple[int, ...] | str:
    """The default taps as A-indices for an N-layer target (symbolic without N)."""
    return default_aux_ids(n) if n else DEFAULT


def taps(ids: Sequence[int], offset: Offset, n: int | None) -> tuple[int, ...] | None:
    """The A-indices an engine taps for written `ids` under `offset` (None: undecidable without N)."""
    if offset == "first-id":
        shift = 1 if ids and ids[0] == 1 else 0
    elif offset == "max-id":
        if n is None:
            return None
        shift = 0 if ids and max(ids) == n else 1
    else:
        shift = 1
    return tuple(k + shift for k in ids)


def ids_for(trained: Sequence[int], offset: Offset, n: int | None) -> list[int] | None:
    """The ids to write so that `offset` taps exactly A(trained) (None: no id list does)."""
    for candidate in ([k - 1 for k in trained], list(trained)):
        if min(candidate) >= 0 and taps(candidate, offset, n) == tuple(trained):
            return candidate
    return None


@dataclass(frozen=True)
class EngineView:
    """What one engine release builds from a draft config."""

    rules: EngineRules
    target_class: str | None  # the target's first architecture (it picks the offset rule)
    offset: Offset
    ids: list[int] | None  # the ids where the engine reads them (None: none there, or never from the draft)
    taps: tuple[int, ...] | str | None  # A-indices tapped; DEFAULT; None: undecidable without the target
    fc_norm: bool
    norm_output: bool
    norm_before_fc_read: bool  # as read, before the fc_norm exclusion
    norm_before_fc: bool  # as applied
    architecture: str | None
    builds: str | None  # the class the name builds (None: the name is ignored)
    window_asked: int | None  # the sliding window the config asks for (never read from it)


def window_asked(config: dict[str, Any]) -> int | None:
    """The draft sliding window a config asks for (sliding_window with layer_types or use_sliding_window)."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None
    types = config.get("layer_types")
    if isinstance(types, list):
        return window if "sliding_attention" in types else None
    return window if config.get("use_sliding_window", True) else None


def read_draft(
    config: dict[str, Any], rules: EngineRules, *, mla: bool, target_class: str | None, n: int | None
) -> EngineView:
    """How `rules`' engine release reads `config` (a draft's config.json) for a target of class
    `target_class` with `n` layers (None: unknown); `mla`: the draft has MLA attention."""
    offset = rules.offsets.get(target_class or "", rules.offset)
    ids = int_ids(lookup(config, rules.aux_ids_path)) if rules.aux_ids_path else None
    tapped: tuple[int, ...] | str | None = taps(ids, offset, n) if ids else default_taps(n)
    fc_norm = any(bool(config.get(k)) for k in rules.fc_norm_keys)
    norm_output = any(bool(lookup(config, p)) for p in rules.norm_output_paths)
    nbf = False
    if not mla or rules.norm_before_fc_mla:
        for path in rules.norm_before_fc_paths:
            value = lookup(config, path)
            if value is not None:
                nbf = bool(value)
                break
    applied = nbf and not (rules.fc_norm_excludes_norm_before_fc and fc_norm)
    archs = config.get("architectures")
    name = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    builds = None
    if rules.architectures:
        builds = name if name in rules.architectures else rules.fallback
    return EngineView(
        rules,
        target_class,
        offset,
        ids,
        tapped,
        fc_norm,
        norm_output,
        nbf,
        applied,
        name,
        builds,
        window_asked(config),
    )
