"""Durable outputs: every file and the temp folder flushed before the rename, the parent after it, and
a replaced output deleted only after that; `--no-fsync` flushes nothing.

A power cut cannot be staged in a test, so these tests record the order of the system calls that
make an output durable (fsync per path, the rename or exchange, the old output's removal) and
check it against the order the ext4/XFS documentation and `rename(2)` require.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.io import atomic
from eagle_convert.io.atomic import write_text_atomic
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release

try:
    from tests.test_upgrade import sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """("fsync", path) / ("publish", final) / ("remove", path), in the order they happen."""
    log: list[tuple[str, str]] = []
    real_fsync, real_rename, real_exchange, real_remove = os.fsync, os.rename, atomic._exchange, atomic._remove

    def fsync(fd: int) -> None:
        log.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(a: str | Path, b: str | Path, **kw: object) -> None:
        real_rename(a, b, **kw)
        log.append(("rename", f"{a} -> {b}"))

    def exchange(a: Path, b: Path) -> bool:
        done = real_exchange(a, b)
        if done:
            log.append(("rename", f"{a} <-> {b}"))
        return done

    def remove(path: Path) -> None:
        log.append(("remove", str(path)))
        real_remove(path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(atomic, "_exchange", exchange)
    monkeypatch.setattr(atomic, "_remove", remove)
    return log


@pytest.mark.parametrize("name", ["vllm-eagle3", "vllm-eagle3-sharded"])
@pytest.mark.parametrize("replace", [False, True])
def test_flushed_in_order(name: str, replace: bool, built_fixtures, tmp_path: Path, events) -> None:
    src = built_fixtures(name)
    out = tmp_path / "parent" / "out"
    if replace:
        out.mkdir(parents=True)
        (out / "old.txt").write_text("the previous output")
    ckpt = open_checkpoint(str(src))
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False), out=out)
    events.clear()
    result = apply_upgrade(plan, out, force=replace)
    kinds = [k for k, _ in events]
    published = kinds.index("rename")
    assert kinds.count("rename") == (2 if replace and "<->" not in events[published][1] else 1)
    synced = [Path(p) for k, p in events[:published] if k == "fsync"]
    tmp = synced[-1]  # the temp folder itself, after every file in it ...
    assert tmp.parent == out.parent and tmp.name.startswith(".out.tmp-")
    # (weight files twice: once by the early flusher as soon as each is written, once by the final pass)
    assert {p.name for p in synced[:-1]} == set(result.files)
    assert all(p.parent == tmp for p in synced[:-1])
    weights = [p.name for p in synced[:-1] if p.suffix == ".safetensors"]
    assert sorted(set(weights)) == sorted(n for n in result.files if n.endswith(".safetensors"))
    assert len(weights) == 2 * len(set(weights))
    # ... before the rename; the parent after it, and only then the old output is deleted.
    parent_sync = events.index(("fsync", str(out.parent)))
    assert parent_sync > published
    removes = [i for i, (k, _) in enumerate(events) if k == "remove"]
    assert (len(removes) == 1 and removes[0] > parent_sync) if replace else removes == []
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]
    assert set(os.listdir(out)) == set(result.files)


def test_no_fsync_flushes_nothing_and_writes_the_same_output(built_fixtures, tmp_path: Path, events) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(tmp_path / "a" / "out")])
    assert res.exit_code == 0, res.output
    assert any(k == "fsync" for k, _ in events)
    events.clear()
    res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(tmp_path / "b" / "out"), "--no-fsync"])
    assert res.exit_code == 0, res.output
    assert [k for k, _ in events] == ["rename"]
    a, b = (sha_tree(tmp_path / d) for d in "ab")
    assert a.pop("out/README.md") != b.pop("out/README.md")  # the model card names its own folder
    assert a == b


def test_link_output_is_flushed_too(built_fixtures, tmp_path: Path, events) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(out), "--layout", "keep", "--link"])
    assert res.exit_code == 0, res.output
    published = [k for k, _ in events].index("rename")
    flushed = {Path(p).name for k, p in events[:published] if k == "fsync"}
    assert set(os.listdir(out)) <= flushed
    assert ("fsync", str(tmp_path)) in events[published:]


def test_write_text_atomic_flushes_file_then_folder(tmp_path: Path, events) -> None:
    path = tmp_path / "report.md"
    write_text_atomic(path, "text\n")
    assert [k for k, _ in events] == ["fsync", "fsync"]
    assert Path(events[0][1]).name.startswith(".report.md.tmp-") and events[1] == ("fsync", str(tmp_path))
    events.clear()
    write_text_atomic(path, "again\n", fsync=False)
    assert events == [] and path.read_text() == "again\n"
