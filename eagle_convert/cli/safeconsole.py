"""The rich console every command prints through (`cli.output.console` makes it, importing rich
only when a command draws something)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from eagle_convert.io import printable

__all__ = ["SafeConsole"]


class SafeConsole(Console):
    """A rich console that escapes control characters in every piece of text it writes.

    Names, values and messages from a checkpoint reach the screen through tables, findings and
    progress bars; escaping at the one place rich turns segments into output covers all of them
    (with and without colour), while rich's own styling and cursor controls pass unchanged.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (seg if seg.control else Segment(printable(seg.text), seg.style, None) for seg in buffer)
        return super()._render_buffer(safe)
