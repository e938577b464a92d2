"""`upgrade --link` from a Hugging Face cache snapshot: symlinks into ../../blobs resolve to the blobs.

A downloaded draft lives in `models--org--name/snapshots/<rev>/`, every file a relative symlink to
`../../blobs/<sha256>`. `link(2)` does not follow symlinks, so linking the snapshot's names used to
put the symlinks themselves into the output: dangling there (the relative path names nothing beside
the output), or, where it happened to resolve, a symlink into the input.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.io.links import link_or_copy

try:
    from tests.test_upgrade import sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree

REV = "0123456789abcdef0123456789abcdef01234567"


def hub_cache_snapshot(draft: Path, cache: Path) -> Path:
    """Move `draft`'s files into an HF-cache-shaped repo folder; returns its snapshot folder."""
    repo = cache / "models--org--draft"
    blobs, snap = repo / "blobs", repo / "snapshots" / REV
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    for f in sorted(draft.iterdir()):
        sha = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, blobs / sha)
        (snap / f.name).symlink_to(Path("..", "..", "blobs", sha))
    return snap


def lstat_tree(root: Path) -> dict[str, tuple[int, str]]:
    """Mode and (for symlinks) target of every entry: the "input unchanged" check for symlinks."""
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, os.readlink(p) if p.is_symlink() else "")
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("name", ["vllm-eagle3", "vllm-eagle3-sharded"])
@pytest.mark.parametrize("where", ["beside", "elsewhere"])
def test_link_from_a_hub_cache_snapshot(name: str, where: str, built_fixtures, tmp_path: Path) -> None:
    snap = hub_cache_snapshot(built_fixtures(name), tmp_path / "hub")
    # "beside": the output sits two levels under a folder holding a blobs/ of its own, so the
    # snapshot's relative symlinks would resolve from there too (the case that used to succeed
    # with a symlink in the output); "elsewhere": they would dangle.
    base = tmp_path / "hub" / "models--org--draft" / "snapshots" if where == "beside" else tmp_path / "x"
    out = base / "out"
    blobs = snap.parent.parent / "blobs"
    before, links_before = sha_tree(blobs), lstat_tree(snap)
    res = CliRunner().invoke(main, ["upgrade", str(snap), "--out", str(out), "--layout", "keep", "--link"])
    assert res.exit_code == 0, res.output
    entries = sorted(out.iterdir())
    assert entries and all(stat.S_ISREG(p.lstat().st_mode) for p in entries), [
        (p.name, oct(p.lstat().st_mode)) for p in entries
    ]
    for p in entries:
        src = snap / p.name
        if src.exists() and p.suffix == ".safetensors" and "reflinked" not in res.output:
            assert os.path.samefile(p, src.resolve())  # a hard link to the blob itself
    assert CliRunner().invoke(main, ["validate", str(out)]).exit_code == 0
    assert sha_tree(blobs) == before and lstat_tree(snap) == links_before


def test_link_or_copy_never_creates_a_symlink(tmp_path: Path) -> None:
    blob = tmp_path / "blobs" / "abc"
    blob.parent.mkdir()
    blob.write_bytes(b"weights" * 100)
    (tmp_path / "snap").mkdir()
    name = tmp_path / "snap" / "model.safetensors"
    name.symlink_to(Path("..", "blobs", "abc"))
    for method in ("hardlink", "copy"):
        dst = tmp_path / f"out-{method}"
        outcome = link_or_copy(name, dst, methods=(method,))
        assert outcome.method == method
        assert stat.S_ISREG(dst.lstat().st_mode) and dst.read_bytes() == blob.read_bytes()
    assert os.path.samefile(tmp_path / "out-hardlink", blob)
    (tmp_path / "snap" / "gone").symlink_to("../blobs/missing")
    with pytest.raises(FileNotFoundError):
        link_or_copy(tmp_path / "snap" / "gone", tmp_path / "out-gone")
    assert not (tmp_path / "out-gone").exists()
