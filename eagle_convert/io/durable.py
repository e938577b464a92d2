"""Flushing to stable storage: what makes an output survive a power loss right after exit 0.

A rename is atomic, not durable: until the file data, the new folder's entries and the parent's
new entry reach the disk, a crash can leave the output missing or holding zero-filled files
(ext4's delayed allocation, XFS). So the atomic writer flushes every file and folder of the temp
output (`fsync_tree`), renames, then flushes the parent (`fsync_dir`); only after that may an
output it replaced be deleted. `--no-fsync` skips all of it for scratch work.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "fsync_file", "fsync_tree"]

_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def fsync_file(path: Path) -> None:
    """Flush one file's data and metadata (an fd opened read-only may be fsynced on Linux)."""
    fd = os.open(path, _RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (names created, renamed or removed in it)."""
    fd = os.open(path, _RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
