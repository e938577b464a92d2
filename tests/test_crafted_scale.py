"""Crafted headers stay cheap (issue 33 item 8): an upgrade whose output the preflight refuses
validates that output once, not once per known vLLM release for its model card."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main


def _with_extra_tensors(src: Path, out: Path, n: int) -> Path:
    """`src`'s single-file draft plus `n` one-element tensors no layout knows (E102 each)."""
    out.mkdir()
    (out / "config.json").write_bytes((src / "config.json").read_bytes())
    raw = (src / "model.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header, body = json.loads(raw[8 : 8 + size]), bytearray(raw[8 + size :])
    header.pop("__metadata__", None)
    for i in range(n):
        header[f"extra.{i}.weight"] = {"dtype": "BF16", "shape": [1], "data_offsets": [len(body), len(body) + 2]}
        body += b"\0\0"
    text = json.dumps(header).encode()
    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(body))
    return out


def test_a_refused_upgrade_runs_no_compatibility_matrix(
    built_fixtures, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import eagle_convert.validate.matrix as matrix

    calls = []
    real = matrix.compatibility_matrix
    monkeypatch.setattr(matrix, "compatibility_matrix", lambda *a, **k: calls.append(1) or real(*a, **k))
    draft = _with_extra_tensors(built_fixtures("vllm-eagle3"), tmp_path / "crafted", 2000)
    res = CliRunner().invoke(main, ["upgrade", str(draft), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1 and "E102 unknown-tensor (extra.0.weight and 1999 more)" in res.stderr
    assert calls == []  # before: 16 static runs over every tensor, for a card never written
    res = CliRunner().invoke(main, ["upgrade", str(built_fixtures("vllm-eagle3")), "--out", str(tmp_path / "ok")])
    assert res.exit_code == 0 and calls == [1]  # a good draft's card still names the releases
    assert "**vLLM releases**:" in (tmp_path / "ok" / "README.md").read_text()
