"""The copy path's speed decisions, checked by what they do to the system calls (their speed itself is
`benchmarks/durable_bench.py`'s): an upgrade's carried tensors all keep one shift against their
source (so they can all sit congruent), a durably written file has the disk write of each chunk
started as soon as it is copied, and a verified one has its carried tensors compared as they are
written (`io.trailing`), leaving only what that pass did not find equal to the final one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.io import durable, verify, writer
from eagle_convert.io.atomic import atomic_output_dir
from eagle_convert.io.outfile import COPY_ALIGN_BYTES, DTYPE_BITS, ByteRange, OutFile, OutTensor, file_header
from eagle_convert.io.trailing import TrailingVerifier
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release

ALIGN = COPY_ALIGN_BYTES


@pytest.mark.parametrize("name", ["vllm-eagle3", "vllm-eagle3-sharded"])
def test_upgrade_keeps_the_carried_tensors_congruent(name: str, built_fixtures) -> None:
    """The new fc_norm tensors follow the carried ones of their dtype (narrower dtypes still come last,
    for alignment), so the carried bytes before them keep one shift against their source and the
    padded header makes every one of them congruent modulo 64 KiB."""
    ckpt = open_checkpoint(str(built_fixtures(name)))
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False))
    new_bits = [DTYPE_BITS[t.dtype] for f in plan.files for t in f.tensors if not isinstance(t.source, ByteRange)]
    assert new_bits
    for f in plan.files:
        pos = len(file_header(OutFile(f.filename, f.tensors, f.metadata)))
        after_new = False
        for t in f.tensors:
            if not isinstance(t.source, ByteRange):
                after_new = True
            elif not after_new:
                assert (pos - t.source.offset) % ALIGN == 0, (f.filename, t.name)
            else:  # after the new tensors: only narrower dtypes
                assert DTYPE_BITS[t.dtype] < min(new_bits), (f.filename, t.name)
            pos += t.nbytes


def _file(tmp_path: Path, nbytes: int) -> OutFile:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(nbytes + 24))
    return OutFile(
        "model.safetensors",
        [
            OutTensor("a", "U8", (nbytes,), ByteRange(src, 0, nbytes)),
            OutTensor("b", "U8", (24,), bytes(range(24))),
            OutTensor("c", "U8", (24,), ByteRange(src, nbytes, 24)),
        ],
        None,
    )


@pytest.mark.parametrize("fsync", [True, False])
def test_durable_writes_start_the_disk_write_of_every_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    """In a folder written durably every data byte's writeback is started once, in file order; else never."""
    started: list[tuple[int, int]] = []
    monkeypatch.setattr(writer, "start_writeback", lambda fd, off, n: started.append((off, n)))
    f = _file(tmp_path, 3 * ALIGN + 40)
    with atomic_output_dir(tmp_path / "out", fsync=fsync) as tmp:
        path = writer.write_file(tmp, f, chunk_bytes=ALIGN)
        size = path.stat().st_size
    if not fsync:
        assert started == []
        return
    pos = size - f.data_bytes  # the data starts after the header
    for off, n in started:
        assert off == pos and n > 0
        pos += n
    assert pos == size


def test_start_writeback_on_a_real_file(tmp_path: Path) -> None:
    """The libc call is bound with the right signature: it runs on a real descriptor and changes nothing."""
    path = tmp_path / "f"
    data = os.urandom(3 * ALIGN)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, data)
        durable.start_writeback(fd, 0, len(data))
        durable.start_writeback(fd, ALIGN, 0)
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    if os.uname().sysname == "Linux":
        assert durable._sync_file_range() is not None


