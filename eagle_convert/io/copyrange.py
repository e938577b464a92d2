"""Moving tensor bytes into an output file descriptor: in-kernel range copies, streams, buffers.

Byte ranges are copied with ``os.copy_file_range``, else ``os.sendfile``, else a bounded
read/write loop; a method that answers "not supported between these two files" is dropped
for the rest of the file. Used by :func:`eagle_convert.io.writer.write_file`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from eagle_convert.io.outfile import VERIFY_CHUNK_BYTES, ByteRange, StreamSource, WriterError, log_rare

# Records keep the writer's logger name, as before these helpers had a module of their own.
_LOGGER = __package__ + ".writer"

# errno values with which copy_file_range / sendfile say "not between these two files",
# as opposed to a real I/O error: fall back to the next, more portable, method.
_FALLBACK_ERRNOS = frozenset(
    e
    for e in (
        errno.EXDEV,
        errno.ENOSYS,
        errno.EINVAL,
        errno.EOPNOTSUPP,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
        errno.EPERM,
        errno.EBADF,
    )
)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class RangeCopier:
    """Copies byte ranges between descriptors, falling back copy_file_range → sendfile → read/write.

    The method that failed with a "not supported here" errno is not retried for the rest of
    the file.
    """

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.methods = ["copy_file_range", "sendfile", "buffered"]
        if not hasattr(os, "copy_file_range"):
            self.methods.remove("copy_file_range")
        if not hasattr(os, "sendfile"):
            self.methods.remove("sendfile")
        self._buf: bytearray | None = None

    def copy(self, src_fd: int, offset: int, count: int, dst_fd: int) -> int:
        """Copy up to ``count`` bytes at ``offset`` of ``src_fd`` to ``dst_fd``'s position."""
        while True:
            method = self.methods[0]
            try:
                if method == "copy_file_range":
                    return os.copy_file_range(src_fd, dst_fd, count, offset)
                if method == "sendfile":
                    return os.sendfile(dst_fd, src_fd, offset, count)
                return self._buffered(src_fd, offset, count, dst_fd)
            except OSError as exc:
                if method == "buffered" or exc.errno not in _FALLBACK_ERRNOS:
                    raise
                log_rare(_LOGGER, 10, "%s unavailable (%s); falling back", method, exc)  # DEBUG
                self.methods.pop(0)

    def fall_back(self) -> bool:
        """Drop the current method for the next one; False if already on the last."""
        if len(self.methods) == 1:
            return False
        log_rare(_LOGGER, 10, "%s copied nothing; falling back", self.methods[0])
        self.methods.pop(0)
        return True

    def _buffered(self, src_fd: int, offset: int, count: int, dst_fd: int) -> int:
        if self._buf is None:
            self._buf = bytearray(min(self.chunk_bytes, VERIFY_CHUNK_BYTES))
        view = memoryview(self._buf)[: min(count, len(self._buf))]
        n = os.preadv(src_fd, [view], offset)
        write_all(dst_fd, view[:n])
        return n


def copy_range(
    copier: RangeCopier,
    src_fd: int,
    src: ByteRange,
    dst_fd: int,
    name: str,
    chunk_bytes: int,
    progress: Callable[[int], None] | None,
) -> None:
    done = 0
    while done < src.nbytes:
        want = min(chunk_bytes, src.nbytes - done)
        chunk_done = 0
        while chunk_done < want:
            n = copier.copy(src_fd, src.offset + done + chunk_done, want - chunk_done, dst_fd)
            if n == 0:
                # Some filesystems answer 0 instead of an error when they cannot
                # copy_file_range/sendfile; only the plain read loop means "end of file".
                if copier.fall_back():
                    continue
                raise WriterError(f"{name}: {src.path} ended while copying (file changed?)")
            chunk_done += n
        done += chunk_done
        if progress is not None:
            progress(chunk_done)


def write_stream(
    dst_fd: int,
    src: StreamSource,
    name: str,
    chunk_bytes: int,
    progress: Callable[[int], None] | None,
) -> None:
    written = 0
    pending = 0
    for piece in src.chunks():
        if written + len(piece) > src.nbytes:
            raise WriterError(f"{name}: stream yields more than its declared {src.nbytes} bytes")
        write_all(dst_fd, piece)
        written += len(piece)
        pending += len(piece)
        if progress is not None and pending >= chunk_bytes:
            progress(pending)
            pending = 0
    if written != src.nbytes:
        raise WriterError(f"{name}: stream yielded {written} bytes, declared {src.nbytes}")
    if progress is not None and pending:
        progress(pending)
