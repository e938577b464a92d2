"""scripts/gpu_check.py on a machine without a GPU: it starts, says in one line that there is no CUDA
device (exit 2), needs neither click, rich nor vLLM, and a failing check is one clear line (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
# Run the script with some top-level modules made unimportable (sys.modules[name] = None).
BLOCKED_RUN = """
import runpy, sys
for name in sys.argv[1].split(","):
    if name:
        sys.modules[name] = None
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_script(*args: str, blocked: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The script as a bare GPU machine runs it: from the source tree, no GPU visible, offline."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, blocked, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=600,
    )


def test_no_cuda_device_is_one_line_and_exit_2_without_click_rich_or_vllm() -> None:
    """A GPU machine may have only torch, transformers and safetensors: every module the checks use
    is imported before the device check, here with the CLI's and vLLM's packages unimportable."""
    res = run_script(blocked="click,rich,vllm,matplotlib,jsonschema")
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout.splitlines() == [res.stdout.strip()]
    assert res.stdout.startswith("gpu-check: no CUDA device (torch ") and "nothing was checked" in res.stdout
    assert "Traceback" not in res.stderr


def test_missing_torch_is_one_line_and_exit_2() -> None:
    res = run_script(blocked="torch")
    assert res.returncode == 2, res.stderr
    assert res.stdout.strip() == "gpu-check: torch not installed: nothing was checked"


def test_help_documents_the_exit_codes() -> None:
    res = run_script("--help")
    assert res.returncode == 0 and "exit codes: 0 passed, 1 a check failed, 2 nothing checked" in res.stdout


def test_a_failing_check_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    """--device cpu runs the checks on the CPU; a draft that cannot be read fails `prepare` clearly."""
    from fixtures.target import build_target

    build_target(tmp_path / "pair" / "target")
    draft = tmp_path / "pair" / "draft"
    draft.mkdir()
    (draft / "config.json").write_text("{}")
    (draft / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    res = run_script(
        "--device", "cpu", "--only", "reference", "--pair", str(tmp_path / "pair"), "--work", str(tmp_path / "work")
    )
    assert res.returncode == 1, res.stdout + res.stderr
    fails = [line for line in res.stdout.splitlines() if line.lstrip().startswith("FAIL prepare:")]
    assert len(fails) == 1 and "model.safetensors" in fails[0] and "traceback:" in fails[0], res.stdout
    assert "Traceback (most recent call last)" not in res.stdout
    assert "Traceback (most recent call last)" in (tmp_path / "work" / "gpu-check.log").read_text()
    assert "result: 0 passed, 0 passed with a note, 1 failed, 0 skipped" in res.stdout


@pytest.mark.slow
def test_cpu_self_test_passes_the_reference_and_finetune_checks(tmp_path: Path) -> None:
    """Every branch the GPU runs, run on the CPU: the trained pair, both smokes, both fine-tunes."""
    res = run_script("--device", "cpu", "--only", "reference", "--only", "finetune", "--work", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS reference engine on cpu: counters equal the CPU run's at T=0" in res.stdout
    assert "PASS finetune on cpu: step acc" in res.stdout
    assert "result: 3 passed" in res.stdout
