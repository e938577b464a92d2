"""What start-up loads (benchmarks/startup_bench.py times it): `--help` imports no command module,
no rich, numpy or huggingface_hub; `inspect` of a local draft imports neither numpy nor
huggingface_hub, and with --json not rich either; nor does `upgrade` of a local draft. Each in a
fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from eagle_convert.cli.app import help_stand_in, main

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import contextlib, io, json, sys
from eagle_convert.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:], standalone_mode=False)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules(*args: str) -> set[str]:
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _loaded(modules: set[str], *roots: str) -> list[str]:
    return sorted(r for r in roots if any(m == r or m.startswith(r + ".") for m in modules))


def test_help_imports_no_command_and_no_heavy_module() -> None:
    mods = _modules("--help")
    assert _loaded(mods, "rich", "numpy", "huggingface_hub", "torch") == []
    assert [m for m in mods if m.startswith("eagle_convert.cli.commands.")] == []  # the package only (find_spec)


@pytest.mark.parametrize("json_flag, allowed", [([], {"rich"}), (["--json"], set())])
def test_inspect_of_a_local_draft_stays_light(built_fixtures, json_flag: list[str], allowed: set[str]) -> None:
    mods = _modules("inspect", str(built_fixtures("vllm-eagle3")), *json_flag)  # d2t/t2d read and summarised
    assert set(_loaded(mods, "rich", "numpy", "huggingface_hub", "torch")) == allowed


def test_upgrade_of_a_local_draft_imports_no_numpy_nor_hub(built_fixtures, tmp_path: Path) -> None:
    """The preflight reads d2t/t2d (validate's vocab rule), writes ones and the card's YAML without them."""
    mods = _modules("upgrade", str(built_fixtures("vllm-eagle3")), "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert _loaded(mods, "numpy", "torch", "huggingface_hub") == []


@pytest.mark.parametrize("name", ["check", "diff", "finetune", "push", "report", "smoke", "upgrade", "validate"])
def test_help_reads_each_command_s_own_docstring(name: str) -> None:
    """--help lists each command from its source; the text is what the imported command gives."""
    real = main.get_command(click.Context(main), name)
    stand_in = help_stand_in(name)
    assert real is not None and stand_in is not None
    for limit in (45, 60, 120):
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit)
