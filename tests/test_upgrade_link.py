"""`upgrade --link`: linked weight files + one new shard equal the copied upgrade; refusals; links never written through."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.card import PROVENANCE_KEY
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.errors import UpgradeRefusedError, VerificationError
from eagle_convert.io import links as links_mod
from eagle_convert.upgrade.link import apply_link
from eagle_convert.upgrade.linkplan import NORM_SHARD, plan_link
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release

try:
    from tests.test_upgrade import bits, load_output, sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import bits, load_output, sha_tree


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def flat(text: str) -> str:
    """Output without rich's line wrapping."""
    return " ".join(text.split())


def read_back(folder: Path) -> dict[str, bytes]:
    """Every tensor of an output, as the index (or the single file) lists it, by its bytes."""
    ckpt = open_checkpoint(folder)
    assert set(load_output(folder)) == set(ckpt.tensors)  # safetensors itself reads the same names
    return {name: ckpt.read_tensor_bytes(name) for name in ckpt.tensors}


def same_output(copied: Path, linked: Path) -> None:
    assert read_back(linked) == read_back(copied)
    assert {k: bits(v) for k, v in load_output(linked).items()} == {k: bits(v) for k, v in load_output(copied).items()}
    a, b = (json.loads((p / "config.json").read_text()) for p in (copied, linked))
    assert b[PROVENANCE_KEY].pop("weight_files")["new"] == NORM_SHARD
    assert a == b


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("vllm-eagle3", "vllm"),
        ("vllm-eagle3-sharded", "keep"),
        ("specforge-eagle3", "keep"),
        ("speculators-eagle3", "keep"),
        ("vllm-qwen3-eagle3", "vllm"),
    ],
)
def test_link_equals_the_copied_upgrade_tensor_for_tensor(
    name: str, layout: str, built_fixtures, tmp_path: Path
) -> None:
    src = built_fixtures(name)
    before = sha_tree(src)
    assert run("upgrade", src, "--out", tmp_path / "copy", "--layout", layout).exit_code == 0
    res = run("upgrade", src, "--out", tmp_path / "link", "--layout", layout, "--link")
    assert res.exit_code == 0, res.output
    same_output(tmp_path / "copy", tmp_path / "link")
    weights = sorted(p.name for p in (tmp_path / "link").glob("*.safetensors") if p.name != NORM_SHARD)
    if "reflinked" not in res.output:  # tmp on ext4, tmpfs, ...: hard links, and the CLI says what they imply
        assert "hard link:" in res.output and "share the inode with the input" in flat(res.output)
        assert all(os.path.samefile(tmp_path / "link" / w, src / w) for w in weights)
    assert (tmp_path / "link" / NORM_SHARD).stat().st_nlink == 1
    assert run("validate", tmp_path / "link").exit_code == 0
    assert sha_tree(src) == before


def test_dry_run_shows_what_the_real_run_links(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    res = run("upgrade", src, "--out", tmp_path / "out", "--link", "--dry-run")
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "out").exists()
    for text in (  # a table cell wraps between words at 100 columns: its parts, each whole
        "link to input",
        "model-00001-of-00002.safetensors",
        NORM_SHARD,
        "model.safetensors.index.json",
        "when every link works",
        "share the inode",
    ):
        assert text in flat(res.output), text
    plan = json.loads(run("upgrade", src, "--out", tmp_path / "out", "--link", "--dry-run", "--json").output)
    real = json.loads(run("upgrade", src, "--out", tmp_path / "out", "--link", "--json").output)
    assert plan["link"] == real["link"]
    assert set(real["result"]["files"]) == set(plan["link"]["output_files"])
    assert real["result"]["files"] == plan["link"]["output_files"]
    assert real["result"]["links"] == {f["filename"]: "hardlink" for f in plan["link"]["linked"]}


# nemo-eagle3 with --layout keep is refused with or without --link (tests/test_upgrade_refusals.py).
@pytest.mark.parametrize(("name", "args", "reason"), [
    ("specforge-eagle3", [], "use --layout keep --link: vLLM renames midlayer. to layers.0. itself"),
    ("nemo-eagle3", ["--aux-layer-ids", "2,4,5"], "it adds 'model.' itself"),
    ("safeailab-eagle3", ["--aux-layer-ids", "2,4,5"], "pytorch_model.bin is a PyTorch pickle"),
    ("vllm-eagle3-fp16-bin", [], "upgrade converts it to safetensors, so there is no file to link"),
])  # fmt: skip
def test_link_refuses_inputs_whose_names_vllm_would_not_read(
    name: str, args: list[str], reason: str, built_fixtures, tmp_path: Path
) -> None:
    res = run("upgrade", built_fixtures(name), "--out", tmp_path / "out", "--link", *args)
    assert res.exit_code == 1 and "cannot --link" in res.output and reason in flat(res.output), res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert run("upgrade", built_fixtures(name), "--out", tmp_path / "out", *args).exit_code == 0  # a copy still works


