"""Fuzzing in CI: hypothesis mutates valid fixture drafts and runs inspect, validate (static and
--deep), upgrade and diff on each mutant, checking README 'Safety's promises (fixtures/mutants.py).

Every mutant goes through all five commands, so N mutants are that many mutated files per command:
N is the hypothesis profile's max_examples (tests/conftest.py: 2,000 under `--hypothesis-profile ci`,
as `make test` and CI run it; 200 by default) unless EAGLE_FUZZ_MUTANTS sets it. CI runs the same
mutants each time; EAGLE_FUZZ_SEED=N draws others, and EAGLE_FUZZ_MUTANTS=20000 runs a longer
campaign (about 8 minutes); for coverage-guided runs use scripts/fuzz_atheris.py. A few mutants
also run as real processes under a 2 GiB address-space limit: the exit codes CliRunner reports are the ones a shell sees, and no
mutant needs unbounded memory.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from eagle_convert.cli.app import main
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.mutants import COMMANDS, FIXTURES, MAX_SECONDS, Broken, check_run, mutate

ROOT = Path(__file__).resolve().parent.parent
MUTANTS_ENV = os.environ.get("EAGLE_FUZZ_MUTANTS")
SEED = os.environ.get("EAGLE_FUZZ_SEED")
SUBPROCESS_MUTANTS = 12
HANG_SECONDS = 2 * MAX_SECONDS
MEMORY_LIMIT = 2 << 30


class _Draw:
    """fixtures.mutants.Pick over hypothesis' `data.draw`."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def raw(self, max_len: int) -> bytes:
        return self.data.draw(st.binary(max_size=max_len))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz-bases")
    return {name: build_draft(root / name, FIXTURE_MATRIX[name]) for name in FIXTURES}


class StillRunning(Exception):
    """Raised in a command by SIGALRM; CliRunner reports it as the run's exception."""


def _alarm(signum: int, frame: object) -> None:
    raise StillRunning(f"still running after {HANG_SECONDS:.0f} s")


def _invoke(args: list[str]):
    """CliRunner, with SIGALRM turning a hang (a blocking open, a runaway loop) into a failure."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(HANG_SECONDS))
    try:
        return CliRunner().invoke(main, args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _fresh(tmp: Path, base: Path) -> Path:
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    folder = tmp / "draft"
    shutil.copytree(base, folder, symlinks=True)
    return folder


def test_mutants_keep_every_promise(bases: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """~50 s at the ci profile's 2,000 mutants, ~5 s at the default 200."""
    mutants = int(MUTANTS_ENV or settings.default.max_examples)
    tmp = tmp_path_factory.mktemp("fuzz") / "case"
    seen = {c: 0 for c in COMMANDS}
    codes: dict[int, int] = {}

    @settings(
        max_examples=mutants,
        deadline=None,
        database=None,
        derandomize=False,  # @seed below: the same mutants every run unless EAGLE_FUZZ_SEED is set
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @seed(int(SEED or 0))
    @given(st.sampled_from(FIXTURES), st.data())
    def run(fixture: str, data: st.DataObject) -> None:
        folder = _fresh(tmp, bases[fixture])
        what = f"{fixture}: " + mutate(folder, _Draw(data))
        for command in COMMANDS:
            code = check_run(_invoke, command, folder, bases[fixture], what)
            seen[command] += 1
            codes[code] = codes.get(code, 0) + 1

    run()
    print(f"mutants per command: {seen}; exit codes: {codes}")
    assert min(seen.values()) >= mutants, seen
    assert codes.get(1, 0) > mutants  # most mutants are refused, as they should be
    shutil.rmtree(tmp, ignore_errors=True)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("seed", range(SUBPROCESS_MUTANTS))
def test_mutants_as_real_processes(seed: int, bases: dict[str, Path], tmp_path: Path) -> None:
    """The real exit status and stderr of `python -m eagle_convert.cli.app`, under a 2 GiB limit."""
    import random

    rng = random.Random(seed)
    pick = SimpleNamespace(integer=rng.randint, raw=lambda n: rng.randbytes(rng.randint(0, n)))
    fixture = FIXTURES[seed % len(FIXTURES)]
    folder = _fresh(tmp_path / "case", bases[fixture])
    what = mutate(folder, pick)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}

    def invoke(args: list[str]) -> SimpleNamespace:
        proc = subprocess.run(
            [sys.executable, "-m", "eagle_convert.cli.app", *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
            env=env,
            preexec_fn=_limit_memory,
        )
        return SimpleNamespace(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr, exception=None)

    for command in ("inspect", "validate", "upgrade"):
        try:
            check_run(invoke, command, folder, bases[fixture], f"{fixture}: {what}")
        except Broken as exc:
            pytest.fail(str(exc))
