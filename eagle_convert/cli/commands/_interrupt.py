"""Ctrl-C / SIGTERM during a writing command: one line, the conventional exit code, input untouched."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import click

from eagle_convert.io.atomic import TerminatedBySignal, install_signal_cleanup


def nothing_written(unchanged: object) -> str:
    """The usual tail: the atomic writer already removed its temp output, so the input is as it was."""
    return f"; nothing was written and {unchanged} is unchanged"


def exit_interrupted(ctx: click.Context, exc: KeyboardInterrupt, detail: str) -> NoReturn:
    """Report the interruption ("Error: interrupted (SIGNAL)" + `detail`) and exit 130 or the signal's code."""
    name = signal.Signals(exc.signum).name if isinstance(exc, TerminatedBySignal) else "SIGINT"
    click.echo(f"Error: interrupted ({name}){detail}", err=True)
    sys.stderr.flush()
    ctx.exit(exc.exit_code if isinstance(exc, TerminatedBySignal) else 130)


@contextmanager
def interruptible(ctx: click.Context, detail: str | Callable[[], str]) -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt for the block and exit through `exit_interrupted`;
    `detail` may be a callable when the message depends on how far the block got."""
    restore = install_signal_cleanup((signal.SIGTERM, signal.SIGHUP))
    try:
        yield
    except KeyboardInterrupt as exc:
        exit_interrupted(ctx, exc, detail() if callable(detail) else detail)
    finally:
        restore()
