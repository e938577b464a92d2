"""Where command output goes: the stdout rich console and JSON printing, shared by every command."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
from rich.console import Console

__all__ = ["PIPED_WIDTH", "console", "echo_json", "output_width"]

PIPED_WIDTH = 160  # piped output without COLUMNS: wide enough that logs keep one line per row


def output_width() -> int | None:
    """Columns for stdout: None on a terminal (rich asks it, COLUMNS first); when piped, COLUMNS
    if it is set to a number of at least 20, else `PIPED_WIDTH`."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) >= 20 else PIPED_WIDTH


def console() -> Console:
    """The stdout console, `output_width()` columns wide."""
    return Console(soft_wrap=False, width=output_width())


def echo_json(data: Any) -> None:
    """`data` as indented JSON on stdout (paths and other objects through `str`)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
