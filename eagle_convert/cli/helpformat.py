"""`--help` text that never splits a word: the one help formatter of every command.

click wraps an option's help with `textwrap`'s defaults, which cut a word longer than the help
column (an identifier such as `ParallelConfig.distributed_executor_backend`) at the column's edge
("P" / "arallelConfig...") and split hyphenated words. Here a long word overflows its line instead,
whole, and hyphens stay inside their words. `cli/app.py` gives every command `HelpContext`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import click
from click.formatting import iter_rows, measure_table, term_len


def wrap_words(text: str, width: int) -> list[str]:
    """`text` as lines of at most `width` columns, breaking only between words (a word longer than
    `width` gets a line of its own); blank lines separate paragraphs, as click's help keeps them."""
    wrapper = textwrap.TextWrapper(width=max(width, 10), break_long_words=False, break_on_hyphens=False)
    lines: list[str] = []
    for i, paragraph in enumerate(text.split("\n\n")):
        if i:
            lines.append("")
        lines += wrapper.wrap(paragraph.strip())
    return lines


class HelpFormatter(click.HelpFormatter):
    """click's formatter with the definition lists (options, commands) wrapped by `wrap_words`."""

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        widths = measure_table(rows)
        if len(widths) != 2:
            raise TypeError("Expected two columns for definition list")
        first_col = min(widths[0], col_max) + col_spacing
        for first, second in iter_rows(rows, len(widths)):
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if term_len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - term_len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = wrap_words(second, max(self.width - first_col - 2, 10))
            indent = " " * (first_col + self.current_indent)
            self.write("\n".join([lines[0], *(f"{indent}{line}" if line else "" for line in lines[1:])]) + "\n")


class HelpContext(click.Context):
    formatter_class = HelpFormatter
