"""Kill `eagle-convert upgrade` midway (a real subprocess and a real signal): no partial output, input unchanged.

The subprocess runs the real CLI; the only change is that copying goes in 64 KiB chunks with a short
sleep after each, so that "midway" is a wide, deterministic window instead of a race.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.drafts import DraftSpec, build_draft

try:
    from tests.test_upgrade import sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree

ROOT = Path(__file__).resolve().parent.parent
SLOW_CLI = """
import functools, sys, time
import eagle_convert.upgrade.apply as up
real = up.write_file
def slow(out_dir, f, *, progress=None, **kw):
    def tick(n):
        time.sleep(0.02)
        if progress:
            progress(n)
    return real(out_dir, f, progress=tick, chunk_bytes=64 << 10, **kw)
up.write_file = slow
from eagle_convert.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def big_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = DraftSpec(hidden=512, intermediate=1024, heads=8, kv_heads=2, vocab_size=8192, draft_vocab_size=2048)
    return build_draft(tmp_path_factory.mktemp("kill") / "draft", spec)  # ~9 MB: ~140 slow chunks


def start(src: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_CLI, "upgrade", str(src), "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A job started in the background by a non-interactive shell (as CI may start this suite)
        # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: give the
        # child the disposition an interactive user's Ctrl-C meets.
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_partial(proc: subprocess.Popen, out: Path, timeout: float = 60.0) -> Path:
    """The temp sibling once it holds a partly written weights file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for tmp in out.parent.glob(f".{out.name}.tmp-*"):
            f = tmp / "model.safetensors"
            if f.exists() and f.stat().st_size > 1 << 20:
                return tmp
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("upgrade never got going")


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_signal_midway_leaves_nothing(sig: int, code: int, name: str, big_draft: Path, tmp_path: Path) -> None:
    before = sha_tree(big_draft)
    out = tmp_path / "out"
    proc = start(big_draft, out)
    tmp = wait_for_partial(proc, out)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert stderr.endswith(f"Error: interrupted ({name}); nothing was written and {big_draft} is unchanged\n")
    assert not out.exists() and not tmp.exists() and list(tmp_path.iterdir()) == []
    assert sha_tree(big_draft) == before


def test_sigkill_leaves_only_a_hidden_temp_that_the_next_run_removes(big_draft: Path, tmp_path: Path) -> None:
    before = sha_tree(big_draft)
    out = tmp_path / "out"
    proc = start(big_draft, out)
    tmp = wait_for_partial(proc, out)
    proc.kill()
    proc.communicate(timeout=60)
    assert not out.exists() and tmp.exists()  # SIGKILL runs no cleanup; the temp is hidden, never `out`
    assert sha_tree(big_draft) == before
    cli = [sys.executable, "-c", "from eagle_convert.cli.app import main; main()"]
    done = subprocess.run(
        [*cli, "upgrade", str(big_draft), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # stale temp removed, output complete
    assert sha_tree(big_draft) == before
