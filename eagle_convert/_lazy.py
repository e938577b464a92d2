"""Lazy package faces (PEP 562): a package's `__init__` names what other packages may use, and each
name is imported from the module that defines it on first access, so importing a face stays cheap
(no torch, numpy, vLLM, click or rich until a name that needs them is used).

A face names each name once, in the imports type checkers read; the same lines are its table::

    from eagle_convert._lazy import TYPE_CHECKING, attach

    if TYPE_CHECKING:  # the face: what type checkers see, and what __getattr__ loads on first use
        from eagle_convert.io.source import LocalSource
    else:
        __getattr__, __dir__ = attach(__name__, __file__)

`__all__` is those names, in order (served by `__getattr__`). tests/test_architecture.py holds every
name to a definition in the package and every cross-package import to a face.
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


def face_table(source: str) -> dict[str, str]:
    """Name -> module from a face's `if TYPE_CHECKING:` imports (`from M import a, b as c`, parenthesised
    or not, comments allowed), in order. Plain text, not `ast`: a face is read on the CLI's start-up path."""
    with open(source, encoding="utf-8") as f:
        lines = f.read().partition("\nif TYPE_CHECKING:")[2].splitlines()[1:]
    block: list[str] = []
    for line in lines:
        if line.strip() and not line[0].isspace():
            break
        block.append(line.partition("#")[0])
    words = " ".join(block).replace("(", " ").replace(")", " ").replace(",", " ").split()
    table: dict[str, str] = {}
    module = ""
    for i, word in enumerate(words):
        if word == "from":
            module = words[i + 1]
        elif word == "import" or words[i - 1] == "from":
            continue
        elif word == "as":
            table[words[i + 1]] = table.pop(words[i - 1])
        elif i > 0 and words[i - 1] == "as":
            continue
        else:
            table[word] = module
    return table


def attach(package: str, homes: Mapping[str, str] | str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of a lazy face.

    Args:
        package: the face's module name (its `__name__`).
        homes: public name -> the module that defines it, or the face's own file (its `__file__`),
            whose `if TYPE_CHECKING:` imports are the table (read on first use).

    Returns:
        `(__getattr__, __dir__)`: the first imports a public name's module on first access and
        returns the name's current value there (`__all__`: the names, in order); the second lists
        the face's names, loaded or not. Nothing is cached in the face: `from face import name`
        binds what the defining module holds at that moment, as `from home import name` did, so
        patching the home (a test's monkeypatch) is seen by a caller that imports the name when it runs.

    Raises:
        AttributeError: (from `__getattr__`) for a name the face does not offer, as for any module.
    """
    table: dict[str, str] | None = None if isinstance(homes, str) else dict(homes)

    def names() -> dict[str, str]:
        nonlocal table
        if table is None:
            assert isinstance(homes, str)
            table = face_table(homes)
        return table

    def __getattr__(name: str) -> object:
        home = names().get(name)
        if home is None:
            if name == "__all__" and isinstance(homes, str):
                return list(names())
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names()))

    return __getattr__, __dir__
