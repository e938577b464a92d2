"""Flushing to stable storage: what makes an output survive a power loss right after exit 0.

A rename is atomic, not durable: until the file data, the new folder's entries and the parent's
new entry reach the disk, a crash can leave the output missing or holding zero-filled files
(ext4's delayed allocation, XFS). So the atomic writer flushes every file and folder of the temp
output (`fsync_tree`), renames, then flushes the parent (`fsync_dir`); only after that may an
output it replaced be deleted. `--no-fsync` skips all of it for scratch work.

Writers hand each finished file to `flush_early`: a background thread (an `EarlyFlusher`, which
the atomic writer opens for its temp folder) fsyncs it while the next file is written or the
output verified, so the disk works while the CPU does; the final `fsync_tree` then finds little
left to flush.
"""

from __future__ import annotations

import os
import queue
import threading
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
