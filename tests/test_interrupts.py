"""One interrupt path for every command: real signals at controlled points, true messages, 130/143.

The subprocess tests run the real console-script entry (`cli.entry.main`) with one library function
wrapped to announce a point ("@@point" on stderr) and then sleep: the test sends the signal when
it reads the announcement. A point inside a section that defers signals (creating the temp
folder, publishing) sleeps briefly and the signal lands when the section ends; elsewhere the sleep
is long and the signal cuts it short. The in-process tests make each command's library call send
the signal to the test process itself, through click's CliRunner.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main

try:
    from tests.test_upgrade import sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")]
HOOKED_CLI = """
import importlib, sys, time
module, attr, when, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
mod = importlib.import_module(module)
real = getattr(mod, attr)
def point():
    print("@@point", file=sys.stderr, flush=True)
    time.sleep(pause)
def hooked(*a, **k):
    if when == "before":
        point()
    out = real(*a, **k)
    if when == "after":
        point()
    return out
setattr(mod, attr, hooked)
sys.argv = ["eagle-convert", *sys.argv[5:]]
from eagle_convert.cli.entry import main
main()
"""
HELD, LONG = "1.0", "60"  # seconds a point sleeps: inside a deferring section / anywhere else


def _default_signals() -> None:
    """SIGINT and SIGHUP at their defaults, as an interactive shell starts a command (test_upgrade_kill),
    whatever the test runner inherited: under a runner started by nohup the SIGHUP cases waited out
    their 60 s point and failed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _nohup() -> None:
    _default_signals()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what `nohup` does


