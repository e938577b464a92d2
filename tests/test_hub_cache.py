"""`HubSource` on what the client's public cache API reports, and on a server that ignores Range.

The cache cases: a tree listing cached by `snapshot_download` (read with `get_cached_repo_tree`)
makes the offline listing complete, and the client's record that a file does not exist (read with
`try_to_load_from_cache`) makes an offline miss a "not found" rather than "not cached". The range
case is why `HubSource` keeps its own range reader rather than `HfFileSystem` (see eagle_convert/io/hub.py).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from eagle_convert.errors import HubNotFoundError, HubOfflineError
from eagle_convert.io.hub import HubSource
from eagle_convert.io.source import read_json

try:
    from tests.hubserver import hub_server
except ImportError:  # tests/ itself on sys.path (pytest rootdir-less runs)
    from hubserver import hub_server

REPO = "org/draft"
WEIGHTS = "model.safetensors"
NOT_FOUND_HINT = "(check the repo id / revision, or set HF_TOKEN if it is private)"
OFFLINE_HINT = "(unset HF_HUB_OFFLINE or download the files first)"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hubcache") / "draft"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    rng = np.random.default_rng(0)
    tensors = {"fc.weight": rng.standard_normal((256, 768), dtype=np.float32), "d2t": np.arange(4096, dtype=np.int64)}
    save_file(tensors, str(root / WEIGHTS))  # 0.8 MiB: a whole-file answer is far larger than any range
    return root


@pytest.fixture(autouse=True)
def _isolated(hf_env) -> None:
    """Every test here runs against the local server only (conftest's hf_env)."""


def _cache(tmp_path: Path) -> Path:
    return tmp_path / "hf_home" / "hub"  # HF_HOME/hub, set by hf_env


def test_offline_listing_from_a_cached_tree_is_complete(repo: Path, tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub import snapshot_download

    with hub_server({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        # Download only config.json: the client still caches the tree listing of every file.
        snapshot_download(REPO, allow_patterns=["config.json"], cache_dir=_cache(tmp_path), endpoint=server.endpoint)
        online_commit = HubSource(REPO).commit
        server.reset_counts()
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        src = HubSource(REPO)
        assert src.list_files() == ["config.json", WEIGHTS]  # the weights are listed, not only what is cached
        assert src.commit == online_commit
        assert src.file_size(WEIGHTS) == (repo / WEIGHTS).stat().st_size
        assert read_json(src, "config.json")["architectures"] == ["LlamaForCausalLMEagle3"]
        with pytest.raises(HubOfflineError) as exc:
            src.read_range(WEIGHTS, 0, 8)
        assert str(exc.value) == (
            "org/draft/model.safetensors: not in the local cache and offline mode is on (HF_HUB_OFFLINE) "
            f"{OFFLINE_HINT}"
        )
        # The listing is complete, so a file outside it does not exist (not merely "not cached").
        with pytest.raises(HubNotFoundError) as missing:
            src.file_size("tokenizer.json")
        assert str(missing.value) == f"org/draft/tokenizer.json: file not found in the repository {NOT_FOUND_HINT}"
        assert server.requests == []


def test_offline_miss_recorded_by_the_client_is_not_found(repo: Path, tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    with hub_server({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        assert read_json(HubSource(REPO), "config.json")["architectures"]
        with pytest.raises(EntryNotFoundError):  # the client records the miss in the cache
            hf_hub_download(REPO, "tokenizer.json", cache_dir=_cache(tmp_path), endpoint=server.endpoint)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        src = HubSource(REPO)
        assert src.list_files() == ["config.json"]  # no tree listing: only what the snapshot holds
        with pytest.raises(HubNotFoundError) as missing:
            src.file_size("tokenizer.json")
        assert str(missing.value) == f"org/draft/tokenizer.json: file not found in the repository {NOT_FOUND_HINT}"
        with pytest.raises(HubOfflineError) as uncached:  # never asked for: unknown, so "not cached"
            src.file_size("generation_config.json")
        assert str(uncached.value) == (
            "org/draft/generation_config.json: not in the local cache and offline mode is on (HF_HUB_OFFLINE) "
            f"{OFFLINE_HINT}"
        )


def test_range_reads_are_right_when_the_server_ignores_range(repo: Path, monkeypatch) -> None:
    local = (repo / WEIGHTS).read_bytes()
    with hub_server({REPO: repo}, ranges=False) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        src = HubSource(REPO)
        (n,) = struct.unpack("<Q", src.read_range(WEIGHTS, 0, 8))
        assert json.loads(src.read_range(WEIGHTS, 8, n))["d2t"]["dtype"] == "I64"
        for start, length in [(100, 8), (len(local) - 17, 17), (123_457, 4096)]:
            assert src.read_range(WEIGHTS, start, length) == local[start : start + length]
        weight_requests = [(r.range is not None, r.status) for r in server.requests if r.path.endswith(WEIGHTS)]
        assert weight_requests == [(True, 200)] * 5  # every read asked for a range and got the whole file
