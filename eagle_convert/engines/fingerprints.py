"""Does the installed SGLang's deciding code match the release whose rules eagle-convert applies?

As for vLLM (`vllm_model.fingerprints`): the units that decide how an engine reads a draft (each
release module's `DECIDING`: file -> function, method or class names, "*" for every unit of a small
file) are fingerprinted from the release's wheel into `eagle_convert/data/engine_fingerprints.json`
(`scripts/engine_fingerprints.py`), with the same normalised-AST digests (`vllm_model.unit_digests`).
When a verdict is for the installed engine, its files (found without importing it) are compared: a
known release whose units differ is unverified (E707), and an unread version whose units all match a
known release's is judged by that release's rules.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from eagle_convert.vllm_model import unit_digests

DATA_FILE = "engine_fingerprints.json"  # in the eagle_convert.data package
DATA_FORMAT = 1


def fingerprint(root: Path, deciding: dict[str, tuple[str, ...]]) -> dict[str, dict[str, str]]:
    """file -> unit -> digest of the `deciding` units under `root` (a missing file or unit is left out)."""
    out: dict[str, dict[str, str]] = {}
    for rel, names in deciding.items():
        path = root / rel
        try:
            units = unit_digests(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        out[rel] = units if names == ("*",) else {n: units[n] for n in names if n in units}
    return out


@functools.cache
def fingerprint_data() -> dict[str, Any]:
    """The shipped data file: {"engines": {engine: {release: {"source", "units"}}}}."""
    text = (resources.files("eagle_convert") / "data" / DATA_FILE).read_text(encoding="utf-8")
    raw = json.loads(text)
    if raw.get("format") != DATA_FORMAT:
        raise ValueError(f"eagle_convert/data/{DATA_FILE}: format {raw.get('format')!r}, expected {DATA_FORMAT}")
    return raw


def drifts(
    engine: str, release: str, root: Path, deciding: dict[str, tuple[str, ...]], data: dict[str, Any] | None = None
) -> list[str] | None:
    """ "file::unit changed|missing|added" for each deciding unit that differs from `release`'s
    fingerprints (None: no fingerprints of that release)."""
    known = (data or fingerprint_data()).get("engines", {}).get(engine, {}).get(release)
    if known is None:
        return None
    have = fingerprint(root, deciding)
    out = []
    for rel, units in known["units"].items():
        mine = have.get(rel, {})
        out += [f"{rel}::{u} {'changed' if u in mine else 'missing'}" for u, d in units.items() if mine.get(u) != d]
        out += [f"{rel}::{u} added" for u in mine if u not in units]
    return out


def matching(
    engine: str, root: Path, deciding: dict[str, tuple[str, ...]], data: dict[str, Any] | None = None
) -> str | None:
    """The newest known release whose deciding units the installed code has exactly (None: none)."""
    releases = (data or fingerprint_data()).get("engines", {}).get(engine, {})
    for release in reversed(list(releases)):
        if drifts(engine, release, root, deciding, data) == []:
            return release
    return None
