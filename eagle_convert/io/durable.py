"""Flushing to stable storage: what makes an output survive a power loss right after exit 0.

A rename is atomic, not durable: until the file data, the new folder's entries and the parent's
new entry reach the disk, a crash can leave the output missing or holding zero-filled files
(ext4's delayed allocation, XFS). So the atomic writer flushes every file and folder of the temp
output (`fsync_tree`), renames, then flushes the parent (`fsync_dir`); only after that may an
output it replaced be deleted. `--no-fsync` skips all of it for scratch work.

Writers hand each written chunk to `start_writeback` and each finished file to `flush_early`: a
background thread (an `EarlyFlusher`, which the atomic writer opens for its temp folder) starts the
chunk's writeback at once (`sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`, which does not wait)
and fsyncs the finished file while the next one is written or the output verified. Why: left to
the kernel, dirty pages wait for the dirty thresholds or 30 s (`vm.dirty_expire_centisecs`), so a
0.85 GB copy reached the disk only at the final fsync, one phase after the other; started per
chunk, the disk writes while the copy and the verification run (benchmarks/durable_bench.py), and
the final `fsync_tree` finds little left to flush.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["EarlyFlusher", "flush_early", "fsync_dir", "fsync_file", "fsync_tree", "start_writeback"]

_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writeback of the range's dirty pages, do not wait


def _sync_file_range() -> Callable[[int], object] | None:
    """`fd -> sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)` (the whole file), or None off Linux."""
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return lambda fd: fn(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)  # an error only skips a head start


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
    """Starts the writeback of chunks handed to `start_writeback` and fsyncs the files handed to
    `flush_early`, for the folder `root`, in one background thread (in the order handed over)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._queue: queue.SimpleQueue[tuple[Path, bool] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._error: OSError | None = None

    def __enter__(self) -> EarlyFlusher:
        _ACTIVE[self.root] = self
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.pop(self.root, None)
        if self._thread is not None:
            self._queue.put(None)  # an error exit does not wait for a flush of a file being discarded

    def submit(self, path: Path, *, finished: bool = True) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="eagle-convert-fsync", daemon=True)
            self._thread.start()
        self._queue.put((path, finished))

    def _run(self) -> None:
        start = _sync_file_range()
        fds: dict[Path, int] = {}  # files whose writeback was started, until their fsync
        try:
            while (item := self._queue.get()) is not None:
                path, finished = item
                try:
                    if finished:
                        fd = fds.pop(path, -1)
                        if fd < 0:
                            fsync_file(path)
                        else:
                            try:
                                os.fsync(fd)
                            finally:
                                os.close(fd)
                    elif start is not None:
                        if path not in fds:
                            fds[path] = os.open(path, _RDONLY | getattr(os, "O_NOFOLLOW", 0))
                        start(fds[path])
                except OSError as exc:  # reported by finish(); the final fsync_tree meets it again anyway
                    self._error = self._error or exc
        finally:
            for fd in fds.values():
                os.close(fd)

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


def start_writeback(path: Path) -> Callable[[], None] | None:
    """For a file being written into a folder written durably: a call that starts the writeback of
    what is written so far (call it after each chunk). None when the folder is not (`--no-fsync`)."""
    path = Path(path)
    flusher = _ACTIVE.get(path.parent)
    return None if flusher is None else lambda: flusher.submit(path, finished=False)
