"""The ``vllm`` marker is enforced (`tests/conftest.py`): a test not marked ``vllm`` that imports
vLLM, in the test process or in a process it starts, fails with the importing line; a marked one
runs where vLLM is installed and is skipped where it is not; asking whether vLLM is installed
stays allowed. Run on a small suite with this conftest and a stand-in ``vllm`` package (the guard
works by module name, so the real vLLM's import time is not paid here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SUITE = """
import importlib, importlib.util, subprocess, sys
import pytest

def test_unmarked_import():
    import vllm  # noqa: F401

def test_unmarked_import_module():
    importlib.import_module("vllm.config")

def test_unmarked_subprocess():
    subprocess.run([sys.executable, "-c", "import vllm"], check=False)

def test_unmarked_probe():
    assert importlib.util.find_spec("vllm") is not None

def test_unmarked_other_import():
    import json  # noqa: F401

@pytest.mark.vllm
def test_marked():
    import vllm.config  # noqa: F401
    subprocess.run([sys.executable, "-c", "import vllm"], check=True)
"""


def _run(tmp_path: Path, **env: str) -> dict[str, str]:
    suite = tmp_path / "suite"
    shutil.copytree(TESTS / "novllm", suite / "novllm")
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    (suite / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    vllm: needs vLLM\n")
    fake = tmp_path / "fake" / "vllm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "config.py").write_text("")
    outer = {k: v for k, v in os.environ.items() if not k.startswith("EAGLE_CONVERT_TEST_")}  # this test's own guard
    path = os.pathsep.join([*env.pop("PREPEND", "").split(os.pathsep), str(fake.parent), str(TESTS.parent)])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(suite)],
        cwd=tmp_path,
        env={**outer, "PYTHONPATH": path.strip(os.pathsep), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "SKIPPED", "ERROR") and "::" in rest:
            outcomes[rest.split("::")[1].split(" ")[0]] = word
        elif word == "SKIPPED" and "test_suite.py" in rest:
            outcomes["test_marked"] = word
    return outcomes | {"_stdout": proc.stdout}


def test_an_unmarked_test_that_imports_vllm_fails_and_a_marked_one_runs(tmp_path: Path) -> None:
    got = _run(tmp_path)
    out = got.pop("_stdout")
    assert got == {
        "test_unmarked_import": "FAILED",
        "test_unmarked_import_module": "FAILED",
        "test_unmarked_subprocess": "FAILED",
        "test_unmarked_probe": "PASSED",
        "test_unmarked_other_import": "PASSED",
        "test_marked": "PASSED",
    }, out
    assert "test_suite.py::test_unmarked_import is not marked vllm but imports vLLM: vllm imported at " in out
    assert "mark it @pytest.mark.vllm, or make it not need vLLM" in out


def test_without_vllm_a_marked_test_is_skipped(tmp_path: Path) -> None:
    got = _run(tmp_path, PREPEND=str(TESTS / "novllm"), EAGLE_CONVERT_TEST_HIDE_VLLM="1")
    out = got.pop("_stdout")
    assert got["test_marked"] == "SKIPPED", out
    assert "needs vLLM, which is not installed here" in out
    assert got["test_unmarked_probe"] == "FAILED"  # hidden: find_spec finds no vllm, as on such a machine
    assert got["test_unmarked_other_import"] == "PASSED"
