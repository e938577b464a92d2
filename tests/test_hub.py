"""`HubSource` against a local hub-compatible server, through the real `huggingface_hub` client.

Nothing here talks to huggingface.co: `HF_ENDPOINT` points at `tests/hubserver.py`, and the
client's HTTP session is wrapped so that any request to a non-loopback host fails the test.
"""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle_convert.errors import (
    CheckpointReadError,
    HubGatedError,
    HubNotFoundError,
    HubOfflineError,
    UsageError,
)
from eagle_convert.io.hub import HubSource, parse_hub_ref
from eagle_convert.io.source import read_json

try:
    from tests.hubserver import hub_server
except ImportError:  # tests/ itself on sys.path (pytest rootdir-less runs)
    from hubserver import hub_server

REPO = "org/draft"
SHARDED = "org/draft-sharded"
WEIGHTS = "model.safetensors"

NOT_FOUND_HINT = "(check the repo id / revision, or set HF_TOKEN if it is private)"
GATED_HINT = "(request access on the model page and set HF_TOKEN)"
OFFLINE_HINT = "(unset HF_HUB_OFFLINE or download the files first)"


# -- fixture repos ------------------------------------------------------------------------------


def _tensors(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "fc.weight": torch.randn(512, 1536, generator=g),  # 3 MiB: bytes served << file size is meaningful
        "layers.0.self_attn.q_proj.weight": torch.randn(256, 512, generator=g).to(torch.bfloat16),
        "norm.weight": torch.ones(512),
        "d2t": torch.arange(4096, dtype=torch.int64),
    }


def _write_repo(root: Path, config: dict, seed: int) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config, indent=2))
    save_file(_tensors(seed), str(root / WEIGHTS), metadata={"format": "pt"})
    return root


def _write_sharded(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    tensors = _tensors(3)
    names = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[:2],
        "model-00002-of-00002.safetensors": names[2:],
    }
    weight_map = {}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(root / shard))
        weight_map.update({k: shard for k in keys})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return root


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hubrepos")
    return {
        REPO: _write_repo(base / "main", {"architectures": ["LlamaForCausalLMEagle3"], "rev": "main"}, seed=0),
        f"{REPO}@v1": _write_repo(base / "v1", {"architectures": ["LlamaForCausalLMEagle3"], "rev": "v1"}, seed=1),
        f"{REPO}@refs/pr/1": _write_repo(base / "pr1", {"architectures": ["LlamaForCausalLMEagle3"], "rev": "pr1"}, 2),
        SHARDED: _write_sharded(base / "sharded"),
    }


# -- environment --------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _isolated(hf_env) -> None:
    """Every test here runs against the local server only (conftest's hf_env)."""


@pytest.fixture
def hub(repos: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    with hub_server(repos) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


# -- parse_hub_ref ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("org/name", ("org/name", None)),
        ("org/name@v1", ("org/name", "v1")),
        ("org/name@refs/pr/3", ("org/name", "refs/pr/3")),
        ("hf://org/name", ("org/name", None)),
        (f"hf://org/name@{'ab' * 20}", ("org/name", "ab" * 20)),
        ("Org-1/my.draft_v2", ("Org-1/my.draft_v2", None)),
        ("name", None),
        ("a/b/c", None),
        ("./org/name", None),
        ("/abs/path", None),
        ("../up/dir", None),
        ("org/name@", None),
        ("org/na me", None),
        ("org/name--x", None),
        ("~/draft", None),
        ("", None),
    ],
)
def test_parse_hub_ref(text: str, expected) -> None:
    assert parse_hub_ref(text) == expected


@pytest.mark.parametrize("text", ["hf://name", "hf://a/b/c", "hf://org/na me", "hf://"])
def test_parse_hub_ref_rejects_malformed_explicit_refs(text: str) -> None:
    with pytest.raises(UsageError, match="not a valid hub reference"):
        parse_hub_ref(text)


def test_invalid_repo_id_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        HubSource("not a repo")


# -- reading ------------------------------------------------------------------------------------


def test_list_files_and_sizes(hub, repos) -> None:
    src = HubSource(REPO)
    assert src.description == REPO
    assert src.list_files() == ["config.json", WEIGHTS]
    for name in src.list_files():
        assert src.file_size(name) == (repos[REPO] / name).stat().st_size
    assert src.commit is not None and len(src.commit) == 40
    assert hub.bytes_served == {}  # listing reads no file content


def test_read_range_matches_local_bytes(hub, repos) -> None:
    src = HubSource(REPO)
    local = (repos[REPO] / WEIGHTS).read_bytes()
    ranges = [(0, 8), (1000, 4096), (len(local) - 17, 17), (123_457, 1)]
    for start, length in ranges:
        assert src.read_range(WEIGHTS, start, length) == local[start : start + length]
    assert src.read_range(WEIGHTS, 5, 0) == b""
    assert hub.served(REPO, WEIGHTS) == sum(length for _, length in ranges)
    assert all(r.range is not None and r.status == 206 for r in hub.requests if r.path.endswith(WEIGHTS))


