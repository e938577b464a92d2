"""Coverage-guided fuzzing of inspect, validate, upgrade and diff with atheris (libFuzzer).

    pip install atheris
    python scripts/fuzz_atheris.py [-atheris_runs=100000] [-max_total_time=3600] [CORPUS_DIR]

Each input is read as the choices of fixtures/mutants.py's mutators (which fixture draft, which
damage, where, what value), so atheris steers the same mutations the CI test draws at random
(tests/test_fuzz_inputs.py) towards new code paths. A broken promise of README 'Safety'
(traceback, exit code other than 0/1/2, more than one `Error:` line, a changed input, a write
outside the output, over 30 s) raises `fixtures.mutants.Broken`, which atheris reports as a crash
with the input that caused it. Extra arguments go to libFuzzer.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class _Provider:
    """fixtures.mutants.Pick over atheris.FuzzedDataProvider."""

    def __init__(self, fdp: object) -> None:
        self.fdp = fdp

    def integer(self, lo: int, hi: int) -> int:
        return self.fdp.ConsumeIntInRange(lo, hi)  # type: ignore[attr-defined]

    def raw(self, max_len: int) -> bytes:
        return self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, max_len))  # type: ignore[attr-defined]


def main() -> int:
    try:
        import atheris
    except ImportError:
        print(
            "fuzz_atheris.py needs atheris (pip install atheris; Linux or macOS, CPython 3.8-3.12). "
            "Without it, run the hypothesis fuzzer: EAGLE_FUZZ_MUTANTS=20000 pytest tests/test_fuzz_inputs.py",
            file=sys.stderr,
        )
        return 2
    with atheris.instrument_imports():
        from click.testing import CliRunner

        from eagle_convert.cli.app import main as cli
        from fixtures.drafts import FIXTURE_MATRIX, build_draft
        from fixtures.mutants import COMMANDS, FIXTURES, check_run, mutate

    work = Path(tempfile.mkdtemp(prefix="eagle-fuzz-"))
    bases = {name: build_draft(work / "bases" / name, FIXTURE_MATRIX[name]) for name in FIXTURES}
    case = work / "case"

    def invoke(args: list[str]):
        return CliRunner().invoke(cli, args)

    def one_input(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        pick = _Provider(fdp)
        fixture = FIXTURES[pick.integer(0, len(FIXTURES) - 1)]
        command = COMMANDS[pick.integer(0, len(COMMANDS) - 1)]
        if case.exists():
            shutil.rmtree(case)
        case.mkdir()
        folder = case / "draft"
        shutil.copytree(bases[fixture], folder, symlinks=True)
        what = f"{fixture}: " + mutate(folder, pick)
        check_run(invoke, command, folder, bases[fixture], what)

    atheris.Setup(sys.argv, one_input)
    try:
        atheris.Fuzz()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
