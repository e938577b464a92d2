"""What a writing command's interrupt line says (`cli.interrupt` prints it and exits 130/143)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def nothing_written(unchanged: object) -> str:
    """The usual tail: the atomic writer already removed its temp output, so the input is as it was."""
    return f"; nothing was written and {unchanged} is unchanged"


def output_detail(out: Path, unchanged: object, *, verified: bool = True) -> Callable[[], str]:
    """The detail of a command writing the folder `out` from `unchanged`: read when the signal comes,
    it says whether the output was published by then (`io.atomic.was_published`: the rename, its
    flush and the removal of a replaced output all done), so it is true at every point."""

    def detail() -> str:
        from eagle_convert.io import was_published

        if was_published(out):
            done = "written and verified" if verified else "written"
            return f" after {out} was {done} completely; {unchanged} is unchanged"
        return nothing_written(unchanged)

    return detail
