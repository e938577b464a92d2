"""Reopen a written safetensors file and check it is exactly its :class:`OutFile`.

``verify_file`` compares the header and every byte against the sources: byte ranges of files
through bounded mmap windows and ``memcmp`` (:mod:`eagle_convert.io.samebytes`, no copy out of
the page cache; at most two windows resident), everything else (and a mismatch, to locate its
first differing byte) in bounded chunks through two reused buffers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable
from itertools import accumulate
from pathlib import Path
from typing import Any

from eagle_convert.io.outfile import (
    MAX_HEADER_BYTES,
    VERIFY_CHUNK_BYTES,
    ByteRange,
    OutFile,
    OutTensor,
    StreamSource,
    WriterError,
    header_layout,
)
from eagle_convert.io.samebytes import RangeComparer


def _read_header(fd: int, path: Path) -> tuple[int, dict[str, Any]] | str:
    """(header bytes incl. the 8-byte prefix, parsed JSON) or a problem description."""
    prefix = os.pread(fd, 8, 0)
    if len(prefix) < 8:
        return f"{path}: shorter than the 8-byte header length"
    n = int.from_bytes(prefix, "little")
    if n > MAX_HEADER_BYTES:
        return f"{path}: header length {n} exceeds {MAX_HEADER_BYTES}"
    raw = os.pread(fd, n, 8)
    if len(raw) < n:
        return f"{path}: header truncated ({len(raw)} of {n} bytes)"
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path}: header is not valid JSON ({exc})"
    if not isinstance(header, dict):
        return f"{path}: header is not a JSON object"
    return 8 + n, header


class _Comparer:
    """Compares file bytes with expected bytes through two reused buffers.

    Why whole-buffer compares: ``bytearray == bytearray`` is a memcmp, while comparing
    memoryview slices goes element by element (~40x slower) and slicing a bytearray copies.
    So both buffers are always compared whole; for a short read only the first ``n`` bytes
    are refreshed, and the tails are kept identical (equal after every successful compare,
    resynchronised after a mismatch), so a whole-buffer compare equals a compare of ``n``.
    """

    def __init__(self, chunk_bytes: int) -> None:
        self.actual = bytearray(chunk_bytes)
        self.expected = bytearray(chunk_bytes)
        self.actual_view = memoryview(self.actual)
        self.expected_view = memoryview(self.expected)

    def compare(self, n: int) -> int | None:
        """Offset of the first differing byte among the first ``n``, or None."""
        if self.actual == self.expected:
            return None
        first = None
        block = 1 << 16
        for start in range(0, n, block):
            a, e = self.actual[start : start + block], self.expected[start : start + block]
            if a != e:
                first = start + next(i for i in range(len(a)) if a[i] != e[i])
                break
        self.resync()
        return first

    def resync(self) -> None:
        """Make the buffers identical again (after a mismatch or an aborted compare)."""
        self.expected[:] = self.actual


def _pread_exact(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``offset``; returns bytes read (short only at end of file)."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            break
        got += n
    return got


def verify_file(
    path: Path,
    f: OutFile,
    *,
    chunk_bytes: int = VERIFY_CHUNK_BYTES,
    progress: Callable[[int], None] | None = None,
    compared: Collection[int] = (),
) -> list[str]:
    """Reopen ``path`` and check it is exactly ``f``: header and every tensor's bytes.

    Returns mismatch descriptions, empty when the file is exact. The header must hold the
    same metadata, names, dtypes, shapes and data offsets; the file size must match; each
    tensor's bytes are compared with its source in ``chunk_bytes`` chunks (two reused
    buffers, so memory stays bounded). ``progress(nbytes)`` is called per compared chunk.
    ``compared``: indices of tensors already compared equal as they were written
    (:class:`eagle_convert.io.trailing.TrailingVerifier`); their bytes are not compared again.
    """
    if chunk_bytes <= 0:
        raise WriterError(f"chunk_bytes must be positive, got {chunk_bytes}")
    path = Path(path)
    problems: list[str] = []
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return [f"{path}: cannot open ({exc.strerror})"]
    src_fds: dict[Path, int] = {}
    try:
        parsed = _read_header(fd, path)
        if isinstance(parsed, str):
            return [parsed]
        header_end, header = parsed
        problems += _compare_header(path, header, header_layout(f))
        expected_size = header_end + f.data_bytes
        actual_size = os.fstat(fd).st_size
        if actual_size != expected_size:
            problems.append(f"{path}: size {actual_size} bytes, expected {expected_size}")
        if problems:
            # Offsets are not trustworthy; comparing bytes would only add noise.
            return problems
        comparer = _Comparer(chunk_bytes)
        fast = RangeComparer()
        offsets = list(accumulate((t.nbytes for t in f.tensors), initial=header_end))
        found: dict[int, str] = {}
        for i in reversed(range(len(f.tensors))):  # last written first (io.samebytes), reported in order
            t = f.tensors[i]
            if i in compared:
                if progress is not None and t.nbytes:
                    progress(t.nbytes)
                continue
            problem = _verify_tensor(fd, offsets[i], t, comparer, src_fds, progress, fast)
            if problem:
                found[i] = f"{path}: {t.name}: {problem}"
                comparer.resync()
        problems += [found[i] for i in sorted(found)]
    finally:
        os.close(fd)
        for sfd in src_fds.values():
            os.close(sfd)
    return problems


def _compare_header(path: Path, actual: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    problems = []
    if actual.get("__metadata__") != expected.get("__metadata__"):
        problems.append(f"{path}: metadata {actual.get('__metadata__')!r}, expected {expected.get('__metadata__')!r}")
    a_names = [k for k in actual if k != "__metadata__"]
    e_names = [k for k in expected if k != "__metadata__"]
    missing = sorted(set(e_names) - set(a_names))
    extra = sorted(set(a_names) - set(e_names))
    if missing:
        problems.append(f"{path}: missing tensors: {', '.join(missing)}")
    if extra:
        problems.append(f"{path}: unexpected tensors: {', '.join(extra)}")
    for name in e_names:
        if name not in actual:
            continue
        got, want = actual[name], expected[name]
        if not isinstance(got, dict):
            problems.append(f"{path}: {name}: header entry is not an object")
            continue
        for key in ("dtype", "shape", "data_offsets"):
            if got.get(key) != want[key]:
                problems.append(f"{path}: {name}: {key} {got.get(key)!r}, expected {want[key]!r}")
    return problems


def _verify_tensor(
    fd: int,
    offset: int,
    t: OutTensor,
    comparer: _Comparer,
    src_fds: dict[Path, int],
    progress: Callable[[int], None] | None,
    fast: RangeComparer | None = None,
) -> str | None:
    """First problem found comparing tensor ``t`` stored at ``offset`` of ``fd``, or None."""
    src = t.source
    expected_chunks: Iterable[bytes] | None = None
    src_fd = -1
    if isinstance(src, ByteRange):
        if src.path not in src_fds:
            try:
                src_fds[src.path] = os.open(src.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError as exc:
                return f"cannot open source {src.path} ({exc.strerror})"
        src_fd = src_fds[src.path]
        if fast is not None and t.nbytes and os.fstat(src_fd).st_size >= src.offset + t.nbytes:
            # Sizes checked first: a range beyond the end of a mapped file would raise SIGBUS.
            if fast.equal(fd, offset, src_fd, src.offset, t.nbytes, progress):
                return None
            progress = None  # the buffered pass below locates the difference (or compares after all)
    elif isinstance(src, StreamSource):
        expected_chunks = iter(src.chunks())
    pending = memoryview(b"")  # StreamSource leftovers between compares
    size = len(comparer.actual)
    done = 0
    while done < t.nbytes:
        n = min(size, t.nbytes - done)
        got = _pread_exact(fd, comparer.actual_view[:n], offset + done)
        if got != n:
            return f"output ended after {done + got} of {t.nbytes} bytes"
        expected = comparer.expected_view
        if isinstance(src, ByteRange):
            got = _pread_exact(src_fd, expected[:n], src.offset + done)
            if got != n:
                return f"source {src.path} ended after {done + got} of {t.nbytes} bytes"
        elif isinstance(src, StreamSource):
            filled = 0
            while filled < n:
                if not pending:
                    piece = next(iter(expected_chunks or ()), None)
                    if piece is None:
                        return f"stream source yielded only {done + filled} of {t.nbytes} bytes"
                    pending = memoryview(piece)
                take = min(len(pending), n - filled)
                expected[filled : filled + take] = pending[:take]
                pending = pending[take:]
                filled += take
        else:
            expected[:n] = memoryview(src)[done : done + n]
        first = comparer.compare(n)
        if first is not None:
            return f"bytes differ from source at tensor byte {done + first}"
        done += n
        if progress is not None:
            progress(n)
    return None


def verify_same_bytes(path: Path, source: Path, *, progress: Callable[[int], None] | None = None) -> list[str]:
    """Problems (empty when none) comparing the whole file ``path`` with the file ``source``."""
    try:
        size, want = os.stat(path).st_size, os.stat(source).st_size
    except OSError as exc:
        return [f"{exc.filename}: cannot stat ({exc.strerror})"]
    if size != want:
        return [f"{path}: size {size} bytes, expected {want} (the size of {source})"]
    f = OutFile(Path(path).name, [OutTensor("file", "U8", (size,), ByteRange(Path(source), 0, size))])
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    src_fds: dict[Path, int] = {}
    try:
        problem = _verify_tensor(fd, 0, f.tensors[0], _Comparer(VERIFY_CHUNK_BYTES), src_fds, progress, RangeComparer())
    finally:
        os.close(fd)
        for sfd in src_fds.values():
            os.close(sfd)
    return [f"{path}: {problem.replace('tensor byte', 'byte')}"] if problem else []
