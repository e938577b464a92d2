"""Streamed, exact safetensors writing.

Unchanged tensors are copied as *bytes* from their source safetensors file into the new file
(new header, then byte ranges), so memory stays flat whatever the checkpoint size: tensors
are never decoded. Small new tensors (``d2t``, a renamed norm, ...) are given as ``bytes``;
large generated tensors (synthetic benchmarks) as a re-iterable :class:`StreamSource`.

The on-disk format follows the safetensors README and the reference crate: an 8-byte
little-endian header length, a JSON header (``__metadata__`` first, then one entry per tensor
with ``dtype``, ``shape`` and ``data_offsets`` relative to the data section) padded with
spaces to a multiple of 8 bytes, then the tensor data back to back in the order given.

``verify_file`` (:mod:`eagle_convert.io.verify`) reopens a written file and compares the header
and every byte against the sources. The file and tensor types and the header encoding live in
:mod:`eagle_convert.io.outfile`, the byte-moving helpers in :mod:`eagle_convert.io.copyrange`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from eagle_convert.io.copyrange import RangeCopier, copy_range, write_all, write_stream
from eagle_convert.io.durable import start_writeback, writing_durably
from eagle_convert.io.outfile import (
    COPY_CHUNK_BYTES,
    FORMAT_PT_METADATA,
    INDEX_FILENAME,
    SINGLE_FILENAME,
    ByteRange,
    OutFile,
    OutTensor,
    StreamSource,
    WriterError,
    check_unique,
    file_header,
)

# --------------------------------------------------------------------------- planning


def shard_filename(index: int, count: int) -> str:
    """HF shard name, ``index`` 1-based: ``model-00001-of-00003.safetensors``."""
    return f"model-{index:05d}-of-{count:05d}.safetensors"


def plan_shards(
    tensors: list[OutTensor],
    *,
    max_shard_bytes: int | None,
    filename_single: str = SINGLE_FILENAME,
    metadata: Mapping[str, str] | None = FORMAT_PT_METADATA,
) -> list[OutFile]:
    """Split ``tensors`` (kept in order) into files of at most ``max_shard_bytes`` data bytes.

    Greedy like huggingface_hub's ``split_state_dict_into_shards``: a tensor that does not fit
    in the current shard starts a new one; a tensor larger than the limit gets a shard of its
    own. One shard (or ``max_shard_bytes=None``) is written as ``filename_single``; several
    get HF names ``model-0000i-of-0000N.safetensors``. ``metadata`` (default
    ``{"format": "pt"}``) is copied into every file's header; ``None`` writes none.
    """
    check_unique(tensors, where="plan")
    if max_shard_bytes is not None and (
        not isinstance(max_shard_bytes, int) or isinstance(max_shard_bytes, bool) or max_shard_bytes <= 0
    ):
        raise WriterError(f"max_shard_bytes must be a positive int or None, got {max_shard_bytes!r}")
    groups: list[list[OutTensor]] = [[]]
    size = 0
    for t in tensors:
        if max_shard_bytes is not None and groups[-1] and size + t.nbytes > max_shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += t.nbytes

    def meta() -> dict[str, str] | None:
        return None if metadata is None else dict(metadata)

    if len(groups) == 1:
        return [OutFile(filename_single, groups[0], meta())]
    n = len(groups)
    return [OutFile(shard_filename(i + 1, n), g, meta()) for i, g in enumerate(groups)]


# --------------------------------------------------------------------------- writing


def write_file(
    out_dir: Path,
    f: OutFile,
    *,
    progress: Callable[[int], None] | None = None,
    chunk_bytes: int = COPY_CHUNK_BYTES,
    align_data: bool = True,
) -> Path:
    """Write ``f`` into ``out_dir`` and return its path; never overwrites an existing file.

    ByteRange tensors are copied in the kernel (``os.copy_file_range``, else ``os.sendfile``,
    else a bounded read/write loop); bytes and StreamSource tensors are written directly.
    ``progress(nbytes)`` is called after each chunk of at most ``chunk_bytes`` data bytes.
    Durability is the caller's (``io.atomic``, ``io.durable``); in a folder being written durably
    each chunk's disk write is started as soon as it is written. ``align_data`` pads the
    header (at most 64 KiB of spaces, ``COPY_ALIGN_BYTES``) so that most copied bytes land at the
    same offset modulo 64 KiB as in their source: in-kernel copies between incongruent
    offsets measured ~1.5x slower. When the header did not change size the padding is the
    crate's own and the file is byte-identical to what ``safetensors`` would write.
    """
    if chunk_bytes <= 0:
        raise WriterError(f"chunk_bytes must be positive, got {chunk_bytes}")
    header = file_header(f, align_data=align_data)
    path = Path(out_dir) / f.filename
    src_fds: dict[Path, int] = {}
    # O_EXCL: never write over anything, in particular not over a file we read from.
    dst_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        for t in f.tensors:
            if isinstance(t.source, ByteRange) and t.source.path not in src_fds:
                fd = os.open(t.source.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                src_fds[t.source.path] = fd
                if hasattr(os, "posix_fadvise"):  # as cp does: larger readahead
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            if isinstance(t.source, ByteRange):
                size = os.fstat(src_fds[t.source.path]).st_size
                if t.source.offset + t.source.nbytes > size:
                    raise WriterError(
                        f"{t.name}: byte range [{t.source.offset}, "
                        f"{t.source.offset + t.source.nbytes}) lies beyond the end of "
                        f"{t.source.path} ({size} bytes)"
                    )
        write_all(dst_fd, header)
        if writing_durably(out_dir):  # each chunk's disk write starts as soon as it is copied
            progress = _with_writeback(dst_fd, len(header), progress)
        copier = RangeCopier(chunk_bytes)
        for t in f.tensors:
            src = t.source
            if isinstance(src, ByteRange):
                copy_range(copier, src_fds[src.path], src, dst_fd, t.name, chunk_bytes, progress)
            elif isinstance(src, StreamSource):
                write_stream(dst_fd, src, t.name, chunk_bytes, progress)
            else:
                view = memoryview(src)
                for start in range(0, len(view), chunk_bytes):
                    piece = view[start : start + chunk_bytes]
                    write_all(dst_fd, piece)
                    if progress is not None:
                        progress(len(piece))
    except BaseException:
        os.close(dst_fd)
        dst_fd = -1
        # A half-written file must not survive: callers write into a temp dir anyway, but
        # a partial file in it would be mistaken for output by a retry.
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    finally:
        for fd in src_fds.values():
            os.close(fd)
        if dst_fd >= 0:
            os.close(dst_fd)
    return path


def _with_writeback(fd: int, start: int, progress: Callable[[int], None] | None) -> Callable[[int], None]:
    """`progress`, plus `start_writeback` of each chunk (the writer reports chunks in file order)."""
    pos = start

    def advanced(nbytes: int) -> None:
        nonlocal pos
        start_writeback(fd, pos, nbytes)
        pos += nbytes
        if progress is not None:
            progress(nbytes)

    return advanced


def write_index(out_dir: Path, files: list[OutFile]) -> Path:
    """Write ``model.safetensors.index.json`` (``metadata.total_size`` and ``weight_map``)."""
    check_unique((t for f in files for t in f.tensors), where="index")
    names = [f.filename for f in files]
    if len(set(names)) != len(names):
        raise WriterError(f"index: duplicate file names in {names}")
    weight_map = {t.name: f.filename for f in files for t in f.tensors}
    path = Path(out_dir) / INDEX_FILENAME
    with open(path, "x", encoding="utf-8") as fh:
        fh.write(index_text(weight_map, sum(f.data_bytes for f in files)))
    return path


def index_text(weight_map: Mapping[str, str], total_size: int) -> str:
    """The text of ``model.safetensors.index.json``: one spelling, so that plans (sizes, ``--link``)
    and verification compare byte for byte with what :func:`write_index` writes."""
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    return json.dumps(index, indent=2) + "\n"
