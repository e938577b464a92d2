"""Ctrl-C / SIGTERM during a writing command: one line, the conventional exit code, input untouched."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

import click

from eagle_convert.io.atomic import TerminatedBySignal


def exit_interrupted(ctx: click.Context, exc: KeyboardInterrupt, unchanged: object) -> NoReturn:
    """Report the interruption (the atomic writer already removed its temp output) and exit."""
    name = signal.Signals(exc.signum).name if isinstance(exc, TerminatedBySignal) else "SIGINT"
    click.echo(f"Error: interrupted ({name}); nothing was written and {unchanged} is unchanged", err=True)
    sys.stderr.flush()
    ctx.exit(exc.exit_code if isinstance(exc, TerminatedBySignal) else 130)
