"""Put an existing file into an output folder without copying its bytes: reflink, else hard link, else copy.

A reflink (`FICLONE`, Linux `ioctl_ficlone(2)`; XFS with reflink=1, btrfs, bcachefs, OCFS2) is an
independent file whose data extents are shared copy-on-write with the source: writing either
leaves the other as it was. A hard link is a second name for the *same inode*: a program that
writes into either file in place changes both, so callers must say so. Where neither is possible
(another filesystem, a filesystem without reflinks or hard links, `fs.protected_hardlinks` on a
file the user does not own), the bytes are copied with `os.copy_file_range`.

A symlinked source (every file of a Hugging Face cache snapshot is a relative symlink into
`../../blobs/`) is resolved to the file it names first: `link(2)` does not follow symlinks on
Linux, so linking the name would put the symlink itself into the output, dangling there or
pointing back into the input. The output always holds a regular file.

`same_bytes_cheaply` proves a link holds the source's bytes without reading them: the same inode
(hard link) or the same physical extents (`FS_IOC_FIEMAP`, reflink).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eagle_convert.io.copyrange import RangeCopier, copy_range
from eagle_convert.io.outfile import COPY_CHUNK_BYTES, ByteRange

FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h
FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
FIEMAP_FLAG_SYNC = 0x1
# Extents whose physical address says nothing about the bytes (not yet allocated, inline, encoded).
_FIEMAP_UNTRUSTED = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200  # UNKNOWN DELALLOC ENCODED NOT_ALIGNED INLINE TAIL
_FIEMAP_LAST = 0x1
_FIEMAP_EXTENTS_PER_CALL = 256
#: In order of preference; "copy" is the fallback, not a link.
LINK_METHODS = ("reflink", "hardlink", "copy")
# errno values meaning "this kind of link is impossible here" (as opposed to a real I/O error).
_NO_REFLINK = frozenset(
    {
        errno.EOPNOTSUPP,
        errno.ENOTTY,
        errno.EXDEV,
        errno.EINVAL,
        errno.ENOSYS,
        errno.EPERM,
        errno.EBADF,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
    }
)
_NO_HARDLINK = frozenset(
    {
        errno.EXDEV,
        errno.EPERM,
        errno.EMLINK,
        errno.EOPNOTSUPP,
        errno.EACCES,
        errno.ENOSYS,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
    }
)


@dataclass(frozen=True)
class LinkOutcome:
    """How one file got into the output: `method` is one of LINK_METHODS; `why` says why the
    preferred methods were not possible (empty for a reflink)."""

    method: str
    why: str = ""


def _reason(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))


def link_or_copy(
    src: Path, dst: Path, *, progress: Callable[[int], None] | None = None, methods: tuple[str, ...] = LINK_METHODS
) -> LinkOutcome:
    """Create `dst` (which must not exist) holding `src`'s bytes by the first of `methods` that works.

    A symlinked `src` is resolved to its target first, so `dst` is a regular file, never a link into
    the input. Raises OSError for real failures (no space, permissions on the output folder, `dst`
    exists, a dangling or looping symlink). `progress(nbytes)` sees the bytes of a copy (a link
    moves none).
    """
    src, dst = Path(os.path.realpath(src, strict=True)), Path(dst)
    why: list[str] = []
    src_fd = os.open(src, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        for method in methods:
            if method == "reflink":
                reason = _try_reflink(src_fd, dst)
            elif method == "hardlink":
                reason = _try_hardlink(src, dst)
            elif method == "copy":
                _copy(src_fd, src, dst, progress)
                reason = None
            else:
                raise ValueError(f"unknown link method {method!r} (known: {', '.join(LINK_METHODS)})")
            if reason is None:
                if not stat.S_ISREG(os.lstat(dst).st_mode):  # what the docstring promises, checked
                    os.unlink(dst)
                    raise OSError(errno.EINVAL, f"{method} did not produce a regular file", str(dst))
                return LinkOutcome(method, "; ".join(why))
            why.append(f"{method}: {reason}")
    finally:
        os.close(src_fd)
    raise OSError(errno.EOPNOTSUPP, f"none of {', '.join(methods)} worked ({'; '.join(why)})", str(dst))


def _try_reflink(src_fd: int, dst: Path) -> str | None:
    import fcntl

    dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
    except OSError as exc:
        os.close(dst_fd)
        os.unlink(dst)
        if exc.errno in _NO_REFLINK:
            return _reason(exc)
        raise
    os.close(dst_fd)
    return None


def _try_hardlink(src: Path, dst: Path) -> str | None:
    try:
        os.link(src, dst, follow_symlinks=False)  # `src` is already resolved (link_or_copy)
    except OSError as exc:
        if exc.errno in _NO_HARDLINK:
            return _reason(exc)
        raise
    return None


def _copy(src_fd: int, src: Path, dst: Path, progress: Callable[[int], None] | None) -> None:
    size = os.fstat(src_fd).st_size
    dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        copy_range(
            RangeCopier(COPY_CHUNK_BYTES), src_fd, ByteRange(src, 0, size), dst_fd, dst.name, COPY_CHUNK_BYTES, progress
        )
    except BaseException:
        os.close(dst_fd)
        os.unlink(dst)
        raise
    os.close(dst_fd)


def same_bytes_cheaply(src: Path, dst: Path, method: str) -> bool | None:
    """True when `dst` provably holds `src`'s bytes without reading them: the same inode (hard link),
    or equal sizes and the same physical extents (reflink, by FIEMAP). None when that cannot be
    shown this way (a copy, FIEMAP unsupported, extents not yet allocated): compare the bytes."""
    a, b = os.stat(src), os.stat(dst)
    if method == "hardlink":
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    if method != "reflink":
        return None
    if a.st_size != b.st_size:
        return False
    ea, eb = _extents(src), _extents(dst)
    # Equal extent lists covering the whole file prove equal bytes; anything else (holes, FIEMAP
    # unsupported, extents not comparable) proves nothing either way: compare the bytes.
    if ea is None or ea != eb or sum(length for _, _, length in ea) < a.st_size:
        return None
    return True


def _extents(path: Path) -> list[tuple[int, int, int]] | None:
    """(logical, physical, length) of every extent, or None when FIEMAP is unavailable or an
    extent's physical address does not identify its bytes."""
    import fcntl

    head = struct.Struct("=QQLLLL")
    ext = struct.Struct("=QQQQQLLLL")
    out: list[tuple[int, int, int]] = []
    start = 0
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        while True:
            buf = bytearray(head.pack(start, (1 << 64) - 1 - start, FIEMAP_FLAG_SYNC, 0, _FIEMAP_EXTENTS_PER_CALL, 0))
            buf += bytes(ext.size * _FIEMAP_EXTENTS_PER_CALL)
            try:
                fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            except OSError:
                return None
            mapped = head.unpack_from(buf)[3]
            if mapped == 0:
                return out
            for i in range(mapped):
                logical, physical, length, _, _, flags, *_ = ext.unpack_from(buf, head.size + i * ext.size)
                if flags & _FIEMAP_UNTRUSTED:
                    return None
                out.append((logical, physical, length))
                if flags & _FIEMAP_LAST:
                    return out
            start = out[-1][0] + out[-1][2]
    finally:
        os.close(fd)
