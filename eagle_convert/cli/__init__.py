"""The click shell: the only package that imports click or rich. The console script is `cli.entry:main`."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.cli.entry import main
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "main": "eagle_convert.cli.entry",
        },
    )

__all__ = [
    "main",
]
