"""Compare byte ranges of two files without copying them: bounded mmap windows and libc `memcmp`.

Why: reading both files into buffers (`os.preadv`) costs two copies out of the page cache per
byte compared, which made verification the most expensive part of a verified upgrade (on a
0.79 GiB draft it took as long as `cp -r` did for the whole copy). Mapping both ranges and letting
`memcmp` read the page cache directly compared the same bytes in ~55% of the time (0.14 s vs
0.25 s, warm cache). Windows are `WINDOW_BYTES` long and unmapped after use, so the resident
set grows by at most two windows.

Ranges are compared last window first (and `verify_file` takes tensors, `apply` shards, last
first): of a fresh 6.5 GB output on a shared 23 GB machine only the last ~2.3 GB were still cached
(`fincore`), and a forward scan, reading the evicted head from disk, evicted that tail before
reaching it. Verifying it took a median 4.3 s backwards against 6.1 s forwards (6 runs each).

Where this is unavailable (no `mmap` of these files, no libc `memcmp` through ctypes), `equal`
returns None and callers fall back to their buffered comparison. A file truncated by another
program *while* it is mapped raises SIGBUS; callers check sizes first.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import Any

WINDOW_BYTES = 8 << 20
_GRAIN = mmap.ALLOCATIONGRANULARITY


class RangeComparer:
    """`equal(fd_a, off_a, fd_b, off_b, n)`: True/False, or None when mapping is not possible here."""

    def __init__(self, window_bytes: int = WINDOW_BYTES) -> None:
        self.window = max(_GRAIN, window_bytes - window_bytes % _GRAIN)
        self._memcmp: Callable[..., int] | None = None
        self._ctypes: Any = None
        self.available = self._load()

    def _load(self) -> bool:
        try:
            import ctypes

            try:  # the running program's symbols include libc's; find_library would spawn ldconfig
                fn = ctypes.CDLL(None).memcmp
            except (OSError, AttributeError):
                import ctypes.util  # imports subprocess: only where it is needed

                fn = ctypes.CDLL(ctypes.util.find_library("c")).memcmp
        except (OSError, AttributeError, ImportError, TypeError):
            return False
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        fn.restype = ctypes.c_int
        self._memcmp, self._ctypes = fn, ctypes
        return True

    def equal(
        self, fd_a: int, off_a: int, fd_b: int, off_b: int, n: int, progress: Callable[[int], None] | None = None
    ) -> bool | None:
        """Whether the `n` bytes at `off_a` of `fd_a` equal those at `off_b` of `fd_b` (windows compared
        last first; `progress` gets each window's size)."""
        if not self.available:
            return None
        for start in reversed(range(0, n, self.window)):  # last first: see the module's docstring
            k = min(self.window, n - start)
            try:
                same = self._window(fd_a, off_a + start, fd_b, off_b + start, k)
            except (OSError, ValueError, BufferError):
                return None  # the caller compares the whole range its own way
            if not same:
                return False
            if progress is not None:
                progress(k)
        return True

    def _window(self, fd_a: int, off_a: int, fd_b: int, off_b: int, n: int) -> bool:
        memcmp = self._memcmp
        if memcmp is None:
            raise ValueError("memcmp is not available")  # callers fall back to their own comparison
        maps = []
        try:
            addrs = []
            for fd, off in ((fd_a, off_a), (fd_b, off_b)):
                base = off - off % _GRAIN
                # Private + writable only so ctypes can take the address; nothing is written, so no
                # page is ever copied.
                m = mmap.mmap(
                    fd, off - base + n, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=base
                )
                maps.append(m)
                if hasattr(m, "madvise"):
                    m.madvise(mmap.MADV_WILLNEED)  # one read-ahead of the window where pages were evicted
                c = self._ctypes.c_char.from_buffer(m)
                addrs.append(self._ctypes.addressof(c) + off - base)
                del c
            return memcmp(addrs[0], addrs[1], n) == 0
        finally:
            for m in maps:
                m.close()
