"""Where command output goes: the stdout rich console and JSON printing, shared by every command."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console
from rich.segment import Segment

from eagle_convert.io.printable import printable

__all__ = ["PIPED_WIDTH", "SafeConsole", "console", "echo_json", "output_width"]

PIPED_WIDTH = 160  # piped output without COLUMNS: wide enough that logs keep one line per row


class SafeConsole(Console):
    """A rich console that escapes control characters in every piece of text it writes.

    Names, values and messages from a checkpoint reach the screen through tables, findings and
    progress bars; escaping at the one place rich turns segments into output covers all of them
    (with and without colour), while rich's own styling and cursor controls pass unchanged.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (seg if seg.control else Segment(printable(seg.text), seg.style, None) for seg in buffer)
        return super()._render_buffer(safe)


def output_width(stream: Any = None) -> int | None:
    """Columns for stdout (or `stream`): None on a terminal (rich asks it, COLUMNS first); when
    piped, COLUMNS if it is set to a number of at least 20, else `PIPED_WIDTH`."""
    if (stream or sys.stdout).isatty():
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) >= 20 else PIPED_WIDTH


def console(*, stderr: bool = False) -> Console:
    """The stdout (or stderr) console, `output_width()` columns wide, escaping text from files."""
    return SafeConsole(soft_wrap=False, stderr=stderr, width=output_width(sys.stderr if stderr else sys.stdout))


def echo_json(data: Any) -> None:
    """`data` as indented JSON on stdout (paths and other objects through `str`)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
