"""`validate --deep`: every byte read once, in bounded chunks, with progress; same verdict at any chunk size."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.validate.deep import scan
from eagle_convert.validate.run import validate_checkpoint
from fixtures.edits import edit_draft, nan_tensor


@pytest.mark.parametrize("name", ["vllm-eagle3-sharded", "vllm-eagle3-fp16-bin", "vllm-eagle31-sharded-fp32"])
def test_reads_are_bounded_and_cover_every_byte(name: str, built_fixtures) -> None:
    ckpt = open_checkpoint(built_fixtures(name))
    seen: list[tuple[int, int]] = []
    summary = scan(ckpt, chunk_bytes=256, progress=lambda done, total, _name: seen.append((done, total)))
    steps = [b - a for a, b in zip([0] + [d for d, _ in seen], [d for d, _ in seen])]
    assert 0 < max(steps) <= 256 and min(steps) > 0
    assert sum(steps) == summary.bytes_read == ckpt.total_bytes
    assert seen[-1] == (ckpt.total_bytes, ckpt.total_bytes)


def test_a_remote_source_is_read_through_one_bounded_buffer(built_fixtures) -> None:
    """Sources other than local files (the hub) are read by range, at most a chunk per read."""
    from eagle_convert.io.source import LocalSource

    local = open_checkpoint(built_fixtures("vllm-eagle3-sharded"))
    reads: list[int] = []

    class Remote:  # a Source that is not a LocalSource: the deep scan must not map it
        def __init__(self, inner: LocalSource) -> None:
            self.inner = inner

        def read_range(self, name: str, start: int, length: int) -> bytes:
            reads.append(length)
            return self.inner.read_range(name, start, length)

    ckpt = SimpleNamespace(source=Remote(local.source), tensors=local.tensors, total_bytes=local.total_bytes)
    summary = scan(ckpt, chunk_bytes=256)  # type: ignore[arg-type]
    assert max(reads) <= 256 and sum(reads) == summary.bytes_read == local.total_bytes
    by_name = {s.name: s for s in scan(local, chunk_bytes=256).stats}
    assert [(s.name, s.all_zero, s.max_abs) for s in summary.stats] == [
        (s.name, by_name[s.name].all_zero, by_name[s.name].max_abs) for s in summary.stats
    ]


def test_a_file_shorter_than_its_header_says_is_an_error_not_a_crash(built_fixtures, tmp_path: Path) -> None:
    """Mapping past the end of a file and touching it raises SIGBUS: sizes are checked first."""
    import shutil

    from eagle_convert.errors import CheckpointReadError

    draft = shutil.copytree(built_fixtures("vllm-eagle3"), tmp_path / "d")
    ckpt = open_checkpoint(draft)
    with open(draft / "model.safetensors", "r+b") as fh:
        fh.truncate((draft / "model.safetensors").stat().st_size - 100)
    with pytest.raises(CheckpointReadError, match="truncated"):
        scan(ckpt)


def test_chunk_size_does_not_change_the_stats(built_fixtures) -> None:
    ckpt = open_checkpoint(built_fixtures("vllm-eagle31"))
    small = {s.name: s for s in scan(ckpt, chunk_bytes=40).stats}
    whole = {s.name: s for s in scan(ckpt, chunk_bytes=1 << 30).stats}
    assert small.keys() == whole.keys()
    for name, s in whole.items():
        t = small[name]
        assert (t.nonfinite, t.all_zero, t.ones, t.negatives, t.max_abs) == (
            s.nonfinite,
            s.all_zero,
            s.ones,
            s.negatives,
            s.max_abs,
        )
        # float64 sums of the same values in another grouping: equal to ~1e-12 relative.
        assert (t.abs_sum is None) == (s.abs_sum is None) and (
            s.abs_sum is None or t.abs_sum == pytest.approx(s.abs_sum, rel=1e-9)
        )


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32", "F64"])
def test_bit_pattern_checks_agree_with_decoded_values(dtype: str, tmp_path: Path) -> None:
    """Matrices are checked on bit patterns: max |w|, NaN/Inf counts and all-zero equal a decoded pass."""
    import numpy as np

    from eagle_convert.io.safetensors_header import TensorInfo
    from eagle_convert.io.source import LocalSource
    from eagle_convert.io.tensordata import decode
    from eagle_convert.validate.deep import TensorStats, _float_chunk, scan_tensor

    np_dtype = {"BF16": "<f4", "F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype]
    rng = np.random.default_rng(0)
    values = (rng.standard_normal((64, 48)) * 300).astype(np_dtype)
    values[3, 5], values[7, 1], values[9, 9] = -7e3, np.nan, -np.inf
    values[10, :] = -0.0
    raw = (values.view("<u4") >> 16).astype("<u2").tobytes() if dtype == "BF16" else values.tobytes()
    path = tmp_path / "t.bin"
    path.write_bytes(raw)
    ckpt = SimpleNamespace(source=LocalSource(tmp_path))  # scan_tensor reads through `source` only
    info = TensorInfo("w", dtype, (64, 48), "t.bin", 0, len(raw))
    for chunk in (8, 1000, 1 << 20):
        got = scan_tensor(ckpt, info, chunk_bytes=chunk)  # type: ignore[arg-type]
        want = TensorStats("w", dtype, info.numel)
        _float_chunk(want, decode(raw, dtype, (info.numel,)))
        assert (got.nonfinite, got.all_zero, got.max_abs) == (want.nonfinite, want.all_zero, want.max_abs), chunk
    zeros = tmp_path / "z"
    zeros.mkdir()
    (zeros / "t.bin").write_bytes(bytes(len(raw)))
    assert scan_tensor(SimpleNamespace(source=LocalSource(zeros)), info).all_zero  # type: ignore[arg-type]


def test_nan_found_in_any_chunk(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", tensors=nan_tensor("layers.0.mlp.up_proj.weight"))
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
