"""Where command output goes: the stdout rich console and JSON printing, shared by every command."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from eagle_convert.cli.safeconsole import SafeConsole

# Piped output without COLUMNS (a file, a CI log): what reads in a log viewer or a diff without
# scrolling. Tables fit it by wrapping between words; only a value longer than a line is longer.
PIPED_WIDTH = 100


# A word (a tensor name, a path) longer than this is shown shortened with its length: a crafted
# 100,000-character tensor name would otherwise fill a thousand lines of a table. JSON keeps it whole.
LONG_WORD = 120
# Narrowest text column (a finding, a fix, a check's details) worth a table; below it they go in a list.
MIN_TEXT_COLUMN = 24
# A rich table's own width per column: one space of padding each side and one border.
COLUMN_OVERHEAD = 3


def shorten_long_words(text: str, limit: int = LONG_WORD) -> str:
    """`text` with every word over `limit` characters as its start, "…", its end and its length."""
    if len(text) <= limit:
        return text
    out = []
    for word in text.split(" "):
        if len(word) > limit:
            word = f"{word[: limit // 2]}…{word[-20:]} ({len(word):,} characters)"
        out.append(word)
    return " ".join(out)


def figure(x: float | None, fmt: str = "{:.2f}") -> str:
    """A measured figure in a table cell: "—" where none was measured."""
    return "—" if x is None else fmt.format(x)


def longest_word(texts: Iterable[str]) -> int:
    """The narrowest a column of `texts` can be without splitting a word."""
    return max((len(w) for t in texts for w in t.split()), default=0)


def output_width(stream: Any = None) -> int | None:
    """Columns for stdout (or `stream`): None on a terminal (rich asks it, COLUMNS first); when
    piped, COLUMNS if it is set to a number of at least 20, else `PIPED_WIDTH`."""
    if (stream or sys.stdout).isatty():
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) >= 20 else PIPED_WIDTH


def console(*, stderr: bool = False) -> SafeConsole:
    """The stdout (or stderr) console, `output_width()` columns wide, escaping text from files; piped,
    its lines carry no trailing spaces (`SafeConsole`). The one place every command's console is made.

    rich is imported here, on first use: `--help` and `--json` runs never load it."""
    from eagle_convert.cli.safeconsole import SafeConsole

    # emoji=False: a name such as `org:model:v2:` stays as written (and rich's emoji table is not loaded).
    # highlight=False: rich's automatic highlighter colours each number of "0.32.0" or "E101" on its own
    # and paths and quotes by guesswork; the renderers style what they mean to.
    return SafeConsole(
        soft_wrap=False,
        emoji=False,
        highlight=False,
        stderr=stderr,
        width=output_width(sys.stderr if stderr else sys.stdout),
    )


def echo_json(data: Any) -> None:
    """`data` as indented JSON on stdout (paths and other objects through `str`)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def emit_measured(
    report: Any, plot: str | None, as_json: bool, draw: Callable[[Any, str], Any], render: Callable[[Any, Any], None]
) -> None:
    """A measuring command's output (smoke, smoke --server, drift): the plot first (`draw` writes it
    atomically), then `--json` naming the plot, or the rendered tables and the plot's path."""
    from eagle_convert.cli.interrupt import on_interrupt

    if plot is not None:
        draw(report, plot)
        on_interrupt(f"; wrote only {plot}")
    if as_json:
        echo_json(report.to_dict() | ({"plot": plot} if plot is not None else {}))
        return
    render(console(), report)
    if plot is not None:
        click.echo(f"plot: {plot}")
