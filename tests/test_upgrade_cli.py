"""`eagle-convert upgrade` on the command line: exact one-line errors, exit codes, dry run, safety."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.upgrade import apply as upgrade_mod
from fixtures.drafts import EXPECTED, FIXTURE_MATRIX

try:
    from tests.test_upgrade import sha_tree
except ImportError:  # tests/ itself on sys.path
    from test_upgrade import sha_tree

ALREADY_31 = sorted(n for n, e in EXPECTED.items() if e["variant"] in ("eagle31", "eagle31-fc-norm-only"))
NORM_BEFORE_FC = sorted(n for n, e in EXPECTED.items() if e["variant"] == "norm_before_fc")


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def copy_fixture(built_fixtures, name: str, dest: Path, **config_edits) -> Path:
    shutil.copytree(built_fixtures(name), dest)
    cfg = json.loads((dest / "config.json").read_text())
    for key, value in config_edits.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def test_upgrade_writes_and_reports(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3")
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert f"wrote {tmp_path / 'out'}: 3 files" in res.output and "verified byte-for-byte" in res.output
    assert "aux layer ids  [2, 4, 5] (from config eagle_aux_hidden_state_layer_ids)" in res.output


def test_dry_run_writes_nothing_and_prints_the_plan(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("specforge-eagle3")
    before = sha_tree(src)
    res = run("upgrade", src, "--out", tmp_path / "out", "--dry-run")
    assert res.exit_code == 0, res.output
    assert list(tmp_path.iterdir()) == [] and sha_tree(src) == before
    for text in (
        "renames (10)",
        "midlayer.self_attn.q_proj.weight",
        "layers.0.self_attn.q_proj.weight",
        "fc_norm.2.weight",
        "norm_before_residual",
        "model.safetensors",
        "dry run: nothing was written",
    ):
        assert text in res.output, text


def test_dry_run_json_is_the_plan_the_real_run_executes(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    dry = run("upgrade", src, "--out", tmp_path / "out", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)["plan"]
    real = run("upgrade", src, "--out", tmp_path / "out", "--json")
    assert real.exit_code == 0, real.output
    result = json.loads(real.output)
    assert result["plan"] == plan
    on_disk = {p.name: p.stat().st_size for p in (tmp_path / "out").iterdir()}
    assert on_disk == plan["output_files"] == result["result"]["files"]
    assert json.loads((tmp_path / "out/config.json").read_text()) == plan["config_after"]
    assert plan["config_diff"]["changed"]["fc_norm"] == {"a": False, "b": True}


@pytest.mark.parametrize("name", ALREADY_31)
def test_already_31_is_refused(name: str, built_fixtures, tmp_path: Path) -> None:
    res = run("upgrade", built_fixtures(name), "--out", tmp_path / "out")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {built_fixtures(name)}: already EAGLE-3.1: ")
    assert res.output.endswith(" (nothing to upgrade)\n") and res.output.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_already_31_message(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("legacy-aux-norm-eagle31")
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.output == (
        f"Error: {src}: already EAGLE-3.1: fc_norm is true (use_aux_norm); norm_output is true "
        "(norm_output); has 3 fc_norm.i tensors (nothing to upgrade)\n"
    )


@pytest.mark.parametrize("name", NORM_BEFORE_FC)
def test_norm_before_fc_is_refused(name: str, built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures(name)
    res = run("upgrade", src, "--out", tmp_path / "out")
    where = {
        "modelopt": "eagle_config.norm_before_fc",
        "speculators": "norm_before_fc, transformer_layer_config.norm_before_fc",
    }.get(EXPECTED[name]["layout"], "norm_before_fc")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {src}: is a norm_before_fc draft (input_norm.weight; norm_before_fc set in "
        f"{where}): adding fc_norm would normalise the aux states twice "
        "(only plain EAGLE-3 drafts upgrade)\n"
    )


@pytest.mark.parametrize(
    ("edits", "what"),
    [
        ({"fc_norm": True}, "fc_norm is true (fc_norm) but there is no fc_norm.0.weight"),
        (
            {"num_aux_hidden_states": 4},
            "num_aux_hidden_states is 4 but fc.weight width 192 / target_hidden_size 64 gives A=3",
        ),
        (
            {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4], "eagle_config": None},
            "config eagle_aux_hidden_state_layer_ids lists 4 aux layer ids but fc.weight takes A=3",
        ),
    ],
)
def test_flags_and_tensors_that_disagree_are_refused(edits, what, built_fixtures, tmp_path: Path) -> None:
    src = copy_fixture(built_fixtures, "vllm-eagle3", tmp_path / "in", **edits)
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.exit_code == 1
    hint = (
        "pass --aux-layer-ids with the ids the draft was trained on"
        if "lists" in what
        else "fix config.json or the weights first; see eagle-convert inspect"
    )
    assert res.output == f"Error: {src}: flags and tensors disagree: {what} ({hint})\n"


def test_norm_tensor_without_its_flag_is_refused(built_fixtures, tmp_path: Path) -> None:
    src = copy_fixture(built_fixtures, "vllm-eagle31", tmp_path / "in", fc_norm=False, norm_output=False)
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.output == (
        f"Error: {src}: flags and tensors disagree: fc_norm.0.weight exists but fc_norm is false "
        "(fc_norm) (fix config.json or the weights first; see eagle-convert inspect)\n"
    )


def test_draft_without_aux_states_is_refused(built_fixtures, tmp_path: Path) -> None:
    src = copy_fixture(built_fixtures, "vllm-eagle3", tmp_path / "in", eagle_config={"use_aux_hidden_state": False})
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {src}: eagle_config.use_aux_hidden_state is false: the draft fuses no aux hidden "
        "states, so there is nothing for fc_norm to normalise\n"
    )


def test_missing_aux_ids_is_a_usage_error_naming_the_fix(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("safeailab-eagle3")
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.exit_code == 2
    assert res.output == (
        f"Error: {src}: config.json has no aux layer ids (pass --aux-layer-ids (e.g. 2,16,29) or "
        "--target TARGET to use vLLM's default (2, N//2, N-3))\n"
    )


def test_target_gives_vllms_default_ids_and_says_so(built_fixtures, tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target/config.json").write_text(json.dumps({"num_hidden_layers": 32, "hidden_size": 64}))
    res = run("upgrade", built_fixtures("nemo-eagle3"), "--out", tmp_path / "out", "--target", tmp_path / "target")
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())  # piped at 100 columns, a long line wraps
    assert f"[2, 16, 29] (from vLLM's default (2, N//2, N-3) for --target {tmp_path / 'target'} (N=32))" in said
    cfg = json.loads((tmp_path / "out/config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]  # NeMo's LlamaEagle3DraftModel is not registered
    assert cfg["_eagle_convert"]["aux_layer_ids_from"].startswith("vLLM's default")


def test_colliding_default_ids_are_never_written(built_fixtures, tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target/config.json").write_text(json.dumps({"num_hidden_layers": 4}))
    src = built_fixtures("nemo-eagle3")
    res = run("upgrade", src, "--out", tmp_path / "out", "--target", tmp_path / "target")
    assert res.exit_code == 2 and not (tmp_path / "out").exists()
    assert "aux layer ids [2, 2, 1]" in res.output and "collide" in res.output


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ("1,2", "Error: --aux-layer-ids gives 2 ids but the draft has A=3 (pass 3 ids)\n"),
        ("1,1,2", "aux layer ids [1, 1, 2] (--aux-layer-ids) collide or are negative"),
        ("a,b", "Invalid value for '--aux-layer-ids': 'a,b' is not a comma-separated list of integers"),
    ],
)
def test_bad_aux_layer_ids_are_usage_errors(ids: str, message: str, built_fixtures, tmp_path: Path) -> None:
    res = run("upgrade", built_fixtures("safeailab-eagle3"), "--out", tmp_path / "out", "--aux-layer-ids", ids)
    assert res.exit_code == 2 and message in res.output


def test_speculators_layout_needs_a_verifier(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3")
    res = run("upgrade", src, "--out", tmp_path / "out", "--layout", "speculators")
    assert res.exit_code == 2
    assert res.output == (
        f"Error: --layout speculators needs --target for {src} "
        "(it is written as speculators_config.verifier.name_or_path)\n"
    )


def test_existing_output_is_refused_unless_force(built_fixtures, tmp_path: Path) -> None:
    src, out = built_fixtures("vllm-eagle3"), tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    res = run("upgrade", src, "--out", out)
    assert res.exit_code == 1
    assert res.output == f"Error: {out}: output already exists (pass --force to replace it)\n"
    assert (out / "keep.txt").read_text() == "old"
    res = run("upgrade", src, "--out", out, "--force")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]


def test_output_equal_to_inside_or_around_the_input_is_refused(built_fixtures, tmp_path: Path) -> None:
    src = copy_fixture(built_fixtures, "vllm-eagle3", tmp_path / "in")
    before = sha_tree(src)
    for out in (src, src / "sub", tmp_path):
        res = run("upgrade", src, "--out", out, "--force")
        assert res.exit_code == 1
        what = "contains the input checkpoint" if out == tmp_path else "is the input checkpoint"
        assert res.output.startswith(f"Error: {out}: output {what} {src.resolve()}"), res.output
    assert sha_tree(src) == before and sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    single = src / "model.safetensors"  # a single-file input: its folder is the input too
    assert run("upgrade", single, "--out", src).exit_code == 1


def test_failed_verification_leaves_nothing(built_fixtures, tmp_path: Path, monkeypatch) -> None:
    """A copy that writes one wrong byte (as a kernel copy bug would) is caught, whether the tensor is
    compared while the file is written (io.trailing) or after; nothing is published."""
    real = os.copy_file_range
    src = built_fixtures("vllm-eagle3")
    end = (src / "model.safetensors").stat().st_size

    def corrupting(src_fd: int, dst_fd: int, count: int, offset_src: int | None = None, *a, **kw) -> int:
        n = real(src_fd, dst_fd, count, offset_src, *a, **kw)
        if offset_src is not None and offset_src + n == end:  # the copy of the last tensor: flip its last byte
            pos = os.lseek(dst_fd, 0, os.SEEK_CUR) - 1
            last = os.pread(src_fd, 1, offset_src + n - 1)
            os.pwrite(dst_fd, bytes([last[0] ^ 0xFF]), pos)
        return n

    monkeypatch.setattr(os, "copy_file_range", corrupting)
    res = run("upgrade", src, "--out", tmp_path / "out")
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {src}: upgraded output failed verification: model.safetensors: t2d: bytes differ "
        "from source at tensor byte 255 (nothing was written; report this as a bug)\n"
    )
    assert list(tmp_path.iterdir()) == []
    assert run("upgrade", src, "--out", tmp_path / "out", "--no-verify").exit_code == 0  # --no-verify skips the check
    assert (tmp_path / "out" / "model.safetensors").read_bytes()[-1] != (src / "model.safetensors").read_bytes()[-1]


def test_write_error_leaves_nothing(built_fixtures, tmp_path: Path, monkeypatch) -> None:
    def full_disk(out_dir, f, **kw):
        (Path(out_dir) / f.filename).write_bytes(b"partial")
        raise OSError(28, "No space left on device", str(Path(out_dir) / f.filename))

    monkeypatch.setattr(upgrade_mod, "write_file", full_disk)
    res = run("upgrade", built_fixtures("vllm-eagle3"), "--out", tmp_path / "out")
    assert res.exit_code == 1
    assert "cannot write the output (No space left on device) (check free space and permissions)" in res.output
    assert list(tmp_path.iterdir()) == []


def test_every_fixture_is_either_upgraded_or_refused_with_one_line(built_fixtures, tmp_path: Path) -> None:
    for name, spec in FIXTURE_MATRIX.items():
        args = ["--aux-layer-ids", ",".join(map(str, spec.resolved_aux_ids))] if not EXPECTED[name]["aux_ids"] else []
        res = run("upgrade", built_fixtures(name), "--out", tmp_path / name, "--dry-run", *args)
        ok = EXPECTED[name]["variant"] == "eagle3"
        assert res.exit_code == (0 if ok else 1), (name, res.output)
        if not ok:
            assert res.output.count("\n") == 1 and res.output.startswith("Error: ")
