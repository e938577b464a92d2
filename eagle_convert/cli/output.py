"""Where command output goes: the stdout rich console and JSON printing, shared by every command."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from eagle_convert.cli.safeconsole import SafeConsole

__all__ = ["PIPED_WIDTH", "console", "echo_json", "output_width"]

PIPED_WIDTH = 160  # piped output without COLUMNS: wide enough that logs keep one line per row


def output_width(stream: Any = None) -> int | None:
    """Columns for stdout (or `stream`): None on a terminal (rich asks it, COLUMNS first); when
    piped, COLUMNS if it is set to a number of at least 20, else `PIPED_WIDTH`."""
    if (stream or sys.stdout).isatty():
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) >= 20 else PIPED_WIDTH


def console(*, stderr: bool = False) -> SafeConsole:
    """The stdout (or stderr) console, `output_width()` columns wide, escaping text from files.

    rich is imported here, on first use: `--help` and `--json` runs never load it."""
    from eagle_convert.cli.safeconsole import SafeConsole

    # emoji=False: a name such as `org:model:v2:` stays as written (and rich's emoji table is not loaded).
    return SafeConsole(
        soft_wrap=False, emoji=False, stderr=stderr, width=output_width(sys.stderr if stderr else sys.stdout)
    )


def echo_json(data: Any) -> None:
    """`data` as indented JSON on stdout (paths and other objects through `str`)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
