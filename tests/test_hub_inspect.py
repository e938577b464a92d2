"""`inspect` on a hub repo served by a local HF-compatible server: headers only, no weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from fixtures.drafts import FIXTURE_MATRIX, build_draft


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_env):
    from hubserver import hub_server

    single = build_draft(tmp_path / "single", FIXTURE_MATRIX["vllm-tiny"])  # ~4 MiB of weights
    sharded = build_draft(tmp_path / "sharded", FIXTURE_MATRIX["nemo-eagle31-sharded"])
    with hub_server({"org/draft": single, "org/draft-sharded": sharded}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server, single


def test_inspect_reads_headers_not_weights(hub) -> None:
    server, folder = hub
    result = CliRunner().invoke(main, ["inspect", "--json", "org/draft"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["is_hub"], data["layout"], data["variant"]) == (True, "vllm", "EAGLE-3")
    assert (data["hidden_size"], data["vocab_size"], data["draft_vocab_size"]) == (256, 4096, 1024)
    weights = folder / "model.safetensors"
    header_len = 8 + int.from_bytes(weights.read_bytes()[:8], "little")
    served = server.served("org/draft", "model.safetensors")
    assert 0 < served <= header_len, (served, header_len)
    assert weights.stat().st_size > 100 * header_len  # the file is mostly tensor data that was not read
    assert data["vocab"]["d2t"] == {"shape": [1024], "dtype": "I64"}  # values are not fetched from the hub


def test_inspect_sharded_hub_repo_at_revision_syntax(hub) -> None:
    server, _ = hub
    result = CliRunner().invoke(main, ["inspect", "--json", "hf://org/draft-sharded"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["layout"], data["variant"], data["storage"]) == ("nemo", "EAGLE-3.1", "sharded")


def test_inspect_missing_repo_is_one_line(hub) -> None:
    result = CliRunner().invoke(main, ["inspect", "org/missing"])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: org/missing: repository not found on the hub "
        "(check the repo id / revision, or set HF_TOKEN if it is private)\n"
    )
