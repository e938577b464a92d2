"""Who is writing an output: one run per output folder, and temp folders that say whether their owner lives.

Two runs writing the same OUTPUT would each see the other's temp folder as a leftover of a killed
run and delete it. So a run first takes `.{name}.lock` beside the output (``flock(2)``, exclusive,
never waiting): the second run is refused at once with the holder's pid. The lock file is removed
when the run ends; one left by a killed run is taken over by the next (the kernel drops a dead
process's locks). Each temp folder is locked too (its own directory file descriptor, for as long
as the run lives) and carries its owner's pid in its name, so a leftover is deleted only when no
process holds its lock any more.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from eagle_convert.errors import OutputError

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
# flock unsupported (some network filesystems): fall back to the pid recorded in the name.
_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


class OutputLockedError(OutputError):
    """Another run holds the output's lock (exit code 1)."""

    def __init__(self, out: Path, pid: int | None) -> None:
        who = f"eagle-convert run (pid {pid})" if pid else "eagle-convert run"
        super().__init__(
            f"{out}: another {who} is writing this output",
            hint="wait for it to finish, or choose another output folder",
        )
        self.pid = pid


def lock_name(final: Path) -> Path:
    """The lock file of the output folder `final`: hidden, beside it."""
    return final.parent / f".{final.name}.lock"


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _try_flock(fd: int) -> bool:
    """True when this process now holds `fd`'s exclusive lock, False when another process does."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        if exc.errno in _NO_FLOCK:
            return True
        raise
    return True


class OutputLock:
    """The exclusive lock on one output folder; `release()` (or the process's death) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, final: Path) -> OutputLock:
        """Take `final`'s lock or raise `OutputLockedError` at once (never waits)."""
        path = lock_name(final)
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            except OSError as exc:  # name the folder the user chose, not the hidden lock file
                raise OSError(exc.errno, exc.strerror, str(final.parent)) from exc
            try:
                if not _try_flock(fd):
                    raise OutputLockedError(final, _read_pid(path))
                # The holder unlinks the file while still holding it: a lock taken on an unlinked
                # inode guards nothing, so start over on the file now at that name.
                st = os.fstat(fd)
                try:
                    now = os.stat(path)
                except FileNotFoundError:
                    now = None
                if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                    return cls(path, fd)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def release(self) -> None:
        """Remove the lock file, then drop the lock (in that order, see `acquire`)."""
        if self._fd < 0:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1


def probe_output_lock(final: Path) -> None:
    """Raise `OutputLockedError` when a live run holds `final`'s lock; creates nothing.

    Commands call it before their slow part, so a second run is refused before it plans or
    calibrates, not only when it starts to write.
    """
    path = lock_name(final)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return  # no lock file (or none we may read): nobody is writing
    try:
        if not _try_flock(fd):
            raise OutputLockedError(final, _read_pid(path))
    finally:
        os.close(fd)  # closing drops the probe's own lock


def hold_dir(path: Path) -> int:
    """Lock the directory `path` for this process; returns the fd to close when done with it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not _try_flock(fd):
            raise BlockingIOError(errno.EWOULDBLOCK, "temp folder already locked", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def owner_alive(path: Path, pid: int | None) -> bool:
    """Whether the run that made the temp folder `path` still lives: its lock is held (or, where
    flock is unsupported, the `pid` recorded in its name is running)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return True
        if exc.errno not in _NO_FLOCK:
            raise
        return pid is not None and _pid_running(pid)
    finally:
        os.close(fd)
    return False


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