def test_safetensors_header_reads_only_header_bytes(hub, repos, tmp_path) -> None:
    src = HubSource(REPO)
    size = src.file_size(WEIGHTS)
    (n,) = struct.unpack("<Q", src.read_range(WEIGHTS, 0, 8))
    header = json.loads(src.read_range(WEIGHTS, 8, n))

    with safe_open(str(repos[REPO] / WEIGHTS), "pt") as f:
        assert sorted(k for k in header if k != "__metadata__") == sorted(f.keys())
        assert header["__metadata__"] == f.metadata()
    assert header["fc.weight"]["shape"] == [512, 1536]
    assert hub.served(REPO, WEIGHTS) == 8 + n
    assert hub.served(REPO, WEIGHTS) < size // 100
    weight_requests = [(r.method, r.range, r.status) for r in hub.requests if r.path.endswith(WEIGHTS)]
    assert weight_requests == [("GET", "bytes=0-7", 206), ("GET", f"bytes=8-{8 + n - 1}", 206)]
    assert not list(tmp_path.rglob(WEIGHTS))  # nothing was downloaded into the HF cache


def test_small_json_is_downloaded_once_into_the_hf_cache(hub, repos, tmp_path) -> None:
    src = HubSource(REPO)
    assert read_json(src, "config.json") == json.loads((repos[REPO] / "config.json").read_text())
    path = src.local_path("config.json")
    assert tmp_path / "hf_home" / "hub" in path.parents
    served = hub.served(REPO, "config.json")
    assert served == (repos[REPO] / "config.json").stat().st_size

    again = HubSource(REPO)
    assert read_json(again, "config.json")["rev"] == "main"
    assert hub.served(REPO, "config.json") == served  # second read came from the cache


def test_revision_selects_the_revision(hub, repos) -> None:
    ref = parse_hub_ref("org/draft@v1")
    assert ref == (REPO, "v1")
    v1, main = HubSource(*ref), HubSource(REPO)
    assert v1.description == "org/draft@v1"
    assert read_json(v1, "config.json")["rev"] == "v1"
    assert read_json(main, "config.json")["rev"] == "main"
    assert v1.commit != main.commit
    v1_bytes = (repos[f"{REPO}@v1"] / WEIGHTS).read_bytes()
    assert v1.read_range(WEIGHTS, 100, 64) == v1_bytes[100:164]
    # A commit sha is a revision too.
    pinned = HubSource(REPO, v1.commit)
    assert read_json(pinned, "config.json")["rev"] == "v1"


def test_revision_with_slashes_online_then_offline(hub, monkeypatch) -> None:
    src = HubSource(*parse_hub_ref("hf://org/draft@refs/pr/1"))
    assert src.description == "org/draft@refs/pr/1"
    assert read_json(src, "config.json")["rev"] == "pr1"
    (n,) = struct.unpack("<Q", src.read_range(WEIGHTS, 0, 8))
    assert n > 0
    hub.reset_counts()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = HubSource(REPO, "refs/pr/1")
    assert read_json(offline, "config.json")["rev"] == "pr1"
    assert offline.commit == src.commit
    assert hub.requests == []


def test_sharded_checkpoint_headers(hub, repos) -> None:
    src = HubSource(SHARDED)
    files = src.list_files()
    assert files == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    index = read_json(src, "model.safetensors.index.json")
    seen = set()
    for shard in sorted(set(index["weight_map"].values())):
        (n,) = struct.unpack("<Q", src.read_range(shard, 0, 8))
        header = json.loads(src.read_range(shard, 8, n))
        seen |= {k for k in header if k != "__metadata__"}
        assert hub.served(SHARDED, shard) == 8 + n
        assert hub.served(SHARDED, shard) < src.file_size(shard) // 10
    assert seen == set(index["weight_map"])


def test_local_path_downloads_the_file_and_later_reads_use_it(hub, repos) -> None:
    src = HubSource(REPO)
    path = src.local_path(WEIGHTS)
    assert path.read_bytes() == (repos[REPO] / WEIGHTS).read_bytes()
    served = hub.served(REPO, WEIGHTS)
    assert served == path.stat().st_size
    assert src.read_range(WEIGHTS, 0, 8) == path.read_bytes()[:8]
    assert HubSource(REPO).local_path(WEIGHTS) == path
    assert hub.served(REPO, WEIGHTS) == served


def test_range_past_the_end_is_a_read_error_without_a_request(hub) -> None:
    src = HubSource(REPO)
    size = src.file_size(WEIGHTS)
    with pytest.raises(CheckpointReadError) as exc:
        src.read_range(WEIGHTS, size - 4, 8)
    assert str(exc.value) == (
        f"org/draft/model.safetensors: truncated (wanted bytes {size - 4}..{size + 4}, file has {size})"
        " (re-download or re-export the file)"
    )
    assert hub.served(REPO, WEIGHTS) == 0


# -- errors -------------------------------------------------------------------------------------


def test_missing_repo(hub) -> None:
    with pytest.raises(HubNotFoundError) as exc:
        HubSource("org/missing").list_files()
    assert str(exc.value) == f"org/missing: repository not found on the hub {NOT_FOUND_HINT}"