def test_copy_fallback_when_no_link_is_possible(built_fixtures, tmp_path: Path, monkeypatch) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    for method in ("reflink", "hardlink"):
        monkeypatch.setattr(links_mod, f"_try_{method}", lambda *a, m=method: "Invalid cross-device link")
    res = run("upgrade", src, "--out", tmp_path / "link", "--link", "--layout", "keep")
    assert res.exit_code == 0, res.output
    assert (
        "copied model-00001-of-00002.safetensors: no link was possible (reflink: Invalid cross-device link; "
        "hardlink: Invalid cross-device link)" in flat(res.output)
    )
    for w in (tmp_path / "link").glob("model-*.safetensors"):
        assert w.stat().st_nlink == 1 and not os.path.samefile(w, src / w.name)
    assert run("upgrade", src, "--out", tmp_path / "copy", "--layout", "keep").exit_code == 0
    same_output(tmp_path / "copy", tmp_path / "link")


def test_real_cross_device_link_falls_back_to_a_copy(built_fixtures, tmp_path: Path) -> None:
    """/dev/shm is another filesystem on Linux: FICLONE and link(2) both fail with EXDEV there."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm on another filesystem than the test's tmp dir")
    out = shm / f"eagle-link-test-{os.getpid()}"
    try:
        outcome = links_mod.link_or_copy(built_fixtures("vllm-eagle3") / "model.safetensors", out)
        assert (
            outcome.method == "copy"
            and "reflink:" in outcome.why
            and "hardlink: Invalid cross-device link" in outcome.why
        )
        assert out.read_bytes() == (built_fixtures("vllm-eagle3") / "model.safetensors").read_bytes()
    finally:
        out.unlink(missing_ok=True)


def test_verification_catches_a_link_that_holds_other_bytes(built_fixtures, tmp_path: Path, monkeypatch) -> None:
    src = built_fixtures("vllm-eagle3")
    ckpt = open_checkpoint(src)
    lp = plan_link(plan_upgrade(ckpt, describe(ckpt, default_release())))

    def bad_copy(s: Path, d: Path, **kw) -> links_mod.LinkOutcome:
        data = bytearray(Path(s).read_bytes())
        data[-1] ^= 0xFF  # one flipped bit pattern in the last tensor
        Path(d).write_bytes(bytes(data))
        return links_mod.LinkOutcome("copy", "test")

    monkeypatch.setattr("eagle_convert.upgrade.link.link_or_copy", bad_copy)
    with pytest.raises(VerificationError, match="model.safetensors: bytes differ from source at byte"):
        apply_link(lp, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_nothing_the_tool_does_later_writes_through_a_hard_link(built_fixtures, tmp_path: Path) -> None:
    """Hard links share the input's inode: verify, --force replacement (upgrade and finetune's atomic
    writer) and removal must leave the input's bytes alone."""
    from eagle_convert.io.atomic import atomic_output_dir
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.train import write_draft

    src = shutil.copytree(built_fixtures("vllm-eagle3-ht-embed"), tmp_path / "in")  # owns embed_tokens
    before = sha_tree(src)
    out = tmp_path / "out"
    assert run("upgrade", src, "--out", out, "--link").exit_code == 0
    assert os.path.samefile(out / "model.safetensors", src / "model.safetensors")
    assert run("validate", out, "--deep").exit_code == 0
    assert run("upgrade", src, "--out", out, "--link", "--force").exit_code == 0  # replaces a linked output
    assert run("upgrade", src, "--out", out, "--force").exit_code == 0  # a copy over a linked output
    assert run("upgrade", src, "--out", out, "--link", "--force").exit_code == 0
    drafter = load_drafter(out, default_release(), device="cpu")
    config = json.loads((out / "config.json").read_text())
    # what `finetune --force OUT` does (finetune/write.py write_finetuned)
    with atomic_output_dir(out, force=True) as tmp:
        write_draft(drafter, config, tmp, include_embed=True, dtype=torch.float32)
    assert not os.path.samefile(out / "model.safetensors", src / "model.safetensors")
    assert sha_tree(src) == before
    assert run("upgrade", src, "--out", tmp_path / "again", "--link").exit_code == 0
    shutil.rmtree(tmp_path / "again")
    assert sha_tree(src) == before


