"""Atomic output directories: build in a hidden temp sibling, publish with one rename.

``atomic_output_dir(final)`` yields ``final.parent / ".{final.name}.tmp-XXXXXXXX"``. When the
``with`` body succeeds the temp dir is renamed to ``final``; when it raises (including
``KeyboardInterrupt`` and, after :func:`install_signal_cleanup`, SIGTERM) the temp dir is
removed. A run killed with SIGKILL leaves only the hidden temp dir, which
:func:`cleanup_stale_temps` removes on the next run. Readers therefore see either no output,
the previous output, or the complete new one, never a half-written directory.
"""

from __future__ import annotations

import errno
import glob
import logging
import os
import secrets
import shutil
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from eagle_convert.errors import OutputError

__all__ = [
    "OutputExistsError",
    "TerminatedBySignal",
    "atomic_output_dir",
    "check_output_dir",
    "cleanup_stale_temps",
    "install_signal_cleanup",
    "write_text_atomic",
]

LOG = logging.getLogger(__name__)


class OutputExistsError(FileExistsError):
    """The output path exists (and is not an empty directory) and ``force`` was not given."""


class TerminatedBySignal(KeyboardInterrupt):
    """Raised in the main thread by the handler :func:`install_signal_cleanup` installs.

    A ``KeyboardInterrupt`` subclass so that code which already handles Ctrl-C (cleanup in
    ``finally``/``except BaseException``, CLI exit) handles SIGTERM the same way.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """The conventional shell exit status for death by this signal."""
        return 128 + self.signum


def install_signal_cleanup(
    signums: Iterable[int] = (signal.SIGTERM,),
) -> Callable[[], None]:
    """Make ``signums`` raise :class:`TerminatedBySignal` in the main thread.

    The default action of SIGTERM kills the process without running ``finally`` blocks, which
    would leave temp dirs behind; raising instead lets :func:`atomic_output_dir` clean up.
    Must be called from the main thread. Returns a function restoring the previous handlers.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise TerminatedBySignal(signum)

    previous = {s: signal.signal(s, handler) for s in signums}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def _temp_name(final: Path, kind: str) -> str:
    return f".{final.name}.{kind}-{secrets.token_hex(4)}"


def _make_temp_dir(final: Path) -> Path:
    # Not tempfile.mkdtemp: that creates mode 0700, and the published output should get the
    # usual umask-derived permissions.
    for _ in range(100):
        candidate = final.parent / _temp_name(final, "tmp")
        try:
            os.mkdir(candidate, 0o777)
        except FileExistsError:
            continue
        return candidate
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


def _publish(tmp: Path, final: Path, *, force: bool) -> None:
    if not (final.exists() or final.is_symlink()) or _is_empty_dir(final):
        # rename(2) onto an empty directory replaces it atomically; onto a non-empty one it
        # fails (ENOTEMPTY/EEXIST), so an output created meanwhile is still refused.
        try:
            os.rename(tmp, final)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            if not force:
                raise OutputExistsError(errno.EEXIST, "output appeared while writing", str(final)) from exc
    elif not force:
        raise OutputExistsError(errno.EEXIST, "output already exists (use force)", str(final))
    # Replace: swap atomically where the kernel can, so `final` always names a complete
    # output; otherwise move the old one aside first (final is briefly absent, never partial).
    if _exchange(tmp, final):
        _remove(tmp)  # now holds the old output
        return
    aside = final.parent / _temp_name(final, "old")
    os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(aside, final)
        raise
    _remove(aside)


@contextmanager
def atomic_output_dir(final: Path, *, force: bool = False) -> Iterator[Path]:
    """Yield a temp dir beside ``final``; publish it as ``final`` when the body succeeds.

    Refuses (``OutputExistsError``) an existing ``final`` unless it is an empty directory or
    ``force`` is set, checked before any work and again at publication. With ``force`` the old
    output is swapped out atomically and deleted. On any exception, including
    ``KeyboardInterrupt``/:class:`TerminatedBySignal`, the temp dir is removed and the
    exception re-raised; ``final`` is untouched.
    """
    final = Path(final).absolute()
    if not force and (final.exists() or final.is_symlink()) and not _is_empty_dir(final):
        raise OutputExistsError(errno.EEXIST, "output already exists (use force)", str(final))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _make_temp_dir(final)
    try:
        yield tmp
        _publish(tmp, final, force=force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def cleanup_stale_temps(final: Path) -> list[Path]:
    """Remove leftovers of killed runs that targeted ``final``; return what was removed.

    Removes ``.{name}.tmp-*`` directories (unpublished outputs). Also removes
    ``.{name}.old-*`` directories (a replaced output whose deletion was interrupted), but only
    when ``final`` exists: if a run died between moving the old output aside and publishing
    the new one, the ``.old-*`` directory is the only copy and is left alone (logged).
    Symlinks and plain files matching the patterns are never touched.
    """
    final = Path(final).absolute()
    prefix = glob.escape(str(final.parent / f".{final.name}."))
    removed: list[Path] = []
    for pattern, kind in ((prefix + "tmp-*", "tmp"), (prefix + "old-*", "old")):
        for name in sorted(glob.glob(pattern)):
            path = Path(name)
            if path.is_symlink() or not path.is_dir():
                continue
            if kind == "old" and not final.exists():
                LOG.warning("%s holds a previous output and %s is missing; leaving it", path, final)
                continue
            shutil.rmtree(path)
            removed.append(path)
    return removed


def check_output_dir(out: str | Path, inputs: Mapping[str, Path | None], *, force: bool = False) -> Path:
    """The absolute output folder, after refusing one that is an input (`inputs`: what -> folder,
    None to skip), lies inside one or contains one, is not a folder, or exists and is not empty
    without `force`. Every writing command calls it before any work, so a refusal costs nothing."""
    final = Path(out).expanduser().absolute()
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
        raise OutputError(f"{out}: output already exists", hint="pass --force to replace it")
    return final


def write_text_atomic(path: Path, text: str) -> None:
    """Replace one text file by rename (from ``.{name}.tmp-{pid}`` beside it), so that a reader or an
    interruption sees the old text or the new, never half of it."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
