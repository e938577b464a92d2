"""Atomic output directories: build in a hidden temp sibling, publish with one rename.

``atomic_output_dir(final)`` yields ``final.parent / ".{final.name}.tmp-XXXXXXXX"``. When the
``with`` body succeeds the temp dir is renamed to ``final``; when it raises (including
``KeyboardInterrupt`` and, after ``io.signals.install_signal_cleanup``, SIGTERM) the temp dir is
removed. A run killed with SIGKILL leaves only the hidden temp dir (and the output's lock file),
which the next run removes once no live process owns them (:func:`cleanup_stale_temps`). Readers
therefore see either no output, the previous output, or the complete new one, never a
half-written directory; and with ``fsync`` (the default) that is still true after a power loss.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from eagle_convert.errors import OutputError
from eagle_convert.io.durable import EarlyFlusher, fsync_dir, fsync_tree
from eagle_convert.io.outfile import log_rare
from eagle_convert.io.outlock import (
    OutputLock,
    OutputLockedError,
    hold_dir,
    lock_name,
    owner_alive,
    probe_output_lock,
)
from eagle_convert.io.signals import deferred_signals


class OutputExistsError(OutputError, FileExistsError):
    """The output path exists (and is not an empty folder) and `force` was not given.

    Args:
        path: The output path (`file`).
        why: What happened, by default "output already exists".
    """

    def __init__(self, path: str | os.PathLike[str], why: str = "output already exists") -> None:
        super().__init__(f"{path}: {why}", hint="pass {force} to replace it", options=("force",), file=path)
        self.filename = str(path)


def _temp_name(final: Path, kind: str) -> str:
    # The owner's pid in the name: what cleanup falls back on where flock is unsupported.
    return f".{final.name}.{kind}-{os.getpid()}-{os.urandom(4).hex()}"


_OWNER_PID = re.compile(r"-(\d+)-[0-9a-f]+$")


def _make_temp_dir(final: Path) -> tuple[Path, int]:
    """A new temp folder beside `final` and the fd holding its lock (see `io.outlock`)."""
    # Not tempfile.mkdtemp: that creates mode 0700, and the published output should get the
    # usual umask-derived permissions.
    for _ in range(100):
        candidate = final.parent / _temp_name(final, "tmp")
        try:
            os.mkdir(candidate, 0o777)
        except FileExistsError:
            continue
        try:
            return candidate, hold_dir(candidate)
        except BaseException:
            shutil.rmtree(candidate, ignore_errors=True)
            raise
    raise FileExistsError(errno.EEXIST, "could not create a unique temp dir", str(final.parent))


def _is_empty_dir(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir():
        return False
    with os.scandir(path) as it:
        return next(it, None) is None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


_RENAME_EXCHANGE = 2
_renameat2: Callable[..., int] | None = None
_renameat2_loaded = False
# Outputs this process published (absolute paths): what an interrupt message may say was written.
_PUBLISHED: set[Path] = set()


def was_published(final: str | Path) -> bool:
    """True once this process has published an output at `final` (the rename and its flush done)."""
    return Path(final).expanduser().absolute() in _PUBLISHED


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False if unsupported."""
    global _renameat2, _renameat2_loaded
    import ctypes  # lazily: only --force replacements need it (saves ~20 ms at import)
    import ctypes.util

    if not _renameat2_loaded:
        _renameat2_loaded = True
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):
            _renameat2 = None
    if _renameat2 is None:
        return False
    at_fdcwd = -100
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(a))


def _publish(tmp: Path, final: Path, *, force: bool, fsync: bool) -> None:
    """Rename `tmp` to `final` (replacing an old output with `force`); with `fsync`, flush the
    parent after the rename and before the old output is deleted. Runs with signals deferred, so
    an interrupt lands before the rename (nothing published) or after the old output is gone."""

    def published() -> None:
        if fsync:
            fsync_dir(final.parent)
        _PUBLISHED.add(final)

    if not (final.exists() or final.is_symlink()) or _is_empty_dir(final):
        # rename(2) onto an empty directory replaces it atomically; onto a non-empty one it
        # fails (ENOTEMPTY/EEXIST), so an output created meanwhile is still refused.
        try:
            os.rename(tmp, final)
            published()
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            if not force:
                raise OutputExistsError(final, "output appeared while writing") from exc
    elif not force:
        raise OutputExistsError(final)
    # Replace: swap atomically where the kernel can, so `final` always names a complete
    # output; otherwise move the old one aside first (final is briefly absent, never partial).
    if _exchange(tmp, final):
        published()
        _remove(tmp)  # now holds the old output
        return
    aside = final.parent / _temp_name(final, "old")
    os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(aside, final)
        raise
    published()
    _remove(aside)


