"""`io.atomic.check_output_dir`: the one output-folder check of upgrade and finetune (exact messages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_convert.errors import OutputError
from eagle_convert.io.atomic import check_output_dir

OUTSIDE = "(choose an output folder outside the input)"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


@pytest.mark.parametrize("where", ["itself", "inside", "around"])
def test_output_overlapping_an_input_is_refused_even_with_force(src: Path, where: str) -> None:
    out = {"itself": src, "inside": src / "sub", "around": src.parent}[where]
    with pytest.raises(OutputError) as exc:
        check_output_dir(out, {"input draft": src, "target": None}, force=True)
    what = "contains the input draft" if where == "around" else "is the input draft"
    tail = OUTSIDE if where == "around" else f"or inside it {OUTSIDE}"
    assert str(exc.value) == f"{out}: output {what} {src.resolve()} {tail}"


def test_every_input_is_checked(src: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(OutputError, match=f"output is the target {target} or inside it"):
        check_output_dir(target / "out", {"input draft": src, "target": target})


def test_a_file_is_not_a_folder_with_or_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    for force in (False, True):
        with pytest.raises(OutputError) as exc:
            check_output_dir(out, {}, force=force)
        assert str(exc.value) == f"{out}: exists and is not a folder (choose another output path)"


def test_existing_output_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert check_output_dir(out, {}) == out  # an empty folder is no output yet
    (out / "keep.txt").write_text("old")
    with pytest.raises(OutputError) as exc:
        check_output_dir(out, {})
    # The library names its keyword; the command line (cli/errors.py) the flag.
    assert str(exc.value) == f"{out}: output already exists (pass `force` to replace it)"
    assert isinstance(exc.value, FileExistsError) and exc.value.file == str(out) and exc.value.options == ("force",)
    assert check_output_dir(out, {}, force=True) == out


def test_dangling_symlink_counts_as_existing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "missing")
    with pytest.raises(OutputError, match="output already exists"):
        check_output_dir(out, {})
    assert check_output_dir(out, {}, force=True) == out


def test_relative_and_user_paths_come_back_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_output_dir("new", {}) == tmp_path / "new"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check_output_dir("~/other", {}) == tmp_path / "other"


def test_an_output_name_too_long_for_its_temp_sibling_is_refused(src: Path, tmp_path: Path) -> None:
    ok, long = tmp_path / ("a" * 233), tmp_path / ("a" * 234)  # 255 - 22: ".{name}.tmp-{pid}-{8 hex}"
    assert check_output_dir(ok, {"input draft": src}) == ok
    for out in (long, tmp_path / ("b" * 300)):
        with pytest.raises(OutputError) as exc:
            check_output_dir(out, {"input draft": src})
        assert str(exc.value) == (
            f"{out}: the output name is {len(out.name)} bytes long; at most 233 fit here (the filesystem's "
            "limit is 255, and the hidden temp folder beside it adds 22) (choose a shorter output name)"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
