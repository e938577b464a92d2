"""`validate org/name` against a local HF-compatible server: config, headers and d2t/t2d bytes only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.cli.app import main

try:
    from tests.hubserver import hub_server
except ImportError:  # tests/ itself on sys.path
    from hubserver import hub_server

DRAFT, TARGET = "org/eagle3-draft", "org/target"


@pytest.fixture
def hub(built_fixtures, tmp_path: Path, hf_env, monkeypatch: pytest.MonkeyPatch):
    draft = tmp_path / "draft"
    shutil.copytree(built_fixtures("vllm-eagle3-sharded"), draft)
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"hidden_size": 64, "vocab_size": 256, "num_hidden_layers": 8,
                                                    "max_position_embeddings": 2048, "rope_theta": 10000.0}))
    (target / "model.safetensors").write_bytes(b"\0" * (1 << 20))  # never fetched: --target reads config.json
    with hub_server({DRAFT: draft, TARGET: target}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server, draft


def test_hub_validate_reads_headers_and_vocab_maps_only(hub) -> None:
    server, draft = hub
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", TARGET, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["findings"] == [] and "target" in data["checks"]
    local = open_checkpoint(draft)
    for shard in local.weight_files:
        header = int.from_bytes((draft / shard).read_bytes()[:8], "little")
        vocab = sum(t.nbytes for t in local.tensors.values() if t.file == shard and t.name in ("d2t", "t2d"))
        assert 0 < server.served(DRAFT, shard) <= 8 + header + vocab
    assert server.served(TARGET, "model.safetensors") == 0


def test_hub_engine_check_needs_local_folders(hub) -> None:
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", TARGET, "--engine", "vllm"])
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: --engine vllm needs a local draft folder and a local target folder")
