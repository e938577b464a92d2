"""Does the installed vLLM's deciding code match the release it claims to be?

eagle-convert's rules (`releases.py`, `tables.py`) were read from each known release's wheel. A
patched build, a fork, a nightly or a plugin that replaces a module can claim a known version and
read drafts otherwise; then a clean verdict would pass a vLLM the rules were never read from. So
each known release's deciding files (the ones that decide how a draft is read or served: draft
classes, config resolution, the speculators path, loading, the runners' aux ids, the proposer) are
fingerprinted unit by unit (`deciding.py`) in `eagle_convert/data/vllm_fingerprints.json`, which
`scripts/vllm_release.py` generates from each wheel, and `check_release` compares the installed
files with them: a file whose bytes hash the same matches whole (milliseconds, no parse); only a
file that differs is parsed to name its changed units. vLLM is never imported.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from eagle_convert.errors import UsageError
from eagle_convert.jsonable import dump
from eagle_convert.vllm_model.deciding import NOT_FINGERPRINTED, unit_digests

DATA_FILE = "vllm_fingerprints.json"  # in the eagle_convert.data package
DATA_FORMAT = 1
WHOLE_FILE = "*"  # Drift.unit when the file as a whole is missing or unreadable

DriftKind = Literal["changed", "missing", "added"]


@dataclass(frozen=True)
class Drift:
    """One deciding unit (`file::unit`) whose installed code differs from the release's wheel."""

    file: str  # relative to the vllm/ package, as vLLM's repository names it
    unit: str  # "Class.method", "func", "NAME", "<imports>", "<module>"; "*": the whole file
    kind: DriftKind

    def label(self) -> str:
        return self.file if self.unit == WHOLE_FILE else f"{self.file}::{self.unit}"


@dataclass(frozen=True)
class FingerprintCheck:
    """The installed deciding code against one release's fingerprints."""

    release: str
    package_dir: str
    drifts: tuple[Drift, ...]
    units: int = 0  # units the release's fingerprints hold
    files: int = 0  # deciding files of the release
    source: str = ""  # where the fingerprints were read ("vLLM 0.32.0 wheel")

    @property
    def same(self) -> bool:
        return not self.drifts

    def counts(self) -> dict[str, int]:
        return {kind: sum(d.kind == kind for d in self.drifts) for kind in ("changed", "missing", "added")}

    def line(self) -> str:
        """One line: matches, or how many units differ."""
        where = f"{self.units} units in {self.files} files"
        if self.same:
            return f"vLLM {self.release}'s deciding code matches the fingerprints eagle-convert read ({where})"
        moved = ", ".join(f"{n} {kind}" for kind, n in self.counts().items() if n)
        return f"the installed vLLM's deciding code differs from vLLM {self.release}'s: {moved} (of {where})"

    def by_file(self) -> dict[str, list[Drift]]:
        out: dict[str, list[Drift]] = {}
        for d in self.drifts:
            out.setdefault(d.file, []).append(d)
        return out

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "release package_dir same units files source drifts line", line=self.line())


# ------------------------------------------------------------------------------------- the data


@functools.cache
def fingerprint_data() -> dict[str, Any]:
    """The packaged fingerprints (`eagle_convert/data/vllm_fingerprints.json`), read once, deltas resolved."""
    text = (resources.files("eagle_convert") / "data" / DATA_FILE).read_text(encoding="utf-8")
    return decode_data(json.loads(text), f"eagle_convert/data/{DATA_FILE}")


