"""`validate --deep`: every byte read once, in bounded chunks, with progress; same verdict at any chunk size."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.validate.deep import scan
from eagle_convert.validate.run import validate_checkpoint
from test_validate_codes import _nan, write_draft


@pytest.mark.parametrize("name", ["vllm-eagle3-sharded", "vllm-eagle3-fp16-bin", "vllm-eagle31-sharded-fp32"])
def test_reads_are_bounded_and_cover_every_byte(name: str, built_fixtures) -> None:
    ckpt = open_checkpoint(built_fixtures(name))
    reads: list[int] = []
    original = ckpt.source.read_range

    def spy(fname: str, start: int, length: int) -> bytes:
        reads.append(length)
        return original(fname, start, length)

    ckpt.source.read_range = spy  # type: ignore[method-assign]
    seen: list[tuple[int, int]] = []
    summary = scan(ckpt, chunk_bytes=256, progress=lambda done, total, _name: seen.append((done, total)))
    assert max(reads) <= 256
    assert sum(reads) == summary.bytes_read == ckpt.total_bytes
    assert seen[-1] == (ckpt.total_bytes, ckpt.total_bytes)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_chunk_size_does_not_change_the_stats(built_fixtures) -> None:
    ckpt = open_checkpoint(built_fixtures("vllm-eagle31"))
    small = {s.name: s for s in scan(ckpt, chunk_bytes=40).stats}
    whole = {s.name: s for s in scan(ckpt, chunk_bytes=1 << 30).stats}
    assert small.keys() == whole.keys()
    for name, s in whole.items():
        t = small[name]
        assert (t.nonfinite, t.zeros, t.ones, t.negatives, t.max_abs) == (s.nonfinite, s.zeros, s.ones, s.negatives,
                                                                           s.max_abs)
        assert t.abs_sum == pytest.approx(s.abs_sum, rel=1e-9)


def test_nan_found_in_any_chunk(tmp_path: Path) -> None:
    draft = write_draft(tmp_path / "d", tensors=_nan("layers.0.mlp.up_proj.weight"))
    for chunk in (8, 4096, 1 << 26):
        hits = [f for f in validate_checkpoint(draft, deep=True, chunk_bytes=chunk).findings if f.code == "E801"]
        assert [f.tensor for f in hits] == ["layers.0.mlp.up_proj.weight"]


def test_static_validate_reads_no_weight_bytes(built_fixtures, monkeypatch: pytest.MonkeyPatch) -> None:
    """Static validation reads headers, config and d2t/t2d only: its cost does not grow with the weights."""
    from eagle_convert.io.source import LocalSource

    path = built_fixtures("vllm-eagle3")
    ckpt = open_checkpoint(path)
    small = sum(t.nbytes for n, t in ckpt.tensors.items() if n in ("d2t", "t2d"))
    read: list[int] = []
    original = LocalSource.read_range

    def spy(self, name: str, start: int, length: int) -> bytes:
        read.append(length)
        return original(self, name, start, length)

    monkeypatch.setattr(LocalSource, "read_range", spy)
    validate_checkpoint(path)
    header_and_config = (path / "config.json").stat().st_size + min(t.offset for t in ckpt.tensors.values())
    assert sum(read) <= small + header_and_config
