"""`validate org/name` against a local HF-compatible server: config, headers and d2t/t2d bytes only;
`--target org/name`: the target's config, headers and the embedding / lm_head rows a check needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint
from fixtures.drafts import DraftSpec, build_draft
from fixtures.target_weights import build_target_for

try:
    from tests.hubserver import hub_server
except ImportError:  # tests/ itself on sys.path
    from hubserver import hub_server

HUB_SPEC = DraftSpec(storage="sharded", hidden=256, intermediate=512, vocab_size=32768, draft_vocab_size=1024)
DRAFT, TARGET, CONFIG_ONLY, DRAFT_AS_TARGET = "org/eagle3-draft", "org/target", "org/target-config", "org/draft2"


@pytest.fixture
def hub(built_fixtures, tmp_path: Path, hf_env, monkeypatch: pytest.MonkeyPatch):
    # A sharded draft with a 32k vocabulary (so the target's lm_head is 16 MiB and a sample of its rows
    # is far less), and a target whose lm_head rows at the d2t-mapped ids are the draft's.
    draft = build_draft(tmp_path / "draft", HUB_SPEC)
    target = build_target_for(tmp_path / "target", draft)
    config_only = tmp_path / "target-config"
    config_only.mkdir()
    shutil.copy(target / "config.json", config_only / "config.json")
    with hub_server(
        {DRAFT: draft, TARGET: target, CONFIG_ONLY: config_only, DRAFT_AS_TARGET: built_fixtures("vllm-eagle3")}
    ) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server, draft, target


def _header_bytes(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def test_hub_validate_reads_headers_and_vocab_maps_only(hub) -> None:
    server, draft, _target = hub
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", CONFIG_ONLY, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["findings"] == [] and "target" in data["checks"]
    assert "no weights found" in data["notes"]["target_weights"]  # config-only target: weight checks skipped
    local = open_checkpoint(draft)
    for shard in local.weight_files:
        vocab = sum(t.nbytes for t in local.tensors.values() if t.file == shard and t.name in ("d2t", "t2d"))
        assert 0 < server.served(DRAFT, shard) <= _header_bytes(draft / shard) + vocab


def test_hub_target_reads_only_the_rows_a_check_needs(hub) -> None:
    """lm_head check: the draft's sampled lm_head rows and the target's rows at (and around) their
    d2t-mapped ids; the target's embedding is never needed (the draft ships none)."""
    server, _draft, target = hub
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", TARGET, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["findings"] == [], data["findings"]
    assert "sampled rows" in data["notes"]["target_weights"]
    head = open_checkpoint(target).tensors["lm_head.weight"]
    served = server.served(TARGET, "model.safetensors")
    # 32 sampled slots, each with its own and 8 neighbouring mapped ids (rows closer than 64 KiB are read
    # in one range): a quarter of the lm_head at most, and nothing of the embedding.
    assert (
        _header_bytes(target / "model.safetensors")
        < served
        <= _header_bytes(target / "model.safetensors") + head.nbytes // 4
    )


def test_hub_target_deep_reads_the_whole_lm_head(hub) -> None:
    server, _draft, target = hub
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", TARGET, "--deep", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "every row" in json.loads(res.stdout)["notes"]["target_weights"]
    info = open_checkpoint(target).tensors
    needed = info["lm_head.weight"].nbytes
    served = server.served(TARGET, "model.safetensors")
    assert needed <= served <= needed + _header_bytes(target / "model.safetensors")  # not the embedding


def test_hub_target_that_is_a_draft_is_refused(hub) -> None:
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", DRAFT_AS_TARGET])
    assert res.exit_code == 1
    assert res.stderr.startswith(f"Error: --target {DRAFT_AS_TARGET}: this looks like an EAGLE-3 draft")
    assert "did you swap DRAFT and --target?" in res.stderr


@pytest.mark.vllm  # --load vllm needs vLLM installed before the folders are asked
def test_hub_engine_check_needs_local_folders(hub) -> None:
    res = CliRunner().invoke(main, ["validate", DRAFT, "--target", TARGET, "--load", "vllm"])
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: --load vllm needs a local draft folder and a local target folder")
