"""Flushing to stable storage: what makes an output survive a power loss right after exit 0.

A rename is atomic, not durable: until the file data, the new folder's entries and the parent's
new entry reach the disk, a crash can leave the output missing or holding zero-filled files
(ext4's delayed allocation, XFS). So the atomic writer flushes every file and folder of the temp
output (`fsync_tree`), renames, then flushes the parent (`fsync_dir`); only after that may an
output it replaced be deleted. `--no-fsync` skips all of it for scratch work.

Writers hand each finished file to `flush_early`: a background thread (an `EarlyFlusher`, which
the atomic writer opens for its temp folder) fsyncs it while the next file is written or the
output verified, so the disk works while the CPU does; the final `fsync_tree` then finds little
left to flush. Inside a file, the writer starts the disk write of each chunk it copied
(`start_writeback`, sync_file_range(2) without waiting), so the disk already works while the file
is still being copied.
"""

from __future__ import annotations

import functools
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path

_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _fsync(path: Path, flag: int) -> None:
    fd = os.open(path, _RDONLY | flag)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush one file's data and metadata (an fd opened read-only may be fsynced on Linux)."""
    _fsync(path, getattr(os, "O_NOFOLLOW", 0))


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (names created, renamed or removed in it)."""
    _fsync(path, getattr(os, "O_DIRECTORY", 0))


def fsync_tree(root: Path) -> None:
    """Flush every regular file below `root`, then every folder, deepest first, `root` last.

    Symlinks are not followed (an output never holds one; the atomic writer's outputs are plain
    files and folders).
    """
    for here, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            p = Path(here, name)
            if not p.is_symlink():
                fsync_file(p)
        fsync_dir(Path(here))


class EarlyFlusher:
    """fsyncs the files handed to `flush_early` for the folder `root`, in a background thread."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._error: OSError | None = None

    def __enter__(self) -> EarlyFlusher:
        _ACTIVE[self.root] = self
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.pop(self.root, None)
        if self._thread is not None:
            self._queue.put(None)  # an error exit does not wait for a flush of a file being discarded

    def submit(self, path: Path) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="eagle-convert-fsync", daemon=True)
            self._thread.start()
        self._queue.put(path)

    def _run(self) -> None:
        while (path := self._queue.get()) is not None:
            try:
                fsync_file(path)
            except OSError as exc:  # reported by finish(); the final fsync_tree meets it again anyway
                self._error = self._error or exc

    def finish(self) -> None:
        """Wait for every file handed over so far; raise the first flush error."""
        _ACTIVE.pop(self.root, None)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error


_ACTIVE: dict[Path, EarlyFlusher] = {}


def flush_early(path: Path) -> None:
    """Start flushing the finished file `path` if the folder it is in is being written durably."""
    flusher = _ACTIVE.get(Path(path).parent)
    if flusher is not None:
        flusher.submit(Path(path))


def writing_durably(folder: Path) -> bool:
    """Whether `folder` is the temp folder of an output being written durably (its files get flushed)."""
    return Path(folder) in _ACTIVE


_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of the range's dirty pages, do not wait


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range(2) (Python's os module has none); None where there is no such call."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start the disk write of `nbytes` just written at `offset` of `fd`, without waiting for it.

    Only a head start: durability still comes from the fsyncs, which also report any write error
    (so a failure here is ignored). With verification trailing the copy (`io.trailing`) a 0.85 GB
    durable upgrade took 0.63-0.68 s instead of 0.95-1.01 s (Linux 6.18, ext4, 2 cores): the disk no
    longer starts only when the copy ends. A no-op off Linux.
    """
    fn = _sync_file_range()
    if fn is not None and nbytes > 0:
        fn(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)
