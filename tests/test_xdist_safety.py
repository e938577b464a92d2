"""`make test` runs the tier without vLLM under pytest-xdist; three things keep that safe.

- A test that leaves a signal handler changed fails, and the next test meets the handler as it was
  (`tests/conftest.py`, `_signal_handlers_kept`): a leaked SIG_DFL or `cli.entry._quit` for
  SIGTERM/SIGHUP would end the worker process on a later signal.
- A test's stub of a library call that signals the process does not outlive the test
  (`tests/test_interrupts.py`, `signal_self`): a module imported under it kept it and killed the worker.
- A worker that dies anyway ends the run red, naming its test, instead of leaving the controller
  waiting forever (the Makefile's XDIST_ON, `--max-worker-restart=0`).
Each runs a small suite in its own pytest process, since what is tested is that process's fate."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAKEFILE = TESTS.parent / "Makefile"

SUITE = """
import os, signal

FIRST = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

def _quit(signum, frame):
    os._exit(128 + signum)

def test_leaks_a_handler():
    signal.signal(signal.SIGHUP, _quit)

def test_meets_the_handlers_as_they_were():
    assert {s: signal.getsignal(s) for s in FIRST} == FIRST

def test_changes_and_restores():
    previous = signal.signal(signal.SIGTERM, _quit)
    signal.signal(signal.SIGTERM, previous)

def test_monkeypatched(monkeypatch):
    monkeypatch.setattr(signal, "SIGINT", signal.SIGINT)  # restored by monkeypatch; handlers untouched
"""


def _hup_default() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as the message expects, even under a runner started by nohup


def test_a_test_that_leaves_a_handler_changed_fails_and_the_next_meets_it_restored(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(TESTS / "novllm", suite / "novllm")
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    (suite / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    vllm: needs vLLM\n")
    outer = {k: v for k, v in os.environ.items() if not k.startswith("EAGLE_CONVERT_TEST_")}  # this test's own guard
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(suite)],
        cwd=tmp_path,
        env={**outer, "PYTHONPATH": str(TESTS.parent)},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_hup_default,
    )
    lines = proc.stdout.splitlines()
    assert (
        "suite/test_suite.py::test_leaks_a_handler left the signal handler of SIGHUP (SIG_DFL -> _quit) changed; "
        "restore it (monkeypatch, or try/finally), or later tests in this process meet it"
    ) in lines, proc.stdout
    assert any(ln.startswith("ERROR suite/test_suite.py::test_leaks_a_handler - Failed: ") for ln in lines), proc.stdout
    for name in ("test_meets_the_handlers_as_they_were", "test_changes_and_restores", "test_monkeypatched"):
        assert f"PASSED suite/test_suite.py::{name}" in lines, proc.stdout
    assert lines[-1].startswith("4 passed, 1 error in "), proc.stdout
    assert proc.returncode == 1, proc.stdout


def _make_test_xdist() -> list[str]:
    text = MAKEFILE.read_text()
    found = re.search(r"^XDIST_ON\s*:=(.*)$", text, re.MULTILINE)
    assert found, "Makefile: no `XDIST_ON :=` line"
    assert re.search(r"^XDIST\s*\?=\s*\$\(XDIST_ON\)$", text, re.MULTILINE), "make test: xdist is the default"
    return found.group(1).split()


DYING = """
import os

def test_before():
    pass

def test_dies():
    os._exit(1)  # what a leaked `cli.entry._quit` does on a signal, or a segfault, or the OOM killer

def test_after():
    pass
"""

OTHER = """
def test_one():
    pass

def test_two():
    pass
"""


def test_a_worker_that_dies_ends_the_run_red_and_never_hangs(tmp_path: Path) -> None:
    """xdist 3.8 replaces a dead worker by default, and under --dist loadfile the controller then
    waited forever with every worker idle (pytest-xdist #784, #1327): the timeout is that failure."""
    xdist = _make_test_xdist()
    assert "--max-worker-restart=0" in xdist and "loadfile" in xdist, xdist
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_dying.py").write_text(DYING)
    for name in ("b", "c"):
        (tmp_path / f"test_other_{name}.py").write_text(OTHER)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *xdist, "-n", "2"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_ADDOPTS", "PYTEST_XDIST"))},
        capture_output=True,
        text=True,
        timeout=180,  # ~15 s on a loaded 2-core host; the hang this guards against never ends
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout
    assert any(
        re.fullmatch(r"FAILED test_dying.py::test_dies - worker 'gw\d' crashed while running .*", ln) for ln in lines
    ), proc.stdout
    assert "PASSED test_dying.py::test_after" not in lines  # the dead worker's file ends there: the run is red


LATER = """
import pytest

from eagle_convert.errors import CheckpointNotFoundError

def test_a_later_finetune_runs_its_own_plan(tmp_path):
    from eagle_convert.finetune import finetune_draft  # loaded here, as in a worker: not at collection

    with pytest.raises(CheckpointNotFoundError):  # the real plan_finetune's first refusal
        finetune_draft(tmp_path / "draft", tmp_path / "target", tmp_path / "out")
"""


def test_a_stubbed_call_does_not_outlive_its_test(tmp_path: Path) -> None:
    """Issue 32: test_interrupts' finetune case stubs `plan_finetune` to send SIGTERM to the process;
    finetune/run.py, first imported under the stub, kept it (`from ... import`), and a later fine-tune
    in that process (an xdist worker's test_mla) killed it. In a fresh process, as there, the later
    test must meet the real function."""
    (tmp_path / "test_later.py").write_text(LATER)
    case = "test_every_command_exits_130_or_143_with_one_line[finetune-15-143-SIGTERM]"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rA"]
        + [f"--rootdir={TESTS.parent}", f"{TESTS / 'test_interrupts.py'}::{case}", str(tmp_path / "test_later.py")],
        cwd=TESTS.parent,
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.stdout.splitlines()[-1].startswith("2 passed"), proc.stdout
