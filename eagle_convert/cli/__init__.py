"""The click shell: the only package that imports click or rich. The console script is `cli.entry:main`."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.cli.entry import main
else:
    __getattr__, __dir__ = attach(__name__, __file__)
