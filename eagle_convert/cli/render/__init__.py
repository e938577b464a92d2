"""Rich renderers for the CLI, one module per command; the library never imports these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

#: Rows one table shows before a "... N more" line: a crafted file with 200k tensors must not
#: make a table rich takes minutes to lay out (`--json` lists everything).
MAX_ROWS = 200


def capped(rows: Sequence[T], limit: int = MAX_ROWS) -> tuple[Sequence[T], str | None]:
    """The first `limit` rows, and the note for the rest (None when nothing is left out)."""
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], f"[dim]... and {len(rows) - limit:,} more (--json lists all)[/dim]"
