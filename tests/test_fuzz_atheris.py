"""scripts/fuzz_atheris.py: a clear message without atheris, and its harness wired to the mutators
(run here under a stand-in `atheris` that feeds it fixed inputs, as libFuzzer would)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fuzz_atheris.py"

FAKE_ATHERIS = textwrap.dedent(
    '''
    """A stand-in for atheris: Fuzz() calls the target on 25 fixed inputs, then exits like libFuzzer."""
    import contextlib, hashlib, sys

    instrument_imports = contextlib.nullcontext
    _target = None

    class FuzzedDataProvider:
        def __init__(self, data):
            self.data, self.pos = data, 0

        def _next(self):
            self.pos += 1
            return self.data[(self.pos - 1) % len(self.data)]

        def ConsumeIntInRange(self, lo, hi):
            return lo + int.from_bytes(bytes(self._next() for _ in range(4)), "little") % (hi - lo + 1)

        def ConsumeBytes(self, n):
            return bytes(self._next() for _ in range(n))

    def Setup(argv, target):
        global _target
        _target = target

    def Fuzz():
        for i in range(25):
            _target(hashlib.sha256(str(i).encode()).digest() * 4)
        print("fake atheris: 25 inputs", file=sys.stderr)
    '''
)


def _run(tmp_path: Path, with_atheris: bool) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT)]
    if with_atheris:
        (tmp_path / "atheris.py").write_text(FAKE_ATHERIS)
        paths.insert(0, str(tmp_path))
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )


def test_without_atheris_it_says_how_to_get_it(tmp_path: Path) -> None:
    proc = _run(tmp_path, with_atheris=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("fuzz_atheris.py needs atheris (pip install atheris")


def test_the_harness_runs_mutants_through_the_commands(tmp_path: Path) -> None:
    proc = _run(tmp_path, with_atheris=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == "fake atheris: 25 inputs"
    assert list((tmp_path / "tmp").iterdir()) == []  # its work folder (fixtures, mutants) is removed