@contextmanager
def atomic_output_dir(final: Path, *, force: bool = False, fsync: bool = True) -> Iterator[Path]:
    """Yield a temp dir beside ``final``; publish it as ``final`` when the body succeeds.

    First takes the output's lock (``io.outlock``; another live run on ``final`` raises
    :class:`OutputLockedError` at once) and removes leftovers of killed runs
    (:func:`cleanup_stale_temps`). Refuses (``OutputExistsError``) an existing ``final`` unless it
    is an empty directory or ``force`` is set, checked before any work and again at publication.
    With ``fsync`` (the default) every file and folder of the output is flushed before the
    rename and the parent after it. With ``force`` the old output is swapped out atomically and
    deleted after that. On any exception, including ``KeyboardInterrupt``/
    ``io.signals.TerminatedBySignal``, the temp dir is removed and the exception re-raised; ``final``
    is untouched.
    """
    final = Path(final).absolute()
    if not force and (final.exists() or final.is_symlink()) and not _is_empty_dir(final):
        raise OutputExistsError(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    lock: OutputLock | None = None
    tmp: Path | None = None
    held = -1
    try:
        # Deferred: a signal cannot land between creating the lock (or the temp folder) and
        # this `try` knowing it must remove it. The cleanup between may take a while: not deferred.
        with deferred_signals():
            lock = OutputLock.acquire(final)
        _cleanup(final)
        with deferred_signals():
            tmp, held = _make_temp_dir(final)
        if fsync:
            with EarlyFlusher(tmp) as flusher:  # writers' `flush_early` calls land here
                yield tmp
                flusher.finish()
            fsync_tree(tmp)
        else:
            yield tmp
        with deferred_signals():
            _publish(tmp, final, force=force, fsync=fsync)
    except BaseException:
        if tmp is not None:
            with deferred_signals():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if held >= 0:
            os.close(held)
        if lock is not None:
            lock.release()


def _cleanup(final: Path) -> list[Path]:
    """`cleanup_stale_temps`'s work, for a caller that holds `final`'s lock."""
    prefix = glob.escape(str(final.parent / f".{final.name}."))
    removed: list[Path] = []
    for pattern, kind in ((prefix + "tmp-*", "tmp"), (prefix + "old-*", "old")):
        for name in sorted(glob.glob(pattern)):
            path = Path(name)
            if path.is_symlink() or not path.is_dir():
                continue
            if kind == "old" and not final.exists():
                log_rare(
                    __name__, 30, "%s holds a previous output and %s is missing; leaving it", path, final
                )  # WARNING
                continue
            m = _OWNER_PID.search(path.name)
            if kind == "tmp" and owner_alive(path, int(m.group(1)) if m else None):
                log_rare(__name__, 20, "%s belongs to a running process; leaving it", path)  # INFO
                continue
            shutil.rmtree(path)
            removed.append(path)
    return removed


def cleanup_stale_temps(final: Path) -> list[Path]:
    """Remove leftovers of killed runs that targeted ``final``; return what was removed.

    Removes ``.{name}.tmp-*`` directories (unpublished outputs) whose owner is gone (no process
    holds the folder's lock), and a ``.{name}.lock`` file no process holds. Also removes
    ``.{name}.old-*`` directories (a replaced output whose deletion was interrupted), but only
    when ``final`` exists: if a run died between moving the old output aside and publishing
    the new one, the ``.old-*`` directory is the only copy and is left alone (logged).
    Symlinks and plain files matching the patterns are never touched. Does nothing while another
    run holds ``final``'s lock. (:func:`atomic_output_dir` calls it itself.)
    """
    final = Path(final).absolute()
    stale_lock = lock_name(final).is_file()
    try:
        lock = OutputLock.acquire(final)
    except OutputLockedError:
        return []
    try:
        removed = _cleanup(final)
    finally:
        lock.release()  # removes the lock file: one left by a killed run too
    return sorted(removed + [lock.path] if stale_lock else removed)


# What the hidden siblings add to the output's name: ".{name}.tmp-{pid}-{8 hex}" (pid up to 7 digits).
_SIBLING_EXTRA = len("..tmp--") + 7 + 8


def _check_name_length(final: Path, out: object) -> None:
    """Refuse an output name the filesystem cannot hold, or whose temp and lock siblings it cannot."""
    limit = 255  # NAME_MAX of ext4, XFS, btrfs, tmpfs
    for folder in (final.parent, *final.parent.parents):
        try:
            limit = os.pathconf(folder, "PC_NAME_MAX")
            break
        except (OSError, ValueError):
            continue
    size = len(os.fsencode(final.name))
    if size + _SIBLING_EXTRA > limit:
        raise OutputError(
            f"{out}: the output name is {size} bytes long; at most {limit - _SIBLING_EXTRA} fit here "
            f"(the filesystem's limit is {limit}, and the hidden temp folder beside it adds {_SIBLING_EXTRA})",
            hint="choose a shorter output name",
        )


def check_output_dir(out: str | Path, inputs: Mapping[str, Path | None], *, force: bool = False) -> Path:
    """The absolute output folder, after refusing one that is an input (`inputs`: what -> folder,
    None to skip), lies inside one or contains one, is not a folder, or exists and is not empty
    without `force`. Every writing command calls it before any work, so a refusal costs nothing."""
    final = Path(out).expanduser().absolute()
    _check_name_length(final, out)
    resolved = final.resolve()
    for what, root in inputs.items():
        if root is None:
            continue
        root = Path(root).resolve()
        if resolved == root or root in resolved.parents:
            raise OutputError(
                f"{out}: output is the {what} {root} or inside it", hint="choose an output folder outside the input"
            )
        if resolved in root.parents:
            raise OutputError(
                f"{out}: output contains the {what} {root}", hint="choose an output folder outside the input"
            )
    if final.exists() and not final.is_dir():
        raise OutputError(f"{out}: exists and is not a folder", hint="choose another output path")
    if (final.exists() or final.is_symlink()) and not force and not (final.is_dir() and not any(final.iterdir())):
        raise OutputExistsError(out)
    probe_output_lock(final)
    return final


def write_text_atomic(path: Path, text: str, *, fsync: bool = True) -> None:
    """Replace one text file by rename (from ``.{name}.tmp-{pid}`` beside it), so that a reader or an
    interruption sees the old text or the new, never half of it; with ``fsync`` (the default) the
    new text is on disk before the rename and the rename after it returns."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(path.parent)
