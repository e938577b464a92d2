"""Producer-layout detection and key canonicalisation, driven by `schemas/layouts.json` and
`schemas/keymap.json` so that a new producer is a new row of data, not a new `if`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from eagle_convert.draft import schemas
from eagle_convert.errors import UnknownLayoutError
from eagle_convert.vllm_model import lookup


@dataclass(frozen=True)
class LayoutMatch:
    id: str
    producer: str
    reasons: tuple[str, ...]


_MISSING = object()
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def _lookup(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _arch0(config: Mapping[str, Any]) -> str | None:
    """`architectures[0]` when config.json gives it as a list of strings (any other shape is
    reported by the config schema check, not here: detection must not crash on it)."""
    archs = config.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def _has(config: Mapping[str, Any], dotted: str) -> bool:
    return _lookup(config, dotted) is not _MISSING


@dataclass
class Facts:
    """What the layout rules look at, each derived view of the names computed once (a checkpoint's
    names are walked by dozens of rules: a per-rule copy or list scan was most of `describe` at 200k
    tensors)."""

    keys: list[str]
    config: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    storage: str = ""

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(self.keys)

    @cached_property
    def layer_ids(self) -> frozenset[str]:
        return frozenset(m.group(1) for k in self.keys if (m := _LAYER_INDEX.search(k)))


def _check(kind: str, arg: Any, facts: Facts) -> str | None:
    """Reason string when the condition holds, else None."""
    keys, config, metadata, storage = facts.keys, facts.config, facts.metadata, facts.storage
    if kind == "key_prefix":
        hit = next((k for k in keys if k.startswith(arg)), None)
        return f"tensor names start with {arg!r} (e.g. {hit!r})" if hit else None
    if kind == "key_suffix_any":
        suffixes = tuple(arg)
        hit = next((k for k in keys if k.endswith(suffixes)), None)
        return f"has {hit!r}" if hit else None
    if kind == "no_key":
        return f"no {arg!r} tensor" if arg not in facts.names else None
    if kind == "config_has":
        return f"config has {arg!r}" if _has(config, arg) else None
    if kind == "config_has_any":
        hit = next((p for p in arg if _has(config, p)), None)
        return f"config has {hit!r}" if hit else None
    if kind == "metadata_has":
        hit = next((f for f, m in metadata.items() if arg in m), None)
        return f"{hit} metadata has {arg!r}" if hit else None
    if kind == "storage":
        return f"stored as {arg}" if storage == arg else None
    if kind == "architecture":
        return f"architectures[0] is {arg!r}" if _arch0(config) == arg else None
    if kind == "no_key_suffix":
        suffixes = tuple(arg)
        return f"no {' / '.join(arg)} tensor" if not any(k.endswith(suffixes) for k in keys) else None
    if kind == "min_layers":
        found = facts.layer_ids
        return f"{len(found)} decoder layers" if len(found) >= arg else None
    if kind == "config_value":
        plain = dict(config)  # lookup walks dicts (what json gives), as read_config below
        pair = next(((p, v) for p, allowed in arg.items() if (v := lookup(plain, p)) in allowed), None)
        return f"config {pair[0]} is {pair[1]!r}" if pair else None
    if kind == "architecture_contains":
        name = _arch0(config) or ""
        return f"architectures[0] is {name!r}" if any(part in name for part in arg) else None
    if kind == "parallel_drafting":
        from eagle_convert.vllm_model import PARALLEL_DRAFTING_ARCHITECTURES, all_releases, read_config

        # Any known release's reading: a layout does not depend on the vLLM installed.
        names = [_arch0(config), *(read_config(dict(config), r).architecture for r in reversed(all_releases()))]
        parallel = next((n for n in names if n in PARALLEL_DRAFTING_ARCHITECTURES), None)
        return (
            f"{parallel!r} is a parallel-drafting (P-EAGLE) architecture in vLLM's registry"
            if parallel and arg
            else None
        )
    raise ValueError(f"schemas/layouts.json: unknown condition kind {kind!r}")


def _match(rule: Mapping[str, Any], facts: Facts) -> tuple[str, ...] | None:
    reasons = []
    for kind, arg in rule["when"].items():
        reason = _check(kind, arg, facts)
        if reason is None:
            return None
        reasons.append(reason)
    return tuple(reasons)


def detect_layout(
    keys: Iterable[str],
    config: Mapping[str, Any],
    *,
    metadata: Mapping[str, Mapping[str, str]] | None = None,
    storage: str = "single",
    where: str = "checkpoint",
) -> LayoutMatch:
    """First rule of `schemas/layouts.json` whose every condition holds, with the reasons."""
    keys = list(keys)
    facts = Facts(keys, config, metadata or {}, storage)
    for rule in schemas.load_schema("layouts.json")["layouts"]:
        reasons = _match(rule, facts)
        if reasons is not None:
            return LayoutMatch(rule["id"], rule["producer"], reasons)
    sample = ", ".join(sorted(keys)[:3]) or "no tensors"
    raise UnknownLayoutError(
        f"{where}: tensors match no known EAGLE-3 layout (first names: {sample})",
        hint="expected midlayer.*, layers.0.*, model.* or a speculators config; see README 'Supported layouts'",
    )


def detect_attention(keys: Iterable[str]) -> tuple[str, str]:
    """('llama' | 'qwen3' | 'mla', reason) from which attention tensors exist."""
    facts = Facts(list(keys))
    for rule in schemas.load_schema("layouts.json")["attention"]:
        reasons = _match(rule, facts)
        if reasons is not None:
            return rule["id"], "; ".join(reasons) or "standard q/k/v/o projections"
    raise AssertionError("schemas/layouts.json: the last attention rule must match everything")


@cache
def _prefix_renames() -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """keymap.json's prefix renames as (from, to) pairs, and every `from` (one C-level test per name)."""
    rules = tuple((r["from"], r["to"]) for r in schemas.load_schema("keymap.json")["prefix_renames"])
    return rules, tuple(old for old, _ in rules)


def canonical_name(name: str) -> str:
    """vLLM-native name for an on-disk name (e.g. `model.midlayer.fc` -> `layers.0.fc`)."""
    rules, prefixes = _prefix_renames()
    if not name.startswith(prefixes):  # most names: nothing to rename
        return name
    changed = True
    while changed:
        changed = False
        for old, new in rules:
            if name.startswith(old):
                name = new + name[len(old) :]
                changed = True
    return name


def canonical_map(keys: Iterable[str]) -> dict[str, str]:
    """On-disk name -> canonical name, refusing two names that collapse onto one."""
    keys = list(keys)
    out = {key: canonical_name(key) for key in keys}
    if len(set(out.values())) == len(out) == len(keys):
        return out
    return _canonical_map_naming_the_collision(keys)


def _canonical_map_naming_the_collision(keys: Iterable[str]) -> dict[str, str]:
    """`canonical_map`, name by name: the first collision raises, naming both names."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for key in keys:
        canon = canonical_name(key)
        if canon in seen:
            raise UnknownLayoutError(
                f"tensors {seen[canon]!r} and {key!r} both map to {canon!r}", hint="remove the duplicate tensor"
            )
        seen[canon] = key
        out[key] = canon
    return out


def config_alias(name: str) -> str | None:
    """Legacy config key that means `name` (e.g. `use_aux_norm` for `fc_norm`)."""
    for old, new in schemas.load_schema("keymap.json")["config_aliases"].items():
        if new == name:
            return old
    return None