def run_to_point(
    hook: tuple[str, str, str, str], args: list[object], sig: int, *, nohup: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the CLI with `hook`, send `sig` at the announced point, return the finished process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOOKED_CLI, *hook, *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_nohup if nohup else _default_signals,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line == "@@point\n":
            break
    else:
        out, err = proc.communicate()
        raise AssertionError(f"never reached the point: {''.join(seen)}{err}")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def reference(built_fixtures, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A small draft and the files of its uninterrupted upgrade (the model card names its folder)."""
    src = built_fixtures("vllm-eagle3")
    ref = tmp_path_factory.mktemp("ref") / "out"
    assert CliRunner().invoke(main, ["upgrade", str(src), "--out", str(ref)]).exit_code == 0
    return src, {k: v for k, v in sha_tree(ref).items() if k != "README.md"}


def weights_of(out: Path) -> dict[str, str]:
    return {k: v for k, v in sha_tree(out).items() if k != "README.md"}


@pytest.mark.parametrize(("sig", "code", "name"), [*SIGNALS, (signal.SIGHUP, 129, "SIGHUP")])
@pytest.mark.parametrize(
    "hook",
    [
        ("eagle_convert.upgrade.plan", "plan_upgrade", "before", LONG),  # planning: nothing exists yet
        ("eagle_convert.io.atomic", "_make_temp_dir", "after", HELD),  # the temp folder just appeared
        ("eagle_convert.io.writer", "write_file", "before", LONG),  # writing into the temp folder
    ],
    ids=["planning", "temp-appears", "writing"],
)
def test_interrupted_before_publishing(hook, sig: int, code: int, name: str, reference, tmp_path: Path) -> None:
    src, _ = reference
    before = sha_tree(src)
    done = run_to_point(hook, ["upgrade", src, "--out", tmp_path / "out"], sig)
    assert done.returncode == code, done.stderr
    assert done.stderr == f"Error: interrupted ({name}); nothing was written and {src} is unchanged\n"
    assert list(tmp_path.iterdir()) == []  # no output, no temp folder, no lock file
    assert sha_tree(src) == before


@pytest.mark.parametrize(("sig", "code", "name"), SIGNALS)
@pytest.mark.parametrize(
    ("hook", "force"),
    [
        (("eagle_convert.io.atomic", "_remove", "before", HELD), True),  # deleting the replaced output
        (("eagle_convert.cli.render.upgrade", "render_result", "before", LONG), True),  # published, printing
        (("eagle_convert.cli.render.upgrade", "render_result", "before", LONG), False),
    ],
    ids=["removing-old", "after-force", "after-publish"],
)
def test_interrupted_after_publishing_says_so(
    hook, force: bool, sig: int, code: int, name: str, reference, tmp_path: Path
) -> None:
    src, want = reference
    before = sha_tree(src)
    out = tmp_path / "out"
    if force:
        out.mkdir()
        (out / "old.txt").write_text("the previous output")
    args = ["upgrade", src, "--out", out, *(["--force"] if force else [])]
    done = run_to_point(hook, args, sig)
    assert done.returncode == code, done.stderr
    assert done.stderr == (
        f"Error: interrupted ({name}) after {out} was written and verified completely; {src} is unchanged\n"
    )
    assert weights_of(out) == want  # the new output, whole; the old one is gone, nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sha_tree(src) == before


def test_sighup_under_nohup_stays_ignored(reference, tmp_path: Path) -> None:
    src, want = reference
    out = tmp_path / "out"
    done = run_to_point(
        ("eagle_convert.io.writer", "write_file", "before", HELD),
        ["upgrade", src, "--out", out],
        signal.SIGHUP,
        nohup=True,
    )
    assert done.returncode == 0, done.stderr
    assert weights_of(out) == want and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def start_and_interrupt(code: str, args: list[str], delay_ms: int) -> tuple[int, list[str]]:
    """Start `python -c code args` and send SIGINT `delay_ms` after the console script's module
    (`cli.entry`) is imported; returns the exit status and the stderr lines that are not -X
    importtime's. The clock starts at that import, not at `site`: what runs between them (the
    package's face, ~1-2 ms idle and several times that on a loaded CI host) is Python's import of
    our package before any handler of ours can exist, and a fixed margin after `site` failed there."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # -X importtime reports each import as it completes
        if line.rstrip().endswith("| eagle_convert.cli.entry"):
            break
    time.sleep(delay_ms / 1000)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, [ln for ln in err.splitlines() if not ln.startswith("import time:")]


# What Python does before `cli.entry` is imported (site, the package's face) is Python's: a SIGINT
# there ends in Python's own message. From then on (`main()` installs the handler a few bytecodes
# after the import completes; the 1 ms floor covers them) every SIGINT ends in one line. Before,
# click, rich and the command modules (~40 ms) printed tracebacks.
@pytest.mark.parametrize("delay_ms", [1, 5, 10, 15, 20, 30, 40, 60])
def test_sigint_during_startup_prints_no_traceback(delay_ms: int, built_fixtures) -> None:
    src = built_fixtures("vllm-eagle3")
    code, err = start_and_interrupt(
        "from eagle_convert.cli.entry import main; main()", ["validate", str(src), "--deep"], delay_ms
    )
    assert not any("Traceback" in ln or "KeyboardInterrupt" in ln for ln in err), err
    assert code in (130, 0), err  # interrupted (one line), or finished first
    if code == 130:
        assert err == ["Error: interrupted (SIGINT); nothing was written"]


@pytest.mark.parametrize("delay_ms", [1, 3, 6, 12, 25])
def test_sigint_early_in_upgrade_stops_it(delay_ms: int, built_fixtures, tmp_path: Path) -> None:
    """Issue 33: a Ctrl-C while `upgrade`'s modules were importing printed a traceback, and the upgrade
    went on and exited 0. `cli.entry` now installs its handler through `_signal` before `signal`'s own
    ~15 ms import: the command stops with exit 130, one line, and no output."""
    out = tmp_path / "out"
    code, err = start_and_interrupt(
        "from eagle_convert.cli.entry import main; main()",
        ["upgrade", str(built_fixtures("vllm-eagle3")), "--out", str(out)],
        delay_ms,
    )
    assert not any("Traceback" in ln or "KeyboardInterrupt" in ln or "ignored" in ln for ln in err), err
    assert code in (130, 0), err
    if code == 130:
        assert len(err) == 1 and err[0].startswith("Error: interrupted (SIGINT)"), err
        assert not out.exists()


def _signal_self(sig: int):
    def call(*_a: object, **_k: object) -> None:
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the handler raises as soon as the signal is delivered
        raise AssertionError("the signal did not interrupt")

    return call


COMMANDS = [
    # (command line, module and function it calls, the detail after the signal's name)
    (["inspect", "d"], "eagle_convert.draft.inspect", "inspect_checkpoint", "; nothing was written"),
    (["validate", "d"], "eagle_convert.validate.entry", "run_validate", "; nothing was written"),
    (["diff", "a", "b"], "eagle_convert.diff", "diff_checkpoints", "; nothing was written"),
    (["smoke", "d", "--target", "t"], "eagle_convert.measure.smoke", "run_smoke", "; nothing was written"),
    (["drift", "d", "--target", "t"], "eagle_convert.drift.run", "run_drift", "; nothing was written"),
    (["check", "d", "--target", "t"], "eagle_convert.check.run", "run_check", "; nothing was written"),
    (["push", "d", "org/name"], "eagle_convert.push", "push_draft", "; nothing was written"),
    (
        ["finetune", "d", "--target", "t", "--out", "{out}"],
        "eagle_convert.finetune.plan",
        "plan_finetune",
        "; nothing was written and d is unchanged",
    ),
    (
        ["report", "d", "--target", "t", "--out", "{out}", "--engine", "reference"],
        "eagle_convert.report.run",
        "run_report",
        " after 0 finished stages, which are recorded in {out}; run the same command again to resume",
    ),
]


def copies_of(stub: object) -> list[tuple[str, str]]:
    """(module, name) of every loaded module's global that is `stub`."""
    return [
        (mod_name, k)
        for mod_name, mod in list(sys.modules.items())
        for k, v in list(getattr(mod, "__dict__", {}).items())
        if v is stub
    ]


@pytest.fixture
def signal_self(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str, int], None]]:
    """signal_self(module, func, sig): for this test, `module.func` sends `sig` to this process.

    monkeypatch puts back `module.func` alone, but a module first imported while the stub is in place
    binds it with `from module import func` and keeps it: the CLI's finetune loads finetune/run.py,
    which so held a stub of `plan_finetune` for the rest of the process, and the next caller (an xdist
    worker's test_mla fine-tune) sent itself SIGTERM under SIG_DFL and died (issue 32). So every copy
    gets the real function back before monkeypatch's own undo runs (this fixture's teardown is first).
    """
    made: list[tuple[object, object]] = []

    def patch(module: str, func: str, sig: int) -> None:
        mod = importlib.import_module(module)
        stub = _signal_self(sig)
        made.append((getattr(mod, func), stub))
        monkeypatch.setattr(mod, func, stub)

    yield patch
    for real, stub in made:
        for mod_name, k in copies_of(stub):
            setattr(sys.modules[mod_name], k, real)


@pytest.mark.parametrize(("sig", "code", "name"), SIGNALS)
@pytest.mark.parametrize(("args", "module", "func", "detail"), COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_every_command_exits_130_or_143_with_one_line(
    args, module: str, func: str, detail: str, sig: int, code: int, name: str, signal_self, tmp_path: Path
) -> None:
    signal_self(module, func, sig)
    out = tmp_path / "out"
    before = signal.getsignal(signal.SIGTERM)
    res = CliRunner().invoke(main, [a.format(out=out) for a in args])
    assert res.exit_code == code, res.output
    assert res.output.endswith(f"Error: interrupted ({name}){detail.format(out=out)}\n"), res.output
    assert "Aborted!" not in res.output and "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == before  # the command's handlers are gone again