def decode_data(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The stored form (a file's units as a delta of the same path's previous content) made whole:
    ``{"releases": ..., "files": {sha: {"units": {unit: digest}}}}``."""
    if raw.get("format") != DATA_FORMAT:
        raise ValueError(f"{where}: format {raw.get('format')!r}, expected {DATA_FORMAT}")
    stored: dict[str, dict[str, Any]] = raw["files"]
    whole: dict[str, dict[str, str]] = {}

    def units(sha: str) -> dict[str, str]:
        if sha not in whole:
            entry = stored[sha]
            base = dict(units(entry["base"])) if "base" in entry else {}
            for name in entry.get("removed", []):
                base.pop(name, None)
            whole[sha] = dict(sorted({**base, **entry["units"]}.items()))
        return whole[sha]

    return {**raw, "files": {sha: {"units": units(sha)} for sha in stored}}


def encode_data(data: dict[str, Any]) -> dict[str, Any]:
    """`decode_data`'s inverse: each file content after a path's first stored as the units that
    changed, appeared (``units``) or went (``removed``) since that path's content in the release before."""
    releases = data["releases"]
    whole = {sha: entry["units"] for sha, entry in data["files"].items()}
    stored: dict[str, dict[str, Any]] = {}
    last: dict[str, str] = {}  # path -> its content in the latest release encoded
    for version in sorted(releases, key=_version_key):
        for path, sha in sorted(releases[version]["files"].items()):
            base = last.get(path)
            last[path] = sha
            if sha in stored:
                continue
            new = whole[sha]
            if base is None or base == sha:
                stored[sha] = {"units": new}
                continue
            old = whole[base]
            delta = {u: d for u, d in new.items() if old.get(u) != d}
            stored[sha] = {"base": base, "units": delta, "removed": sorted(set(old) - set(new))}
    return {**data, "files": {sha: stored[sha] for sha in sorted(stored)}}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def known_fingerprint_releases(data: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The releases with fingerprints, oldest first."""
    return tuple(sorted((data or fingerprint_data())["releases"], key=_version_key))


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def deciding_files(root: Path) -> list[str]:
    """The fingerprinted files of an unpacked deciding tree (every .py file but `_version.py`)."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.relative_to(root).as_posix() not in NOT_FINGERPRINTED
    )


def fingerprint_tree(root: Path, files: list[str] | None = None) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(file -> sha256 of its bytes, sha256 -> {unit: digest}) for `files` (default: all) under `root`.

    Raises:
        SyntaxError: a file is not Python this interpreter parses.
    """
    listing: dict[str, str] = {}
    units: dict[str, dict[str, str]] = {}
    for rel in files if files is not None else deciding_files(root):
        raw = (root / rel).read_bytes()
        sha = file_sha256(raw)
        listing[rel] = sha
        if sha not in units:
            units[sha] = dict(sorted(unit_digests(raw.decode("utf-8")).items()))
    return listing, units


# ------------------------------------------------------------------------------------ the check


class _Installed:
    """The installed files, each read (and parsed only when its bytes differ) once per call."""

    def __init__(self, package_dir: Path) -> None:
        self.root = package_dir
        self.sha: dict[str, str | None] = {}
        self.units: dict[str, dict[str, str] | None] = {}

    def file_sha(self, rel: str) -> str | None:
        if rel not in self.sha:
            path = self.root / rel
            self.sha[rel] = file_sha256(path.read_bytes()) if path.is_file() else None
        return self.sha[rel]

    def unit_digests(self, rel: str) -> dict[str, str] | None:
        if rel not in self.units:
            try:
                self.units[rel] = unit_digests((self.root / rel).read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
                self.units[rel] = None
        return self.units[rel]


def _check(release: str, installed: _Installed, data: dict[str, Any], *, first: bool = False) -> FingerprintCheck:
    """`release`'s fingerprints against the installed files (`first`: stop at the first drift)."""
    entry = data["releases"][release]
    drifts: list[Drift] = []
    n_units = 0
    for rel, sha in sorted(entry["files"].items()):
        if first and drifts:
            break
        want: dict[str, str] = data["files"][sha]["units"]
        n_units += len(want)
        have_sha = installed.file_sha(rel)
        if have_sha == sha:
            continue
        if have_sha is None:
            drifts.append(Drift(rel, WHOLE_FILE, "missing"))
            continue
        have = installed.unit_digests(rel)
        if have is None:
            drifts.append(Drift(rel, WHOLE_FILE, "changed"))
            continue
        drifts += [Drift(rel, u, "changed") for u in sorted(want) if u in have and have[u] != want[u]]
        drifts += [Drift(rel, u, "missing") for u in sorted(want) if u not in have]
        drifts += [Drift(rel, u, "added") for u in sorted(have) if u not in want]
    return FingerprintCheck(
        release, str(installed.root), tuple(drifts), n_units, len(entry["files"]), entry.get("source", "")
    )


def check_release(release: str, package_dir: Path, *, data: dict[str, Any] | None = None) -> FingerprintCheck:
    """The vLLM package folder `package_dir` against `release`'s fingerprints (files read, nothing imported).

    Raises:
        UsageError: eagle-convert has no fingerprints for `release`.
    """
    data = data or fingerprint_data()
    if release not in data["releases"]:
        known = known_fingerprint_releases(data)
        raise UsageError(
            f"no fingerprints of vLLM {release}'s deciding code",
            hint=f"eagle-convert has them for {known[0]} ... {known[-1]}",
        )
    return _check(release, _Installed(Path(package_dir)), data)


def matching_release(package_dir: Path, *, data: dict[str, Any] | None = None) -> str | None:
    """The newest known release whose every deciding unit matches `package_dir`'s, else None."""
    data = data or fingerprint_data()
    installed = _Installed(Path(package_dir))
    for release in reversed(known_fingerprint_releases(data)):
        if _check(release, installed, data, first=True).same:
            return release
    return None
