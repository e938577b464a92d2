"""The wheel `pip install .` builds: every package and data file in it, PEP 639 licence metadata, and
no warning from the project's own packaging configuration (what `make demo` and `make test` print).

Built with the installed setuptools' PEP 517 backend in a copy of the sources (no network, ~1 s).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "eagle_convert", "schemas")
# Warnings setuptools raises about a project's configuration (PEP 621/639 tables, package lists).
PROJECT_WARNING = re.compile(r"(Setuptools\w*Warning|BuildBackendWarning|_DeprecatedConfig|is absent from)")


def test_every_package_is_declared() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.relative_to(ROOT).parts)
        for p in (ROOT / "eagle_convert").rglob("*")
        if p.is_dir() and p.name != "__pycache__" and (any(p.glob("*.py")) or p.name == "data")
    }
    assert found - declared == set(), "add to [tool.setuptools] packages"


def test_wheel_holds_everything_and_builds_without_warnings(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    code = "from setuptools import build_meta as b; print(b.build_wheel('dist'))"
    res = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], cwd=src, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert [line for line in res.stderr.splitlines() if PROJECT_WARNING.search(line)] == []
    with zipfile.ZipFile(src / "dist" / res.stdout.split()[-1]) as whl:
        names = set(whl.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(meta).decode()
    expected = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "eagle_convert").rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and (p.suffix in (".py", ".jsonl", ".typed") or p.name == "NOTICE")
    }
    assert expected - names == set()
    schemas = {f"eagle_convert/_schemas/{p.name}" for p in (ROOT / "schemas").glob("*.json")}
    assert schemas - names == set()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
