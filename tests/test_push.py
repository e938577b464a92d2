"""`eagle-convert push`: a draft folder to the loopback hub (tests/hubserver.py + hubwrite.py) through
huggingface_hub's real client; the files read back identical (the model card's serve command names
the repo), branches, pull requests, private repos, and refusals before anything is sent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubserver import hub_server

from eagle_convert.cli.app import main
from eagle_convert.draft.card import retarget_card
from eagle_convert.draft.card_serve import serve_command
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.draft.target import Target
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

REPO = "me/eagle31-draft"
TARGET = "meta-llama/Llama-3.1-8B-Instruct"


def _cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(autouse=True)
def _isolated(hf_env, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the loopback hub speaks the LFS protocol


@pytest.fixture
def draft(built_fixtures, tmp_path: Path) -> Path:
    """An upgraded draft with its model card, as `upgrade` leaves it."""
    out = tmp_path / "eagle31"
    ckpt = open_checkpoint(built_fixtures("vllm-eagle3"))
    target = Target.from_config({"num_hidden_layers": 8}, TARGET)
    apply_upgrade(plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False), target=target, out=out), out)
    return out


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch):
    with hub_server({}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def _read_back(repo: str, revision: str, names: list[str], tmp_path: Path) -> dict[str, bytes]:
    from huggingface_hub import HfApi, hf_hub_download

    from eagle_convert.io.hub_env import endpoint

    listed = sorted(HfApi(endpoint=endpoint()).list_repo_files(repo, revision=revision))
    assert listed == sorted(names)
    return {
        n: Path(
            hf_hub_download(repo, n, revision=revision, endpoint=endpoint(), cache_dir=tmp_path / "readback")
        ).read_bytes()
        for n in names
    }


def test_push_uploads_and_the_files_read_back_identical(draft: Path, hub, tmp_path: Path) -> None:
    local = {p.name: p.read_bytes() for p in draft.iterdir()}
    assert sorted(local) == ["README.md", "config.json", "model.safetensors"]
    res = _cli("push", draft, REPO, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    check_schema(out, "push-report.schema.json")
    assert out["repo_id"] == REPO and out["revision"] == "main" and out["pr_url"] is None
    sent = {**local, "README.md": retarget_card(local["README.md"].decode(), REPO).encode()}
    assert out["card_retargeted"] and out["files"] == {n: len(b) for n, b in sent.items()}
    back = _read_back(REPO, "main", sorted(local), tmp_path)
    assert back["model.safetensors"] == local["model.safetensors"]  # sent through the LFS batch API
    assert back["config.json"] == local["config.json"]
    card = local["README.md"].decode()
    assert back["README.md"].decode() == retarget_card(card, REPO)
    assert serve_command(TARGET, REPO) in back["README.md"].decode()
    assert serve_command(TARGET, str(draft)) in card  # the local folder's card is not changed
    assert hub.commits == [(REPO, "main", f"Upload {draft.name} with eagle-convert")]
    from huggingface_hub import ModelCard

    pushed = ModelCard(back["README.md"].decode())  # the metadata of the card the hub serves parses
    assert pushed.data.base_model == TARGET and "eagle3" in pushed.data.tags
    # Pushing again to the existing repo is a second commit, not an error.
    assert _cli("push", draft, REPO, "--message", "again").exit_code == 0
    assert hub.commits[-1] == (REPO, "main", "again")


def test_revision_creates_the_branch(draft: Path, hub, tmp_path: Path) -> None:
    res = _cli("push", draft, REPO, "--revision", "v2")
    assert res.exit_code == 0, res.output
    assert f"→ {REPO}@v2" in " ".join(res.output.split())  # piped at 100 columns, the line wraps
    back = _read_back(REPO, "v2", ["README.md", "config.json", "model.safetensors"], tmp_path)
    assert back["model.safetensors"] == (draft / "model.safetensors").read_bytes()
    _read_back(REPO, "main", [], tmp_path)  # main stays as create_repo left it


def test_create_pr_leaves_main_alone(draft: Path, hub, tmp_path: Path) -> None:
    assert _cli("push", draft, REPO).exit_code == 0
    (draft / "notes.txt").write_text("v2\n")
    res = _cli("push", draft, REPO, "--create-pr", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["pr_url"] == f"{hub.endpoint}/{REPO}/discussions/1"
    assert (
        _read_back(REPO, "refs/pr/1", ["README.md", "config.json", "model.safetensors", "notes.txt"], tmp_path)[
            "notes.txt"
        ]
        == b"v2\n"
    )
    _read_back(REPO, "main", ["README.md", "config.json", "model.safetensors"], tmp_path)


def test_private_repo_needs_the_token(draft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with hub_server({}, token="hf_write") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        res = _cli("push", draft, REPO, "--private")
        assert res.exit_code == 1
        assert res.stderr == (
            f"Error: {REPO}: the hub refused the upload (HTTP 401) (push needs a token with write "
            "access to the namespace: set HF_TOKEN or run `hf auth login`)\n"
        )
        monkeypatch.setenv("HF_TOKEN", "hf_write")
        assert _cli("push", draft, REPO, "--private").exit_code == 0
        assert REPO in server.private
        monkeypatch.delenv("HF_TOKEN")
        from huggingface_hub import HfApi
        from huggingface_hub.errors import RepositoryNotFoundError

        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=server.endpoint, token=False).list_repo_files(REPO)


def test_a_draft_that_fails_validation_is_refused_unless_forced(draft: Path, hub, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(draft, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["fc_norm"] = False  # fc_norm.* tensors without the flag: vLLM raises at load (E104)
    (bad / "config.json").write_text(json.dumps(cfg))
    res = _cli("push", bad, REPO)
    assert res.exit_code == 1
    assert res.stderr.startswith(f"Error: {bad}: fails validation with 1 error (E104: ")
    assert res.stderr.endswith(
        f"; nothing was uploaded (see eagle-convert validate {bad}, or pass --allow-invalid to push it anyway)\n"
    )
    assert hub.requests == []  # refused before any request
    res = _cli("push", bad, REPO, "--allow-invalid")
    assert res.exit_code == 0, res.output
    assert "pushed despite validation errors E104 (--allow-invalid)" in res.output
    assert len(hub.commits) == 1


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["not-a-repo"], 2, "Error: 'not-a-repo' is not a hub repo id (use org/name (or user/name))\n"),
    ],
)
def test_usage(draft: Path, hub, args: list[str], code: int, message: str) -> None:
    res = _cli("push", draft, *args)
    assert res.exit_code == code and res.stderr == message


def test_offline_and_missing_folder(draft: Path, hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = _cli("push", tmp_path / "nope", REPO)
    assert res.exit_code == 1
    assert res.stderr == f"Error: {tmp_path / 'nope'}: no such folder (push uploads a local draft folder)\n"
    assert (
        _cli("push", tmp_path, REPO).stderr
        == f"Error: {tmp_path}: no config.json (push uploads a local draft folder)\n"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = _cli("push", draft, REPO)
    assert res.exit_code == 1 and res.stderr.startswith(f"Error: {REPO}: cannot push, offline mode is on")
    assert hub.requests == []


# -- push --dry-run and offline messages (issue 21 item 5) ----------------------------------------


def test_dry_run_shows_what_push_sends_and_sends_nothing(draft: Path, hub, tmp_path: Path) -> None:
    from eagle_convert.cli.render.inspect import human_bytes

    res = _cli("push", draft, REPO, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    planned = json.loads(res.stdout)
    check_schema(planned, "push-report.schema.json")
    assert hub.requests == []  # not even create_repo
    assert planned["dry_run"] and planned["would_push"] and planned["validation_errors"] == []
    text = _cli("push", draft, REPO, "--dry-run", "--message", "first upload")
    assert text.exit_code == 0, text.output
    assert hub.requests == []
    total = planned["total_bytes"]
    assert text.stdout.splitlines() == [
        f"dry run: nothing is sent to {hub.endpoint}",
        f"repo     {REPO} (commit to main; created when missing)",
        "message  first upload",
        f"files    3, {human_bytes(total)} ({total:,} bytes)",
        f"  README.md          {human_bytes(planned['files']['README.md']):>10}  (its vllm serve command loads {REPO})",
        f"  config.json        {human_bytes(planned['files']['config.json']):>10}",
        f"  model.safetensors  {human_bytes(planned['files']['model.safetensors']):>10}",
        "validate passes (0 errors, 1 warning)",  # W604: an identity upgrade's fc_norm is untrained
    ]
    # What the dry run listed is what the push then sends, file for file and byte for byte.
    pushed = json.loads(_cli("push", draft, REPO, "--json").stdout)
    assert pushed["files"] == planned["files"] and pushed["total_bytes"] == total
    assert hub.commits == [(REPO, "main", planned["commit_message"])]
    assert planned["commit_message"] == f"Upload {draft.name} with eagle-convert"


def test_dry_run_gives_the_verdict_of_a_failing_draft(draft: Path, hub, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(draft, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["fc_norm"] = False  # E104, as in test_a_draft_that_fails_validation_is_refused_unless_forced
    (bad / "config.json").write_text(json.dumps(cfg))
    res = _cli("push", bad, REPO, "--dry-run", "--create-pr", "--revision", "v2", "--private")
    assert res.exit_code == 1  # the push would be refused
    lines = res.stdout.splitlines()
    assert lines[1] == f"repo     {REPO} (pull request against v2; created private when missing)"
    verdict = " ".join(res.stdout.split("\nvalidate ", 1)[1].split())  # rich wraps it at the console's width
    assert verdict.startswith("fails (1 error: E104, 0 warnings); push would refuse it: E104: ")
    assert verdict.endswith(f"(see eagle-convert validate {bad}, or pass --allow-invalid)")
    assert res.stderr == ""
    forced = _cli("push", bad, REPO, "--dry-run", "--allow-invalid", "--json")
    assert forced.exit_code == 0
    assert json.loads(forced.stdout)["validation_errors"] == ["E104"] and json.loads(forced.stdout)["would_push"]
    assert hub.requests == []


def test_dry_run_works_offline_and_push_says_how_to_go_online(
    draft: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _cli("push", draft, REPO, "--dry-run").exit_code == 0
    res = _cli("push", draft, REPO)
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {REPO}: cannot push, offline mode is on (HF_HUB_OFFLINE) "
        "(unset HF_HUB_OFFLINE to upload; --dry-run shows what would be sent)\n"
    )
    monkeypatch.delenv("HF_HUB_OFFLINE")
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    res = _cli("push", draft, REPO)
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {REPO}: cannot reach the hub at http://127.0.0.1:{port} (ConnectError) "
        "(check the network connection and HF_ENDPOINT; --dry-run shows what would be sent)\n"
    )
    assert "download" not in res.stderr


# -- issue 33: swapped arguments, and the card of a plain draft -------------------------------------


def test_swapped_arguments_name_the_order(draft: Path, hub, monkeypatch: pytest.MonkeyPatch) -> None:
    res = _cli("push", REPO, draft)
    assert res.exit_code == 2
    assert res.stderr == (
        f"Error: push takes FOLDER ORG/NAME, in that order: {REPO!r} is no local folder but looks like a repo id "
        f"and {str(draft)!r} is a local folder (eagle-convert push {draft} {REPO})\n"
    )
    monkeypatch.chdir(draft.parent)  # a folder named like a repo id is still a folder
    (draft.parent / "me").mkdir()
    shutil.copytree(draft, draft.parent / REPO)
    res = _cli("push", REPO, "other/repo", "--dry-run")
    assert res.exit_code == 0, res.output
    assert hub.requests == []


def test_a_plain_draft_gets_a_generated_card_for_the_repo(built_fixtures, hub, tmp_path: Path) -> None:
    """A draft folder without README.md (as a producer writes it) is sent with the card `upgrade` would
    have written, its `vllm serve` loading the repo; the folder itself is left as it was."""
    plain = shutil.copytree(built_fixtures("vllm-eagle3"), tmp_path / "plain")
    assert not (plain / "README.md").exists()
    res = _cli("push", plain, REPO, "--dry-run", "--json")
    planned = json.loads(res.stdout)
    check_schema(planned, "push-report.schema.json")
    assert planned["card_generated"] is True and "README.md" in planned["files"]
    res = _cli("push", plain, REPO, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["card_generated"] is True
    back = _read_back(REPO, "main", ["README.md", "config.json", "model.safetensors"], tmp_path)
    card = back["README.md"].decode()
    assert "vllm serve" in card and REPO in card
    assert "Compatibility" in card or "vLLM" in card
    assert not (plain / "README.md").exists()
    own = tmp_path / "own"  # a README.md of the user's own is sent as it is
    shutil.copytree(plain, own)
    (own / "README.md").write_text("# my notes\n")
    planned = json.loads(_cli("push", own, REPO, "--dry-run", "--json").stdout)
    assert planned["card_generated"] is False and planned["files"]["README.md"] == len("# my notes\n")
