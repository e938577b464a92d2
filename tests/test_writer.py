"""Streamed safetensors writer, verification, atomic output directories, synthetic drafts."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle_convert.io import atomic, outfile, samebytes, writer
from eagle_convert.io.atomic import OutputExistsError, atomic_output_dir, cleanup_stale_temps, write_text_atomic
from eagle_convert.io.outfile import INDEX_FILENAME, ByteRange, OutFile, OutTensor, StreamSource, WriterError
from eagle_convert.io.signals import TerminatedBySignal, install_signal_cleanup
from eagle_convert.io.verify import verify_file
from eagle_convert.io.writer import index_text, plan_shards, write_file, write_index

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- helpers


def source_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "fc.weight": torch.randn(8, 24, generator=g).to(torch.bfloat16),
        "layers.0.self_attn.q_proj.weight": torch.randn(8, 16, generator=g).to(torch.float16),
        "norm.weight": torch.randn(8, generator=g),
        "d2t": torch.arange(5, dtype=torch.int64) * 3,
        "t2d": torch.tensor([True, False, True, True, False, False, True, False, True, False, False]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4, dtype=torch.bfloat16),
    }


def read_ranges(path: Path) -> tuple[dict[str, OutTensor], dict[str, str] | None]:
    """name -> OutTensor backed by a ByteRange of ``path``, in file data order, + metadata."""
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    meta = header.pop("__metadata__", None)
    out = {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, end = e["data_offsets"]
        out[name] = OutTensor(name, e["dtype"], tuple(e["shape"]), ByteRange(path, 8 + n + b, end - b))
    return out, meta


def load_all(path: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert torch.equal(a[k], b[k]), k


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "model.safetensors"
    path.parent.mkdir()
    save_file(source_tensors(), str(path), metadata={"format": "pt"})
    return path


def header_of(path: Path) -> tuple[int, bytes]:
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        return n, fh.read(n)


# --------------------------------------------------------------------------- writing


def test_round_trip_byte_ranges_and_new_tensors(src: Path, tmp_path: Path) -> None:
    ranges, _ = read_ranges(src)
    extra_bf16 = torch.linspace(-1, 1, 12).to(torch.bfloat16).reshape(3, 4)
    extra_i64 = torch.tensor([7, -1, 2**40], dtype=torch.int64)
    stream_f32 = torch.arange(1000, dtype=torch.float32)
    stream_bytes = stream_f32.numpy().tobytes()

    def chunks():  # uneven chunk sizes on purpose
        yield stream_bytes[:3]
        yield stream_bytes[3:1001]
        yield stream_bytes[1001:]

    # Renamed and reordered byte ranges, interleaved with new tensors.
    tensors = [
        OutTensor("new.bf16", "BF16", (3, 4), extra_bf16.view(torch.int16).numpy().tobytes()),
        ranges["t2d"],
        OutTensor("renamed.fc", "BF16", (8, 24), ranges["fc.weight"].source),
        OutTensor("stream.f32", "F32", (1000,), StreamSource(4000, chunks)),
        *[t for k, t in ranges.items() if k not in ("t2d", "fc.weight")],
        OutTensor("new.i64", "I64", (3,), extra_i64.numpy().tobytes()),
    ]
    f = OutFile("model.safetensors", tensors, {"format": "pt", "note": "ünïcode"})
    seen: list[int] = []
    out = tmp_path / "out"
    out.mkdir()
    path = write_file(out, f, progress=seen.append)
    assert path == out / "model.safetensors"
    assert sum(seen) == f.data_bytes

    expected = {k: v for k, v in source_tensors().items() if k != "fc.weight"}
    expected["renamed.fc"] = source_tensors()["fc.weight"]
    expected["new.bf16"] = extra_bf16
    expected["new.i64"] = extra_i64
    expected["stream.f32"] = stream_f32
    assert_same(load_all(path), expected)
    with safe_open(str(path), "pt") as sf:
        assert sf.metadata() == {"format": "pt", "note": "ünïcode"}
    assert verify_file(path, f) == []
    assert verify_file(path, f, chunk_bytes=7) == []  # many short compares, odd tails


def test_identical_bytes_to_safetensors_crate(src: Path, tmp_path: Path) -> None:
    """Same tensors, order and metadata as save_file wrote => the very same file."""
    ranges, meta = read_ranges(src)
    f = OutFile("model.safetensors", list(ranges.values()), meta)
    (tmp_path / "out").mkdir()
    path = write_file(tmp_path / "out", f)
    assert path.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("name_len", range(1, 10))
def test_header_alignment(tmp_path: Path, name_len: int) -> None:
    f = OutFile("m.safetensors", [OutTensor("x" * name_len, "F32", (2,), b"\0" * 8)], None)
    path = write_file(tmp_path, f)
    n, body = header_of(path)
    assert (8 + n) % 8 == 0
    assert body.startswith(b"{")
    text = body.decode()
    assert text == text.rstrip() + " " * (len(text) - len(text.rstrip()))
    assert json.loads(text)["x" * name_len] == {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    assert "__metadata__" not in json.loads(text)
    assert load_all(path)["x" * name_len].tolist() == [0.0, 0.0]


def test_data_section_page_congruent_with_source(src: Path, tmp_path: Path) -> None:
    """Renames change the header size; padding keeps copied bytes congruent modulo 64 KiB."""
    ranges, meta = read_ranges(src)
    renamed = [OutTensor(f"model.renamed.{t.name}", t.dtype, t.shape, t.source) for t in ranges.values()]
    f = OutFile("model.safetensors", renamed, meta)
    src_start = 8 + header_of(src)[0]
    page = outfile.COPY_ALIGN_BYTES  # congruent modulo 64 KiB (so also modulo the page)

    aligned = write_file(tmp_path, f)
    n, body = header_of(aligned)
    assert (8 + n) % page == src_start % page and (8 + n) % 8 == 0
    assert body.rstrip(b" ").endswith(b"}") and len(body) - len(body.rstrip(b" ")) < page
    assert verify_file(aligned, f) == []
    assert_same(load_all(aligned), {f"model.renamed.{k}": v for k, v in source_tensors().items()})

    assert aligned.read_bytes()[: 8 + n] == outfile.file_header(f)  # the planner's prediction

    plain_file = OutFile("plain.safetensors", renamed, meta)
    plain = write_file(tmp_path, plain_file, align_data=False)
    n_plain, body_plain = header_of(plain)
    assert plain.read_bytes()[: 8 + n_plain] == outfile.file_header(plain_file, align_data=False)
    assert n_plain % 8 == 0 and len(body_plain) - len(body_plain.rstrip(b" ")) < 8
    assert body_plain.rstrip(b" ") == body.rstrip(b" ")


def test_refuses_to_overwrite(src: Path) -> None:
    ranges, _ = read_ranges(src)
    with pytest.raises(FileExistsError):
        write_file(src.parent, OutFile(src.name, list(ranges.values()), None))
    assert load_all(src)  # still intact


def test_progress_chunks(src: Path, tmp_path: Path) -> None:
    ranges, _ = read_ranges(src)
    f = OutFile("m.safetensors", list(ranges.values()), None)
    seen: list[int] = []
    write_file(tmp_path, f, progress=seen.append, chunk_bytes=64)
    assert sum(seen) == f.data_bytes
    assert max(seen) <= 64 and len(seen) > len(ranges)


@pytest.mark.parametrize("broken", [["copy_file_range"], ["copy_file_range", "sendfile"]])
def test_copy_fallbacks(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: list[str]) -> None:
    def unsupported(*args: object, **kwargs: object) -> int:
        raise OSError(errno.EXDEV, "cross-device")

    for name in broken:
        monkeypatch.setattr(writer.os, name, unsupported)
    ranges, meta = read_ranges(src)
    path = write_file(tmp_path, OutFile("m.safetensors", list(ranges.values()), meta), chunk_bytes=16)
    assert path.read_bytes() == src.read_bytes()


def test_copy_returning_zero_falls_back(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer.os, "copy_file_range", lambda *args, **kwargs: 0)
    ranges, meta = read_ranges(src)
    path = write_file(tmp_path, OutFile("m.safetensors", list(ranges.values()), meta))
    assert path.read_bytes() == src.read_bytes()


def test_source_changed_while_copying(src: Path, tmp_path: Path) -> None:
    ranges, _ = read_ranges(src)
    # The size check passes, then the source shrinks before its bytes are copied.
    f = OutFile("m.safetensors", list(ranges.values()), None)

    def shrink(n: int) -> None:
        os.truncate(src, 100)

    with pytest.raises(WriterError, match="ended while copying"):
        write_file(tmp_path, f, progress=shrink)
    assert not (tmp_path / "m.safetensors").exists()


def test_real_io_error_is_not_swallowed(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> int:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(writer.os, "copy_file_range", failing)
    ranges, _ = read_ranges(src)
    with pytest.raises(OSError) as info:
        write_file(tmp_path, OutFile("m.safetensors", list(ranges.values()), None))
    assert info.value.errno == errno.EIO
    assert not (tmp_path / "m.safetensors").exists()  # no partial file left


# --------------------------------------------------------------------------- validation


def test_writer_error_is_value_error() -> None:
    assert issubclass(WriterError, ValueError)


@pytest.mark.parametrize(
    ("dtype", "shape", "nbytes", "match"),
    [
        ("BF16", (2, 3), 10, "needs 12 bytes"),
        ("F32", (4,), 8, "needs 16 bytes"),
        ("BOOL", (3,), 4, "needs 3 bytes"),
        ("Q4", (2,), 1, "unknown safetensors dtype"),
        ("F4", (3,), 2, "whole bytes"),
        ("F32", (-1,), 0, "non-negative"),
    ],
)
def test_dtype_shape_nbytes_checked(dtype: str, shape: tuple[int, ...], nbytes: int, match: str) -> None:
    with pytest.raises(WriterError, match=match):
        OutTensor("t", dtype, shape, b"\0" * nbytes)
    with pytest.raises(WriterError, match=match):
        OutTensor("t", dtype, shape, ByteRange(Path("x"), 8, nbytes))


def test_sub_byte_dtype_accepted() -> None:
    assert OutTensor("t", "F4", (4,), b"\0\0").nbytes == 2


def test_invalid_names_and_ranges() -> None:
    with pytest.raises(WriterError):
        OutTensor("__metadata__", "F32", (1,), b"\0" * 4)
    with pytest.raises(WriterError):
        OutTensor("", "F32", (1,), b"\0" * 4)
    with pytest.raises(WriterError, match="offset"):
        ByteRange(Path("x"), -1, 4)
    with pytest.raises(WriterError, match="source must be"):
        OutTensor("t", "F32", (1,), [0, 0, 0, 0])  # type: ignore[arg-type]
    with pytest.raises(WriterError, match="bare file name"):
        OutFile("../m.safetensors", [], None)
    with pytest.raises(WriterError, match="metadata"):
        OutFile("m.safetensors", [], {"format": 1})  # type: ignore[dict-item]


def test_duplicate_names_rejected() -> None:
    t = OutTensor("a", "F32", (1,), b"\0" * 4)
    with pytest.raises(WriterError, match="duplicate tensor names: a"):
        OutFile("m.safetensors", [t, t], None)
    with pytest.raises(WriterError, match="duplicate"):
        plan_shards([t, t], max_shard_bytes=4)


def test_range_beyond_source_end(src: Path, tmp_path: Path) -> None:
    size = src.stat().st_size
    bad = OutTensor("t", "F32", (4,), ByteRange(src, size - 8, 16))
    with pytest.raises(WriterError, match="beyond the end"):
        write_file(tmp_path, OutFile("m.safetensors", [bad], None))
    assert not (tmp_path / "m.safetensors").exists()


def test_stream_with_wrong_length(tmp_path: Path) -> None:
    short = OutTensor("s", "U8", (10,), StreamSource(10, lambda: [b"x" * 4]))
    with pytest.raises(WriterError, match="yielded 4 bytes"):
        write_file(tmp_path, OutFile("a.safetensors", [short], None))
    long = OutTensor("s", "U8", (10,), StreamSource(10, lambda: [b"x" * 8, b"x" * 8]))
    with pytest.raises(WriterError, match="more than"):
        write_file(tmp_path, OutFile("b.safetensors", [long], None))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- sharding


def test_plan_shards_single_and_sharded(src: Path, tmp_path: Path) -> None:
    ranges, _ = read_ranges(src)
    tensors = list(ranges.values())
    (single,) = plan_shards(tensors, max_shard_bytes=None)
    assert single.filename == "model.safetensors" and single.metadata == {"format": "pt"}
    (named,) = plan_shards(tensors, max_shard_bytes=10**9, filename_single="draft.safetensors", metadata=None)
    assert named.filename == "draft.safetensors" and named.metadata is None

    limit = 300
    files = plan_shards(tensors, max_shard_bytes=limit)
    n = len(files)
    assert n > 1
    assert [f.filename for f in files] == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    assert [t.name for f in files for t in f.tensors] == [t.name for t in tensors]  # order kept
    for f in files:
        assert f.data_bytes <= limit or len(f.tensors) == 1

    out = tmp_path / "sharded"
    out.mkdir()
    for f in files:
        write_file(out, f)
        assert verify_file(out / f.filename, f) == []
    index_path = write_index(out, files)
    assert index_path == out / INDEX_FILENAME
    index = json.loads(index_path.read_text())
    assert index["metadata"] == {"total_size": sum(t.nbytes for t in tensors)}
    assert index["weight_map"] == {t.name: f.filename for f in files for t in f.tensors}
    loaded: dict[str, torch.Tensor] = {}
    for filename in set(index["weight_map"].values()):
        loaded.update(load_all(out / filename))
    assert_same(loaded, source_tensors())


def test_index_text_is_what_write_index_writes(tmp_path: Path) -> None:
    files = [
        OutFile("b.safetensors", [OutTensor("z", "U8", (3,), b"abc")], None),
        OutFile("a.safetensors", [OutTensor("y", "U8", (2,), b"de"), OutTensor("x", "U8", (1,), b"f")], None),
    ]
    text = index_text({"z": "b.safetensors", "y": "a.safetensors", "x": "a.safetensors"}, 6)
    assert write_index(tmp_path, files).read_text(encoding="utf-8") == text
    assert list(json.loads(text)["weight_map"]) == ["x", "y", "z"] and text.endswith("}\n")


def test_oversized_tensor_gets_own_shard() -> None:
    small = [OutTensor(f"s{i}", "U8", (4,), b"\0" * 4) for i in range(3)]
    big = OutTensor("big", "U8", (100,), b"\0" * 100)
    files = plan_shards([small[0], big, small[1], small[2]], max_shard_bytes=8)
    assert [[t.name for t in f.tensors] for f in files] == [["s0"], ["big"], ["s1", "s2"]]
    with pytest.raises(WriterError):
        plan_shards(small, max_shard_bytes=0)


# --------------------------------------------------------------------------- verification


def _written(src: Path, tmp_path: Path) -> tuple[Path, OutFile]:
    ranges, meta = read_ranges(src)
    f = OutFile("model.safetensors", list(ranges.values()), meta)
    out = tmp_path / "out"
    out.mkdir()
    return write_file(out, f), f


def test_verify_detects_flipped_byte(src: Path, tmp_path: Path) -> None:
    path, f = _written(src, tmp_path)
    header_len = 8 + header_of(path)[0]
    fc = next(t for t in f.tensors if t.name == "fc.weight")
    fc_offset = header_len + sum(t.nbytes for t in f.tensors[: f.tensors.index(fc)])
    with open(path, "r+b") as fh:
        fh.seek(fc_offset + 37)
        b = fh.read(1)
        fh.seek(fc_offset + 37)
        fh.write(bytes([b[0] ^ 0x10]))
    for chunk in (16 * 2**20, 16, 5):
        problems = verify_file(path, f, chunk_bytes=chunk)
        assert len(problems) == 1, problems
        assert "fc.weight" in problems[0] and "byte 37" in problems[0]


def test_verify_detects_wrong_shape_dtype_and_metadata(src: Path, tmp_path: Path) -> None:
    path, f = _written(src, tmp_path)
    fc = next(t for t in f.tensors if t.name == "fc.weight")
    reshaped = [OutTensor(t.name, t.dtype, (24, 8), t.source) if t is fc else t for t in f.tensors]
    problems = verify_file(path, OutFile(f.filename, reshaped, f.metadata))
    assert problems == [f"{path}: fc.weight: shape [8, 24], expected [24, 8]"]

    norm = next(t for t in f.tensors if t.name == "norm.weight")
    retyped = [OutTensor(t.name, "I32", t.shape, t.source) if t is norm else t for t in f.tensors]
    assert "norm.weight: dtype 'F32', expected 'I32'" in verify_file(path, OutFile(f.filename, retyped, f.metadata))[0]

    assert "metadata" in verify_file(path, OutFile(f.filename, f.tensors, {"format": "np"}))[0]

    missing = verify_file(path, OutFile(f.filename, f.tensors[1:], f.metadata))
    assert any("unexpected tensors" in p for p in missing)


def test_verify_detects_truncation_and_wrong_source(src: Path, tmp_path: Path) -> None:
    path, f = _written(src, tmp_path)
    # Expected bytes differ from what was written: a bytes source and a stream source.
    d2t = next(t for t in f.tensors if t.name == "d2t")
    other = torch.arange(5, dtype=torch.int64).numpy().tobytes()
    swapped = [OutTensor("d2t", "I64", (5,), other) if t is d2t else t for t in f.tensors]
    problems = verify_file(path, OutFile(f.filename, swapped, f.metadata))
    assert "d2t: bytes differ from source at tensor byte 8" in problems[0]
    streamed = [OutTensor("d2t", "I64", (5,), StreamSource(40, lambda: [other])) if t is d2t else t for t in f.tensors]
    assert "d2t: bytes differ" in verify_file(path, OutFile(f.filename, streamed, f.metadata))[0]

    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 3)
    assert "size" in verify_file(path, f)[0]
    assert "cannot open" in verify_file(tmp_path / "missing.safetensors", f)[0]


def test_verify_reports_every_bad_tensor(src: Path, tmp_path: Path) -> None:
    path, f = _written(src, tmp_path)
    zeroed = [OutTensor(t.name, t.dtype, t.shape, b"\0" * t.nbytes) if t.nbytes else t for t in f.tensors]
    problems = verify_file(path, OutFile(f.filename, zeroed, f.metadata), chunk_bytes=8)
    bad = [p.split(": ")[1] for p in problems]
    # Every non-empty tensor of random/non-zero data differs from zeros; "empty" has no bytes. They are
    # compared last first, and reported in the file's order.
    assert bad == [t.name for t in f.tensors if t.nbytes]


def test_verify_compares_the_last_written_bytes_first(src: Path, tmp_path: Path, monkeypatch) -> None:
    """Tensors last first and each range's windows last first: a fresh output's newest pages are the
    ones still in the page cache, and a forward scan would evict them before reaching them."""
    path, f = _written(src, tmp_path)
    seen: list[int] = []
    real = samebytes.RangeComparer._window

    def window(self, fd_a: int, off_a: int, fd_b: int, off_b: int, n: int) -> bool:
        seen.append(off_a)
        return real(self, fd_a, off_a, fd_b, off_b, n)

    monkeypatch.setattr(samebytes.RangeComparer, "_window", window)
    assert verify_file(path, f) == []
    assert len(seen) == sum(1 for t in f.tensors if t.nbytes) and seen == sorted(seen, reverse=True)
    # Within a range: windows last first, every byte counted, a difference in the first one found.
    grain = samebytes._GRAIN
    data = os.urandom(5 * grain)
    (tmp_path / "a").write_bytes(data)
    (tmp_path / "b").write_bytes(bytes([data[0] ^ 1]) + data[1:])
    seen.clear()
    done: list[int] = []
    a, b = (os.open(tmp_path / n, os.O_RDONLY) for n in "ab")
    try:
        assert samebytes.RangeComparer(grain).equal(a, 0, a, 0, 5 * grain - 3, done.append) is True
        assert seen == [4 * grain, 3 * grain, 2 * grain, grain, 0] and sum(done) == 5 * grain - 3
        assert samebytes.RangeComparer(grain).equal(a, 0, b, 0, 5 * grain) is False
    finally:
        os.close(a)
        os.close(b)


# --------------------------------------------------------------------------- atomic output


def test_atomic_success(tmp_path: Path) -> None:
    final = tmp_path / "out"
    with atomic_output_dir(final) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.tmp-")
        (tmp / "a.txt").write_text("a")
        assert not final.exists()
    assert (final / "a.txt").read_text() == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt(), TerminatedBySignal(signal.SIGTERM)])
def test_atomic_exception_leaves_nothing(tmp_path: Path, exc: BaseException) -> None:
    final = tmp_path / "out"
    with pytest.raises(type(exc)):
        with atomic_output_dir(final) as tmp:
            (tmp / "a.txt").write_text("a")
            raise exc
    assert list(tmp_path.iterdir()) == []


def test_atomic_refuses_existing(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "keep.txt").write_text("old")
    with pytest.raises(OutputExistsError) as info:
        with atomic_output_dir(final):
            pytest.fail("body must not run")
    assert isinstance(info.value, FileExistsError)
    assert (final / "keep.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputExistsError):
        with atomic_output_dir(tmp_path / "file"):
            pass


def test_atomic_accepts_empty_existing_dir(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    with atomic_output_dir(final) as tmp:
        (tmp / "a.txt").write_text("a")
    assert (final / "a.txt").read_text() == "a"


def test_atomic_refuses_output_appearing_meanwhile(tmp_path: Path) -> None:
    final = tmp_path / "out"
    with pytest.raises(OutputExistsError):
        with atomic_output_dir(final) as tmp:
            (tmp / "new.txt").write_text("new")
            final.mkdir()
            (final / "other.txt").write_text("other")
    assert sorted(p.name for p in final.iterdir()) == ["other.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_force_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool) -> None:
    calls: list[bool] = []
    real_exchange = atomic._exchange

    def spy(a: Path, b: Path) -> bool:
        calls.append(real_exchange(a, b) if exchange else False)
        return calls[-1]

    monkeypatch.setattr(atomic, "_exchange", spy)
    final = tmp_path / "out"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with atomic_output_dir(final, force=True) as tmp:
        (tmp / "new.txt").write_text("new")
        assert (final / "old.txt").exists()  # old output stays visible while writing
    assert sorted(p.name for p in final.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert len(calls) == 1  # (the exchange may be unsupported on exotic filesystems: then False)


def test_atomic_force_failure_keeps_old(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output_dir(final, force=True):
            raise RuntimeError("boom")
    assert sorted(p.name for p in final.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_cleanup_stale_temps_only_touches_its_own(tmp_path: Path) -> None:
    final = tmp_path / "out[1]"  # glob metacharacters in the name
    for name in (".out[1].tmp-aa", ".out[1].tmp-bb", ".out[1].old-cc", ".other.tmp-dd", "out[1].tmp-ee"):
        (tmp_path / name).mkdir()
    (tmp_path / ".out[1].tmp-file").write_text("not a dir")
    # The final output is missing: the .old-* dir may be the only copy, keep it.
    removed = cleanup_stale_temps(final)
    assert sorted(p.name for p in removed) == [".out[1].tmp-aa", ".out[1].tmp-bb"]
    assert (tmp_path / ".out[1].old-cc").is_dir()
    final.mkdir()
    assert [p.name for p in cleanup_stale_temps(final)] == [".out[1].old-cc"]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".other.tmp-dd", ".out[1].tmp-file", "out[1]", "out[1].tmp-ee"]


def test_write_text_atomic_replaces_by_rename(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text("old", encoding="utf-8")
    write_text_atomic(path, "new \u2192 text\n")
    assert path.read_text(encoding="utf-8") == "new \u2192 text\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]  # no temp file left beside it


def test_install_signal_cleanup_raises_and_restores() -> None:
    before = signal.getsignal(signal.SIGTERM)
    restore = install_signal_cleanup()
    try:
        with pytest.raises(TerminatedBySignal) as info:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
        assert isinstance(info.value, KeyboardInterrupt)
        assert info.value.exit_code == 128 + signal.SIGTERM
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) == before


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from eagle_convert.io.atomic import atomic_output_dir
    from eagle_convert.io.signals import TerminatedBySignal, install_signal_cleanup
    from eagle_convert.io.outfile import OutFile, OutTensor, StreamSource
    from eagle_convert.io.writer import write_file

    def chunks():
        for _ in range(1000):
            yield b"\\0" * 4096

    def progress(n):
        print("writing", flush=True)
        time.sleep(0.2)

    install_signal_cleanup()
    f = OutFile("model.safetensors", [OutTensor("t", "U8", (4096 * 1000,), StreamSource(4096 * 1000, chunks))], None)
    try:
        with atomic_output_dir(Path(sys.argv[1])) as tmp:
            write_file(tmp, f, progress=progress, chunk_bytes=4096)
    except TerminatedBySignal as exc:
        sys.exit(exc.exit_code)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_mid_write_leaves_no_output(tmp_path: Path, sig: signal.Signals) -> None:
    final = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(final)], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not final.exists()
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    if sig == signal.SIGTERM:
        assert rc == 128 + signal.SIGTERM
        assert leftovers == []
    else:
        assert rc == -signal.SIGKILL
        # SIGKILL runs no cleanup: the hidden temp and the output's lock file stay, owned by nobody.
        assert len(leftovers) == 2 and leftovers[0] == ".out.lock" and leftovers[1].startswith(".out.tmp-")
        assert [p.name for p in cleanup_stale_temps(final)] == leftovers
        assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- synthetic drafts


def test_synthetic_draft_small(tmp_path: Path) -> None:
    from benchmarks.synth import build_synthetic_draft, draft_tensors, scaled_dims

    dims = {**scaled_dims(1 / 32), "intermediate": 256}
    out = build_synthetic_draft(tmp_path / "draft", **dims, with_embed=True)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    assert (config["vocab_size"], config["draft_vocab_size"]) == (dims["vocab"], dims["draft_vocab"])
    h = dims["hidden"]
    tensors = load_all(out / "model.safetensors")
    assert tensors["fc.weight"].shape == (h, 3 * h)
    assert tensors["layers.0.self_attn.q_proj.weight"].shape == (h, 2 * h)
    assert tensors["layers.0.self_attn.k_proj.weight"].shape == (dims["kv_heads"] * 128, 2 * h)
    assert tensors["lm_head.weight"].shape == (dims["draft_vocab"], h)
    assert tensors["embed_tokens.weight"].shape == (dims["vocab"], h)
    for name, t in tensors.items():
        if t.is_floating_point():
            assert t.dtype == torch.bfloat16 and torch.isfinite(t).all(), name
            assert 0 < t.float().abs().max() <= 1, name
    d2t, t2d = tensors["d2t"], tensors["t2d"]
    assert d2t.dtype == torch.int64 and t2d.dtype == torch.bool
    target_ids = torch.arange(len(d2t)) + d2t
    assert bool((target_ids[1:] > target_ids[:-1]).all()) and int(target_ids.max()) < dims["vocab"]
    assert torch.equal(torch.nonzero(t2d).flatten(), target_ids)

    # Regenerating the stream sources reproduces the file exactly.
    expected = OutFile(
        "model.safetensors",
        draft_tensors(**{k: v for k, v in dims.items() if k != "target_layers"}, with_embed=True),
        {"format": "pt"},
    )
    assert verify_file(out / "model.safetensors", expected) == []


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_synthetic_draft_dtypes(tmp_path: Path, dtype: str) -> None:
    from benchmarks.synth import build_synthetic_draft, scaled_dims

    dims = {**scaled_dims(1 / 32), "intermediate": 128, "vocab": 300, "draft_vocab": 100}
    out = build_synthetic_draft(tmp_path / dtype, **dims, with_embed=False, dtype=dtype, max_shard_bytes=200_000)
    index = json.loads((out / INDEX_FILENAME).read_text())
    torch_dtype = {"fp16": torch.float16, "fp32": torch.float32}[dtype]
    for filename in set(index["weight_map"].values()):
        for name, t in load_all(out / filename).items():
            if t.is_floating_point():
                assert t.dtype == torch_dtype and torch.isfinite(t).all() and t.abs().max() <= 1, name
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == str(torch_dtype).removeprefix("torch.")
