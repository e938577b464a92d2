"""`upgrade org/name OUT` against a local HF-compatible server: only the needed files are downloaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint

try:
    from tests.hubserver import hub_server
    from tests.test_upgrade import load_output
except ImportError:  # tests/ itself on sys.path
    from hubserver import hub_server
    from test_upgrade import load_output

REPO = "org/eagle3-draft"


@pytest.fixture
def hub(built_fixtures, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_env):
    """A sharded EAGLE-3 draft with files upgrade must not fetch, served on 127.0.0.1; online, fresh cache."""
    repo = tmp_path / "repo"
    shutil.copytree(built_fixtures("vllm-eagle3-sharded"), repo)
    (repo / "README.md").write_text("# a draft\n")
    (repo / "optimizer.pt").write_bytes(b"\0" * (1 << 20))  # training leftovers: never downloaded
    with hub_server({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server, repo


def test_hub_upgrade_downloads_only_what_it_needs(hub, tmp_path: Path) -> None:
    server, repo = hub
    res = CliRunner().invoke(main, ["upgrade", REPO, "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert server.served(REPO, "README.md") == 0 and server.served(REPO, "optimizer.pt") == 0
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        assert server.served(REPO, shard) > 0
    assert "not carried over: README.md, optimizer.pt" in res.output
    got = load_output(tmp_path / "out")
    assert {f"fc_norm.{i}.weight" for i in range(3)} <= set(got)
    cfg = json.loads((tmp_path / "out/config.json").read_text())
    assert cfg["fc_norm"] is True and cfg["_eagle_convert"]["source"] == REPO
    assert len(cfg["_eagle_convert"]["source_revision"]) == 40  # the commit the revision resolved to


def test_hub_dry_run_downloads_no_weights(hub, tmp_path: Path) -> None:
    server, repo = hub
    res = CliRunner().invoke(main, ["upgrade", REPO, "--out", str(tmp_path / "out"), "--dry-run"])
    assert res.exit_code == 0, res.output
    # Headers only, and the small d2t/t2d vocab maps that validate reads (the refusal check): no weights.
    maps = {n: t for n, t in open_checkpoint(repo).tensors.items() if n in ("d2t", "t2d")}
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        header = (repo / shard).read_bytes()[:8]
        vocab = sum(t.nbytes for t in maps.values() if t.file == shard)
        assert server.served(REPO, shard) <= 8 + int.from_bytes(header, "little") + vocab
    assert not (tmp_path / "out").exists()
