"""The click shell: the only package that imports click or rich. `main` is the console script."""

from eagle_convert.cli.app import main

__all__ = ["main"]
