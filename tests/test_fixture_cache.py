"""fixtures/cachedir.py: parallel test workers (pytest-xdist) asking for one cache folder build it once,
and none of them sees it half-written or has it deleted under it."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from fixtures.cachedir import build_once, read_stamp


def _ask(out: str, log: str) -> str:
    def build(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.5)  # long enough that every other process asks while this one builds
        (tmp / "stamp.json").write_text('{"key": 1}')

    got = build_once(Path(out), lambda d: read_stamp(d / "stamp.json") == {"key": 1}, build)
    return (got / "stamp.json").read_text()


def test_four_processes_build_one_folder_once(tmp_path: Path) -> None:
    out, log = tmp_path / "cache" / "thing-abc", tmp_path / "log"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        seen = pool.starmap(_ask, [(str(out), str(log))] * 4)
    assert seen == ['{"key": 1}'] * 4
    assert log.read_text() == "built\n"
    assert sorted(p.name for p in out.parent.iterdir()) == [".thing-abc.lock", "thing-abc"]  # no temporary left


def test_a_stale_build_is_replaced_and_a_failed_one_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "thing"
    out.mkdir()
    (out / "stamp.json").write_text('{"key": 0}')

    def fail(tmp: Path) -> None:
        (tmp / "half").write_text("x")
        raise RuntimeError("build failed")

    ready = lambda d: read_stamp(d / "stamp.json") == {"key": 1}  # noqa: E731
    with pytest.raises(RuntimeError, match="build failed"):
        build_once(out, ready, fail)
    assert read_stamp(out / "stamp.json") == {"key": 0}  # the old one stays until a build succeeds
    assert sorted(p.name for p in tmp_path.iterdir()) == [".thing.lock", "thing"]
    build_once(out, ready, lambda tmp: (tmp / "stamp.json").write_text('{"key": 1}'))
    assert read_stamp(out / "stamp.json") == {"key": 1}
