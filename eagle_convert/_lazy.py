"""Lazy package faces (PEP 562): a package's `__init__` names what other packages may use, and each
name is imported from the module that defines it on first access, so importing a face stays cheap
(no torch, numpy, vLLM, click or rich until a name that needs them is used).

A face is written as::

    from eagle_convert._lazy import TYPE_CHECKING, attach

    if TYPE_CHECKING:  # what type checkers see
        from eagle_convert.io.source import LocalSource
    else:  # what runs: name -> the module that defines it
        __getattr__, __dir__ = attach(__name__, {"LocalSource": "eagle_convert.io.source"})

    __all__ = ["LocalSource"]

tests/test_architecture.py keeps the three lists equal and every cross-package import on a face.
Layer 0: imports nothing of eagle_convert.
"""

from __future__ import annotations

import importlib
import sys

# Not `from typing import TYPE_CHECKING`: typing costs ~4 ms, and the console script imports the
# root and cli faces before it can turn a start-up Ctrl-C into one line (cli/entry.py). Faces import
# this name; type checkers read any `TYPE_CHECKING` as `typing.TYPE_CHECKING`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def attach(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of a lazy face.

    Args:
        package: the face's module name (its `__name__`).
        homes: public name -> the module that defines it.

    Returns:
        `(__getattr__, __dir__)`: the first imports a public name's module on first access and
        returns the name's current value there; the second lists the face's names, loaded or not.
        Nothing is cached in the face: `from face import name` binds what the defining module holds
        at that moment, as `from home import name` did, so patching the home (a test's monkeypatch)
        is seen by a caller that imports the name when it runs.

    Raises:
        AttributeError: (from `__getattr__`) for a name the face does not offer, as for any module.
    """

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