def _compared_by_final_pass(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    real = verify._verify_tensor

    def recording(fd, offset, t, *args, **kw):  # type: ignore[no-untyped-def]
        names.append(t.name)
        return real(fd, offset, t, *args, **kw)

    monkeypatch.setattr(verify, "_verify_tensor", recording)
    return names


def test_trailing_compares_each_carried_tensor_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Carried tensors are compared while written (in 64 KiB steps here), the rest by the final pass."""
    f = _file(tmp_path, 3 * ALIGN + 40)
    seen: list[int] = []
    (tmp_path / "out").mkdir()
    with TrailingVerifier(tmp_path / "out" / f.filename, f, step_bytes=ALIGN) as trailing:
        path = writer.write_file(tmp_path / "out", f, progress=lambda n: (trailing.advanced(n), seen.append(n)))
    assert trailing.verified == {0, 2} and sum(seen) == f.data_bytes
    final = _compared_by_final_pass(monkeypatch)
    counted: list[int] = []
    assert verify.verify_file(path, f, compared=trailing.verified, progress=counted.append) == []
    assert final == ["b"] and sum(counted) == f.data_bytes  # the bar still counts every byte


def test_trailing_leaves_a_wrong_copy_to_the_final_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy that wrote a wrong byte is not marked compared; the final pass reports it as it would alone."""
    f = _file(tmp_path, 3 * ALIGN + 40)
    real = os.copy_file_range

    def corrupting(src_fd: int, dst_fd: int, count: int, offset_src: int | None = None, *a, **kw) -> int:  # type: ignore[no-untyped-def]
        n = real(src_fd, dst_fd, count, offset_src, *a, **kw)
        if offset_src == 0:  # the first call of tensor a: flip its first byte
            pos = os.lseek(dst_fd, 0, os.SEEK_CUR) - n
            os.pwrite(dst_fd, bytes([os.pread(src_fd, 1, 0)[0] ^ 0xFF]), pos)
        return n

    monkeypatch.setattr(os, "copy_file_range", corrupting)
    (tmp_path / "out").mkdir()
    with TrailingVerifier(tmp_path / "out" / f.filename, f, step_bytes=ALIGN) as trailing:
        path = writer.write_file(tmp_path / "out", f, progress=trailing.advanced)
    assert trailing.verified == {2}
    alone = verify.verify_file(path, f)
    assert alone == [f"{path}: a: bytes differ from source at tensor byte 0"]
    assert verify.verify_file(path, f, compared=trailing.verified) == alone


def test_trailing_stops_with_the_writer(tmp_path: Path) -> None:
    """A writer that stops part-way (an error) leaves the unwritten tensors uncompared; leaving returns."""
    f = _file(tmp_path, 2 * ALIGN)
    header = file_header(f)
    src = tmp_path / "src.bin"
    with TrailingVerifier(tmp_path / f.filename, f, step_bytes=ALIGN) as trailing:
        (tmp_path / f.filename).write_bytes(header + src.read_bytes()[: 2 * ALIGN])
        trailing.advanced(2 * ALIGN)  # tensor a written; b and c never are
    assert trailing.verified == {0}


def test_trailing_does_not_map_past_a_shrunk_source(tmp_path: Path) -> None:
    """A source shorter than its range (changed meanwhile) is left to the final pass, not mapped (SIGBUS)."""
    f = _file(tmp_path, 2 * ALIGN)
    (tmp_path / "out").mkdir()
    path = writer.write_file(tmp_path / "out", f)
    os.truncate(tmp_path / "src.bin", ALIGN)
    with TrailingVerifier(path, f) as trailing:
        trailing.advanced(f.data_bytes)
    assert trailing.verified == set()
    assert verify.verify_file(path, f, compared=trailing.verified)  # the final pass reports it


def test_plan_reads_the_vocabulary_maps_once(built_fixtures, monkeypatch: pytest.MonkeyPatch) -> None:
    """The output check and the card's compatibility matrix (every known release) share one memo."""
    from eagle_convert.validate.rules import vocab

    calls: list[tuple[object, ...]] = []
    real = vocab._check_maps
    monkeypatch.setattr(vocab, "_check_maps", lambda *a: calls.append(a[1:]) or real(*a))
    ckpt = open_checkpoint(str(built_fixtures("vllm-eagle3")))
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False))
    assert plan.readme and len(calls) == 1
