"""`make demo`'s static part, run as the Makefile spells it (up to the trained pair): each draft is
validated against the target it was built for, so a newcomer's first validate is clean (issue 33:
the demo's first draft met the trained target and got E106/E501/E502)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def static_demo_commands(demo: Path) -> list[list[str]]:
    """The demo recipe's commands before the trained pair (`fixtures.demo`), variables filled in."""
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\ndemo: env\n", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in recipe.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("rm "):
            continue
        if "fixtures.demo" in line:
            break
        line = line.replace("$(VENV)/bin/eagle-convert", f"{sys.executable} -m eagle_convert")
        line = line.replace("$(PY)", sys.executable).replace("$(DEMO)", str(demo))
        assert "$(" not in line, line
        out.append(shlex.split(line))
    return out


def test_demo_validates_each_draft_against_its_own_target(tmp_path: Path) -> None:
    demo = tmp_path / "demo-out"
    commands = static_demo_commands(demo)
    validates = [c for c in commands if c[1:4] == ["-m", "eagle_convert", "validate"]]
    assert validates and all("--target" in c for c in validates), validates
    for cmd in commands:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, (cmd, res.stdout[-2000:], res.stderr[-2000:])
        if cmd in validates:
            assert not re.search(r"\bE\d{3}\b", res.stdout), res.stdout
