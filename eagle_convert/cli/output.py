"""Where command output goes: the stdout rich console and JSON printing, shared by every command."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

__all__ = ["console", "echo_json"]


def console() -> Console:
    """The stdout console: terminal width on a tty, 160 columns when piped (no wrapping surprises)."""
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def echo_json(data: Any) -> None:
    """`data` as indented JSON on stdout (paths and other objects through `str`)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
