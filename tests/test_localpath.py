"""A reference that can only be a local path is read as one: missing paths say so, with a suggestion.

Only a valid hub repo id (huggingface_hub's `validate_repo_id`, as `org/name`) goes to the hub; the
CLI tests run offline (conftest), so a reference sent to the hub would fail with the offline message.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import CheckpointRef
from eagle_convert.errors import CheckpointNotFoundError
from eagle_convert.io.localpath import did_you_mean, looks_like_path, missing_path_error, one_edit_apart


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding `up/specforge_bf16/` and `org/`."""
    (tmp_path / "up" / "specforge_bf16").mkdir(parents=True)
    (tmp_path / "org").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("specforg_bf16", "specforge_bf16", True),  # insertion
        ("specforge_bf16", "specforg_bf16", True),  # deletion
        ("specforge_bf17", "specforge_bf16", True),  # replacement
        ("sepcforge", "specforge", True),  # neighbours swapped
        ("specforge", "specforge", False),  # same name: not a suggestion
        ("spcforg", "specforge", False),  # two edits
        ("abc", "cba", False),  # a swap of non-neighbours is two edits
        ("", "a", True),
    ],
)
def test_one_edit_apart(a: str, b: str, expected: bool) -> None:
    assert one_edit_apart(a, b) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("./draft", True),
        ("../draft", True),
        ("a/../b", True),
        ("/abs/draft", True),
        ("~/draft", True),
        ("up\\draft", True),
        ("up/specforg_bf16", True),  # the parent folder exists
        ("up/specforg_bf16/model.safetensors", True),  # the first component exists
        ("org/name", True),  # org/ is a local folder here
        ("meta-llama/Llama-3.1-8B", False),  # no local meta-llama/: a repo id
        ("draft", False),  # no separator: not decided here
        ("", False),
    ],
)
def test_looks_like_path(here: Path, text: str, expected: bool) -> None:
    assert looks_like_path(text) is expected


def test_parse_sends_only_repo_ids_to_the_hub(here: Path) -> None:
    assert CheckpointRef.parse("up/specforg_bf16").local == Path("up/specforg_bf16")
    assert CheckpointRef.parse("org/name").local == Path("org/name")
    assert CheckpointRef.parse("a/b/c").local == Path("a/b/c")  # not a repo id
    assert CheckpointRef.parse("org/na me").local == Path("org/na me")
    hub = CheckpointRef.parse("meta-llama/Llama-3.1-8B@main")
    assert (hub.repo, hub.revision, hub.local) == ("meta-llama/Llama-3.1-8B", "main", None)
    assert CheckpointRef.parse("hf://org/name").repo == "org/name"  # hf:// wins over the local org/


def test_did_you_mean(here: Path) -> None:
    assert did_you_mean(Path("up/specforg_bf16")) == Path("up/specforge_bf16")
    assert did_you_mean(Path("uo/specforge_bf16")) == Path("up/specforge_bf16")  # first missing component
    assert did_you_mean(here / "up" / "specforge_bf61") == here / "up" / "specforge_bf16"
    assert did_you_mean(Path("up/other")) is None
    assert did_you_mean(Path("uo/other")) is None  # up/other does not exist either
    (here / "up" / "specforge_bf15").mkdir()
    assert did_you_mean(Path("up/specforge_bf1")) is None  # two candidates: no guess


def test_missing_path_error_messages(here: Path) -> None:
    err = missing_path_error(Path("up/specforg_bf16"))
    assert isinstance(err, CheckpointNotFoundError)
    assert str(err) == "up/specforg_bf16: no such file or folder (did you mean up/specforge_bf16?)"
    assert str(missing_path_error(Path("org/name"))) == (
        "org/name: no such file or folder (check the path, or write hf://org/name for the hub repo)"
    )
    assert str(missing_path_error(Path("a/b/c"))) == (
        "a/b/c: no such file or folder (check the path or pass a hub repo id as org/name)"
    )


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_mistyped_relative_path(here: Path, built_fixtures) -> None:
    shutil.copytree(built_fixtures("specforge-eagle3"), here / "up" / "specforge_bf16", dirs_exist_ok=True)
    assert run("inspect", "up/specforge_bf16")[0] == 0
    assert run("inspect", "up/specforg_bf16") == (
        1,
        "",
        "Error: up/specforg_bf16: no such file or folder (did you mean up/specforge_bf16?)\n",
    )
    code, _, err = run("validate", "./up/specforge_bf61")
    assert (code, err) == (1, "Error: up/specforge_bf61: no such file or folder (did you mean up/specforge_bf16?)\n")


def test_cli_local_first_component_and_repo_ids(here: Path) -> None:
    assert run("inspect", "org/name") == (
        1,
        "",
        "Error: org/name: no such file or folder (check the path, or write hf://org/name for the hub repo)\n",
    )
    assert run("inspect", "a/b/c") == (
        1,
        "",
        "Error: a/b/c: no such file or folder (check the path or pass a hub repo id as org/name)\n",
    )
    code, _, err = run("inspect", "someone/draft")  # a repo id: the hub (offline in tests)
    assert code == 1
    assert err.startswith("Error: someone/draft: not in the local cache and offline mode is on")
    # neither a folder nor a cached repo: both are said (issue 33: only the cache was)
    assert "; there is no local folder someone/draft either (" in err
    code, _, err = run("inspect", "hf://someone/draft")  # explicitly the hub: no folder was tried
    assert code == 1 and "local folder" not in err


def test_commands_that_need_a_local_folder_suggest_the_sibling(here: Path, built_fixtures) -> None:
    shutil.copytree(built_fixtures("vllm-eagle3"), here / "up" / "specforge_bf16", dirs_exist_ok=True)
    (here / "target").mkdir()
    (here / "target" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}')
    guess = "(did you mean up/specforge_bf16?)"
    assert run("smoke", "up/specforg_bf16", "--target", "target", "--engine", "reference")[2] == (
        f"Error: draft up/specforg_bf16: no such folder {guess}\n"
    )
    assert run("finetune", "up/specforg_bf16", "--target", "target", "--out", "o")[2] == (
        f"Error: draft up/specforg_bf16: no such folder {guess}\n"
    )
    assert run("report", "up/specforg_bf16", "--target", "target", "--out", "r")[2] == (
        f"Error: draft up/specforg_bf16: no such folder {guess}\n"
    )
    assert run("push", "up/specforg_bf16", "me/draft", "--dry-run") == (
        1,
        "",
        f"Error: up/specforg_bf16: no such folder {guess}\n",
    )
    assert run("smoke", "up/specforge_bf16", "--target", "targte", "--engine", "reference")[2] == (
        "Error: target targte: no such folder (did you mean target?)\n"
    )
