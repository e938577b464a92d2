"""Signals as exceptions, and sections no signal can cut in half.

SIGTERM's default action kills the process without running ``finally`` blocks, which would leave
temp folders behind; :func:`install_signal_cleanup` makes it raise :class:`TerminatedBySignal`
instead. :func:`deferred_signals` holds SIGINT/SIGTERM/SIGHUP back while a few steps run that must
happen together or not at all (create a temp folder and register it for cleanup; publish an
output and delete the one it replaced), then delivers the held signal as it would have been.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: The signals a user or a supervisor sends to stop a run (Ctrl-C, `kill`, a closed terminal).
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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

    A signal whose disposition is "ignore" stays ignored (``nohup`` sets SIGHUP so, a background
    job SIGINT). Must be called from the main thread. Returns a function restoring the previous
    handlers.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise TerminatedBySignal(signum)

    previous: dict[int, Any] = {}
    swap_handlers(signums, lambda _s: handler, previous)
    return lambda: restore_handlers(previous)


def swap_handlers(signums: Iterable[int], handler_for: Callable[[int], Any], previous: dict[int, Any]) -> None:
    """Install `handler_for(s)` for each of `signums` whose disposition is not "ignore".

    Each signal's previous handler goes into `previous` before its own is swapped, so that
    `restore_handlers(previous)` undoes exactly what was done, even after a failure part-way.
    """
    for s in signums:
        if s in previous:
            continue
        h = signal.getsignal(s)
        previous[s] = h
        if h is not signal.SIG_IGN:
            signal.signal(s, handler_for(s))


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers `swap_handlers` recorded (one Python did not install: the default)."""
    for s, h in previous.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)


def _deliver(signum: int, handler: Any) -> None:
    """Act on a held signal as `handler` (the disposition it arrived under) would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the default action: for these three, the process ends


@contextmanager
def deferred_signals(signums: Iterable[int] = INTERRUPT_SIGNALS) -> Iterator[None]:
    """Hold `signums` back for the block; on leaving it, deliver the first one that arrived through
    the handler it would have met (so a SIGTERM still raises :class:`TerminatedBySignal` where
    :func:`install_signal_cleanup` is active, a SIGINT raises ``KeyboardInterrupt``).

    Outside the main thread (where Python runs no signal handlers) the block just runs. Keep the
    block short: a user's Ctrl-C waits for it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous: dict[int, Any] = {}
    try:
        swap_handlers(signums, lambda _s: hold, previous)
        yield
    finally:
        restore_handlers(previous)
        if held:
            _deliver(held[0], previous.get(held[0]))
