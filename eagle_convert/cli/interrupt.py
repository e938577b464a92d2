"""One interrupt path for every command: the message says what was and was not written, truly.

`cli.app._Group.invoke` runs every command inside `raising_signals()` (SIGINT raises
`KeyboardInterrupt`, SIGTERM and SIGHUP raise `io.signals.TerminatedBySignal`, so every
`finally` and the atomic writer's cleanup run) and turns the interruption into one line,

    Error: interrupted (SIGTERM); nothing was written and ckpt is unchanged

and the conventional exit status: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP. The text after
the signal's name is the command's *detail*, registered with `on_interrupt` and read only when
the interrupt happens, so it can look at what is true by then (`io.atomic.was_published`). Outside
a command (start-up, after it returned) `cli.entry` prints the same line with the last detail.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from eagle_convert.io import INTERRUPT_SIGNALS, TerminatedBySignal, restore_handlers, swap_handlers

NOTHING_WRITTEN = "; nothing was written"
_detail: list[Callable[[], str]] = [lambda: NOTHING_WRITTEN]


def on_interrupt(detail: str | Callable[[], str]) -> None:
    """Set what the interrupt line says after the signal's name (a callable is read at that moment)."""
    _detail[0] = detail if callable(detail) else (lambda: detail)


def output_detail(out: Path, unchanged: object, *, verified: bool = True) -> Callable[[], str]:
    """The detail of a command writing the folder `out` from `unchanged`: read when the signal comes,
    it says whether the output was published by then (`io.atomic.was_published`: the rename, its
    flush and the removal of a replaced output all done), so it is true at every point."""

    def detail() -> str:
        from eagle_convert.io import was_published

        if was_published(out):
            done = "written and verified" if verified else "written"
            return f" after {out} was {done} completely; {unchanged} is unchanged"
        return f"{NOTHING_WRITTEN} and {unchanged} is unchanged"  # the atomic writer removed its temp output

    return detail


def current_detail() -> str:
    """The registered detail now; an error computing it must not hide the interruption."""
    try:
        return _detail[0]()
    except Exception:
        return ""


def _signum(exc: KeyboardInterrupt) -> int:
    return exc.signum if isinstance(exc, TerminatedBySignal) else signal.SIGINT


def interrupt_exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number: 130 for Ctrl-C (a plain KeyboardInterrupt), 143 for SIGTERM."""
    return 128 + _signum(exc)


def interrupt_message(exc: KeyboardInterrupt) -> str:
    """`Error: interrupted (SIGNAL)` + the current detail."""
    return f"Error: interrupted ({signal.Signals(_signum(exc)).name}){current_detail()}"


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise TerminatedBySignal(signum)


@contextmanager
def raising_signals() -> Iterator[None]:
    """For the block: SIGINT raises KeyboardInterrupt, SIGTERM/SIGHUP raise TerminatedBySignal
    (ignored signals stay ignored); the detail starts as "nothing was written". Restores the
    previous handlers after. Outside the main thread only the detail is reset."""
    on_interrupt(NOTHING_WRITTEN)
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    try:
        swap_handlers(
            INTERRUPT_SIGNALS,
            lambda s: signal.default_int_handler if s == signal.SIGINT else _raise_terminated,
            previous,
        )
        yield
    finally:
        restore_handlers(previous)
