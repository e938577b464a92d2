"""The rich console every command prints through (`cli.output.console` makes it, importing rich
only when a command draws something)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from eagle_convert.io import printable

# Spaces at the end of a line, before any closing colour codes: rich pads every table cell and grid
# column to its width, which a terminal hides and a file or CI log keeps.
_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


class SafeConsole(Console):
    """A rich console that escapes control characters in every piece of text it writes.

    Names, values and messages from a checkpoint reach the screen through tables, findings and
    progress bars; escaping at the one place rich turns segments into output covers all of them
    (with and without colour), while rich's own styling and cursor controls pass unchanged. Off a
    terminal it also drops the spaces rich pads lines with.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (seg if seg.control else Segment(printable(seg.text), seg.style, None) for seg in buffer)
        text = super()._render_buffer(safe)
        if self.is_terminal:
            return text
        # Off a terminal: no trailing spaces on a finished line (the text after the last newline may
        # continue in the next print, so it keeps its spaces).
        done, _, rest = text.rpartition("\n")
        return _TRAILING.sub(r"\1", done) + "\n" + rest if _ else text
