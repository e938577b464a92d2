"""Comparing a file's copied tensors with their sources while the writer is still writing the file.

Why: a verified upgrade used to copy everything, then compare everything, while the disk wrote the
data. Comparing behind the copy, on the other core, with each chunk's disk write started as it is
copied (`io.durable.start_writeback`), took a 0.85 GB durable upgrade from 0.95-1.01 s to
0.63-0.68 s (2 cores, warm cache, 5 alternating rounds; either change alone gained nothing). The
compared bytes are the ones just written, still in the page cache.

A `TrailingVerifier` gets the writer's progress (bytes written, in file order, the `progress`
callback of `io.writer.write_file`) and compares each carried tensor (`ByteRange`) window by
window (`io.samebytes`, mmap + memcmp) once its bytes are written. The tensors found equal are
listed in `verified`; `verify_file(..., compared=verified)` then checks the header, the size and
every other tensor, and compares again any tensor this pass did not find equal, so it reports a
difference exactly as it would have alone. Nothing here raises: any failure (an unmappable file, a
source that changed size) only leaves that tensor to the final pass.

Bytes compared here are not compared again: `write_file` writes every byte through the file
position, in order (no `pwrite`, no seek back), so no later write of the writer lands on a range
already compared. The output is a new (O_EXCL) file in a temp folder only this run writes.
"""

from __future__ import annotations

import os
import threading
from itertools import accumulate
from pathlib import Path

from eagle_convert.io.outfile import ByteRange, OutFile, file_header
from eagle_convert.io.samebytes import RangeComparer

#: Bytes compared per step: the verifier trails the writer by at most about this much.
STEP_BYTES = 64 << 20


class TrailingVerifier:
    """Compares `f`'s carried tensors at `path` in a background thread as `advanced` reports them written.

    Use as a context manager around `write_file(..., align_data=True)` (the default) of `f`; leaving
    it waits for the comparisons still possible (all of them after a complete write).
    """

    def __init__(self, path: Path, f: OutFile, *, step_bytes: int = STEP_BYTES) -> None:
        self.path = Path(path)
        self.step = step_bytes
        self.verified: set[int] = set()  # indices into f.tensors compared equal
        start = len(file_header(f))
        offsets = list(accumulate((t.nbytes for t in f.tensors), initial=start))
        self._todo = [
            (i, offsets[i], t) for i, t in enumerate(f.tensors) if isinstance(t.source, ByteRange) and t.nbytes
        ]
        self._written = start  # the header is written before the first data byte is reported
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="eagle-convert-verify", daemon=True)

    def __enter__(self) -> TrailingVerifier:
        if self._todo:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def advanced(self, nbytes: int) -> None:
        """The writer wrote the next `nbytes` data bytes of the file."""
        with self._cond:
            self._written += nbytes
            self._cond.notify()

    def _wait_for(self, end: int) -> bool:
        """Wait until bytes [0, end) are written; False when the writer stopped before that."""
        with self._cond:
            while self._written < end and not self._closed:
                self._cond.wait()
            return self._written >= end

    def _run(self) -> None:
        comparer = RangeComparer()
        if not comparer.available:
            return
        fds: dict[Path, int] = {}
        try:
            for i, offset, t in self._todo:
                src = t.source
                assert isinstance(src, ByteRange)
                if self.path not in fds and not self._wait_for(offset + 1):
                    return
                for path in (self.path, src.path):
                    if path not in fds:
                        fds[path] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                if os.fstat(fds[src.path]).st_size < src.offset + t.nbytes:
                    continue  # mapping past a file's end raises SIGBUS: the final pass reports it
                equal = self._compare(comparer, fds[self.path], offset, fds[src.path], src.offset, t.nbytes)
                if equal is None:
                    return
                if equal:
                    self.verified.add(i)
        except (OSError, ValueError):
            return  # whatever is left is compared by the final pass
        finally:
            for fd in fds.values():
                os.close(fd)

    def _compare(
        self, comparer: RangeComparer, fd: int, offset: int, src_fd: int, src_offset: int, n: int
    ) -> bool | None:
        """Compare step by step as written: True when equal, False when not (or not comparable this
        way), None when the writer stopped first."""
        for start in range(0, n, self.step):
            k = min(self.step, n - start)
            if not self._wait_for(offset + start + k):
                return None
            if comparer.equal(fd, offset + start, src_fd, src_offset + start, k) is not True:
                return False
        return True