def test_missing_revision(hub) -> None:
    with pytest.raises(HubNotFoundError) as exc:
        HubSource(REPO, "v9").list_files()
    assert str(exc.value) == f"org/draft@v9: revision not found on the hub {NOT_FOUND_HINT}"


def test_missing_file(hub) -> None:
    src = HubSource(REPO, "v1")
    expected = f"org/draft@v1/tokenizer.json: file not found in the repository {NOT_FOUND_HINT}"
    for call in (lambda: src.file_size("tokenizer.json"), lambda: src.read_range("tokenizer.json", 0, 1)):
        with pytest.raises(HubNotFoundError) as exc:
            call()
        assert str(exc.value) == expected


@pytest.mark.parametrize("token", [None, "hf_wrong"])
def test_gated_repo(repos, monkeypatch, token) -> None:
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    with hub_server(repos, gated={REPO}, token="hf_granted") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        src = HubSource(REPO)
        assert src.list_files() == ["config.json", WEIGHTS]  # model info of a gated repo is public
        for call in (lambda: read_json(src, "config.json"), lambda: src.read_range(WEIGHTS, 0, 8)):
            with pytest.raises(HubGatedError) as exc:
                call()
            assert str(exc.value) == f"org/draft: gated repository, access denied {GATED_HINT}"
        # The server answered 401 without a token and 403 with a wrong one, like the real hub.
        assert {r.status for r in server.requests if "/resolve/" in r.path} == {401 if token is None else 403}
        assert server.bytes_served == {}


def test_gated_repo_with_a_granted_hf_token(repos, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    with hub_server(repos, gated={REPO}, token="hf_granted") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        src = HubSource(REPO)
        assert read_json(src, "config.json")["rev"] == "main"
        (n,) = struct.unpack("<Q", src.read_range(WEIGHTS, 0, 8))
        assert n > 0


def test_private_repo_needs_the_token(repos, monkeypatch) -> None:
    with hub_server(repos, private={REPO}, token="hf_granted") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        with pytest.raises(HubNotFoundError) as exc:
            HubSource(REPO).list_files()
        assert str(exc.value) == f"org/draft: repository not found on the hub {NOT_FOUND_HINT}"
        monkeypatch.setenv("HF_TOKEN", "hf_granted")
        assert HubSource(REPO).list_files() == ["config.json", WEIGHTS]


def test_offline_with_an_empty_cache(hub, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOfflineError) as exc:
        HubSource(REPO).list_files()
    assert str(exc.value) == f"org/draft: not in the local cache and offline mode is on (HF_HUB_OFFLINE) {OFFLINE_HINT}"
    assert hub.requests == []


def test_offline_serves_a_cached_config(hub, monkeypatch, repos) -> None:
    assert read_json(HubSource(REPO), "config.json")["rev"] == "main"
    hub.reset_counts()

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = HubSource(REPO)
    assert src.list_files() == ["config.json"]  # what the cache holds
    assert read_json(src, "config.json") == json.loads((repos[REPO] / "config.json").read_text())
    assert src.local_path("config.json").is_file()
    with pytest.raises(HubOfflineError) as exc:
        src.read_range(WEIGHTS, 0, 8)
    assert str(exc.value) == (
        f"org/draft/model.safetensors: not in the local cache and offline mode is on (HF_HUB_OFFLINE) {OFFLINE_HINT}"
    )
    with pytest.raises(HubOfflineError):
        HubSource(REPO, "v1").list_files()  # a revision never fetched
    assert hub.requests == []


def test_offline_after_a_full_download_reads_weights_from_the_cache(hub, monkeypatch) -> None:
    online = HubSource(REPO)
    online.local_path("config.json")
    online.local_path(WEIGHTS)
    hub.reset_counts()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = HubSource(REPO)
    assert src.list_files() == ["config.json", WEIGHTS]
    assert src.commit == online.commit
    (n,) = struct.unpack("<Q", src.read_range(WEIGHTS, 0, 8))
    assert json.loads(src.read_range(WEIGHTS, 8, n))["fc.weight"]["dtype"] == "F32"
    assert hub.requests == []


def test_unreachable_endpoint(monkeypatch) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(HubOfflineError) as exc:
        HubSource(REPO).list_files()
    assert str(exc.value) == (
        f"org/draft: cannot reach the hub at http://127.0.0.1:{port} (ConnectError)"
        " (check the network connection and HF_ENDPOINT, or download the files first)"
    )


def test_unreachable_endpoint_falls_back_to_the_cache(hub, monkeypatch) -> None:
    assert read_json(HubSource(REPO), "config.json")["rev"] == "main"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    src = HubSource(REPO)
    assert src.list_files() == ["config.json"]
    assert read_json(src, "config.json")["rev"] == "main"
    with pytest.raises(HubOfflineError) as exc:
        src.read_range(WEIGHTS, 0, 8)
    assert str(exc.value) == (
        f"org/draft/model.safetensors: not in the local cache and the hub at http://127.0.0.1:{port} is unreachable"
        " (check the network connection and HF_ENDPOINT, or download the files first)"
    )
