"""A test that leaves a signal handler changed fails, and the next test meets the handler as it was
(`tests/conftest.py`, `_signal_handlers_kept`): under xdist a leaked SIG_DFL or `cli.entry._quit`
for SIGTERM/SIGHUP ends the worker process, and the controller then loses the rest of its file. Run
on a small suite with this conftest, in its own pytest process, since the guard's failure is that
process's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

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