def _mount_xfs(image: Path, mnt: Path) -> str | None:
    """Mount a fresh reflink-capable XFS image at mnt; the reason why not, or None on success."""
    if os.geteuid() != 0:
        return "needs root to loop-mount an XFS image"
    if shutil.which("mkfs.xfs") is None:
        return "mkfs.xfs is not installed (apt-get install xfsprogs)"
    with open(image, "wb") as fh:
        fh.truncate(320 << 20)  # sparse; mkfs.xfs needs ~300 MiB
    steps = [["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], ["mount", "-o", "loop", str(image), str(mnt)]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            return f"{' '.join(cmd[:2])} failed: {p.stderr.strip()[-200:]}"
    return None


def test_reflink_on_a_reflink_capable_filesystem(built_fixtures, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    why = _mount_xfs(tmp_path / "xfs.img", mnt)
    if why:
        pytest.skip(f"no reflink-capable filesystem for this test: {why}")
    try:
        src = shutil.copytree(built_fixtures("vllm-eagle3-sharded"), mnt / "in")
        os.sync()  # FICLONE flushes the source's dirty pages first; start from a settled file
        before = sha_tree(src)
        res = run("upgrade", src, "--out", mnt / "link", "--link", "--layout", "keep", "--json")
        assert res.exit_code == 0, res.output
        result = json.loads(res.output)["result"]
        assert set(result["links"].values()) == {"reflink"} and result["verified"]
        linked = mnt / "link" / "model-00001-of-00002.safetensors"
        assert not os.path.samefile(linked, src / linked.name)  # its own inode ...
        ext = links_mod._extents(linked)
        assert ext and ext == links_mod._extents(src / linked.name)  # ... sharing the source's extents
        assert run("upgrade", src, "--out", mnt / "copy", "--layout", "keep").exit_code == 0
        same_output(mnt / "copy", mnt / "link")
        with open(linked, "r+b") as fh:  # copy-on-write: writing the reflink leaves the input alone
            fh.seek(-4, os.SEEK_END)
            fh.write(b"\xff\xff\xff\xff")
        assert sha_tree(src) == before
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_link_or_copy_raises_real_errors(tmp_path: Path) -> None:
    src = tmp_path / "a"
    src.write_bytes(b"x" * 100)
    (tmp_path / "b").write_bytes(b"")
    with pytest.raises(FileExistsError):
        links_mod.link_or_copy(src, tmp_path / "b")
    with pytest.raises(OSError) as exc:
        links_mod.link_or_copy(src, tmp_path / "missing-dir" / "c")
    assert exc.value.errno == errno.ENOENT


def test_plan_link_is_pure(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("specforge-eagle3")
    before = sha_tree(src)
    ckpt = open_checkpoint(src)
    with pytest.raises(UpgradeRefusedError, match="`layout=vllm` renames 10 tensors"):
        plan_link(plan_upgrade(ckpt, describe(ckpt, default_release())))
    lp = plan_link(plan_upgrade(ckpt, describe(ckpt, default_release()), layout="keep"))
    assert [f.filename for f in lp.linked] == ["model.safetensors"] and lp.shard.filename == NORM_SHARD
    assert json.loads(lp.index_json)["weight_map"]["fc_norm.0.weight"] == NORM_SHARD
    assert list(tmp_path.iterdir()) == [] and sha_tree(src) == before


@pytest.mark.vllm
def test_a_linked_output_loads_in_vllm_as_eagle31(tmp_path: Path) -> None:
    """The real loader reads the linked files, the new shard and the index: fc_norm is built and written."""
    from dataclasses import replace

    from eagle_convert.vllm.strict_load import check_with_vllm
    from eagle_convert.vllm_model.features import vllm_available
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    if not vllm_available():
        pytest.skip("vLLM is not installed")
    target = build_target(tmp_path / "target")
    src = build_draft(tmp_path / "draft", replace(VLLM_TINY, layout="specforge", storage="sharded"))
    ids = ",".join(str(i) for i in VLLM_TINY.resolved_aux_ids)
    res = run("upgrade", src, "--out", tmp_path / "linked", "--link", "--layout", "keep", "--aux-layer-ids", ids)
    assert res.exit_code == 0, res.output
    report = check_with_vllm(tmp_path / "linked", target, timeout_s=600)
    assert report.ok, (report.error, report.unwritten, report.problems)
    assert report.applied["fc_norm"] is True and report.unwritten == []
    assert {f"model.fc_norm.{i}.weight" for i in range(3)} <= set(report.loaded)
