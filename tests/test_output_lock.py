"""Two runs on one output: the second is refused at once; temps are removed only when their owner is gone.

Before, each run's stale-temp cleanup deleted the other run's live temp folder: both failed, or the
loser reported a misleading write error. The race tests run two real `upgrade` processes (the
first slowed down, as in tests/test_upgrade_kill.py, so that "while it writes" is a wide window).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.io.atomic import atomic_output_dir, cleanup_stale_temps
from eagle_convert.io.outlock import OutputLock, OutputLockedError, lock_name

try:
    from tests.test_upgrade import sha_tree
    from tests.test_upgrade_kill import big_draft, start, wait_for_partial  # noqa: F401 (a fixture)
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree
    from test_upgrade_kill import big_draft, start, wait_for_partial  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from eagle_convert.cli.entry import main; main()"]


def locked_message(out: Path, pid: int) -> str:
    return (
        f"Error: {out}: another eagle-convert run (pid {pid}) is writing this output "
        "(wait for it to finish, or choose another output folder)\n"
    )


def run_cli(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([*CLI, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("force", [False, True])
def test_second_upgrade_to_one_output_is_refused_at_once(force: bool, big_draft: Path, tmp_path: Path) -> None:
    before = sha_tree(big_draft)
    out = tmp_path / "out"
    first = start(big_draft, out)
    tmp = wait_for_partial(first, out)
    t0 = time.monotonic()
    second = run_cli("upgrade", big_draft, "--out", out, *(["--force"] if force else []))
    assert time.monotonic() - t0 < 30  # refused, not queued behind the first run
    assert second.returncode == 1
    assert second.stderr == locked_message(out, first.pid)
    assert tmp.exists()  # the first run's temp folder was left alone
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp, no lock file left
    assert run_cli("validate", out).returncode == 0
    ref = tmp_path.parent / f"{tmp_path.name}-ref"
    assert CliRunner().invoke(main, ["upgrade", str(big_draft), "--out", str(ref)]).exit_code == 0
    assert {k: v for k, v in sha_tree(out).items() if k != "README.md"} == {
        k: v for k, v in sha_tree(ref).items() if k != "README.md"
    }
    assert sha_tree(big_draft) == before


def test_a_killed_runs_lock_is_taken_over(big_draft: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = start(big_draft, out)
    wait_for_partial(first, out)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    assert lock_name(out).exists()  # SIGKILL runs no cleanup; the kernel dropped the lock itself
    done = run_cli("upgrade", big_draft, "--out", out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


HOLD_DIR = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_cleanup_keeps_a_temp_whose_owner_lives(tmp_path: Path) -> None:
    final = tmp_path / "out"
    live, dead = tmp_path / ".out.tmp-1-aaaaaaaa", tmp_path / ".out.tmp-2-bbbbbbbb"
    for d in (live, dead):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"partial")
    owner = subprocess.Popen([sys.executable, "-c", HOLD_DIR, str(live)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "held\n"
        assert cleanup_stale_temps(final) == [dead]
        with atomic_output_dir(final) as tmp:  # a real write on the same output meanwhile
            (tmp / "a.txt").write_text("a")
        assert (live / "model.safetensors").read_bytes() == b"partial"
    finally:
        owner.kill()
        owner.wait()
    assert cleanup_stale_temps(final) == [live]  # its owner is gone now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_lock_refuses_a_second_holder_and_is_removed_on_release(tmp_path: Path) -> None:
    final = tmp_path / "out"
    lock = OutputLock.acquire(final)
    try:
        with pytest.raises(OutputLockedError) as info:
            OutputLock.acquire(final)  # another open file description: flock refuses even in-process
        assert info.value.pid == os.getpid()
        assert str(info.value) == (
            f"{final}: another eagle-convert run (pid {os.getpid()}) is writing this output "
            "(wait for it to finish, or choose another output folder)"
        )
        with pytest.raises(OutputLockedError):
            with atomic_output_dir(final):
                pytest.fail("body must not run")
        res = CliRunner().invoke(main, ["upgrade", str(tmp_path / "missing-input"), "--out", str(final)])
        assert res.exit_code == 1  # (refused for its input first: the lock costs an input check nothing)
        assert cleanup_stale_temps(final) == []  # a held lock: somebody is working, touch nothing
    finally:
        lock.release()
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_a_locked_output_before_planning(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3")
    out = tmp_path / "out"
    lock = OutputLock.acquire(out)
    try:
        for extra in ([], ["--force"], ["--dry-run"], ["--link", "--layout", "keep"]):
            res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(out), *extra])
            assert res.exit_code == 1, res.output
            assert res.output.endswith(locked_message(out, os.getpid())), res.output
    finally:
        lock.release()
    assert list(tmp_path.iterdir()) == []
