"""Does a name exist in a vLLM source tree? Answered by parsing its files with `ast`, never importing it.

A name is ``vllm.a.b`` (a module: ``a/b.py`` or ``a/b/__init__.py``), ``vllm.a.b:Name`` (defined at
the module's top level, also inside ``if``/``try``; re-exported with ``from ... import``, followed to
where it is defined; brought in by ``from .x import *``; a submodule; or served lazily by the module's
``__getattr__`` / a ``MODULE_ATTRS``-style table that names it as a string, as `vllm/__init__.py` and
`vllm/platforms/__init__.py` do), or ``vllm.a.b:Class.member`` (a method, property, class attribute,
dataclass field or ``self.member = ...`` in any method, on the class or a base class it names, bases
followed through imports). Used by `compat.py`; imports nothing from vLLM.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import cache
from pathlib import Path

_DEPTH = 12  # re-export and base-class hops followed before giving up


class SourceTree:
    """The ``vllm`` package folder of an installed or unpacked vLLM."""

    def __init__(self, package_dir: Path) -> None:
        self.root = Path(package_dir)
        self.package = self.root.name  # "vllm"
        self._parse = cache(self._parse_uncached)

    def module_file(self, module: str) -> Path | None:
        """The file of ``module`` ("vllm.a.b"), or None when the tree has none."""
        parts = module.split(".")
        if parts[0] != self.package:
            return None
        base = self.root.joinpath(*parts[1:])
        for f in (base.with_suffix(".py"), base / "__init__.py"):
            if f.is_file():
                return f
        return None

    def has(self, name: str) -> bool:
        """Whether ``name`` (``module``, ``module:Name`` or ``module:Class.member``) exists here."""
        module, _, attr = name.partition(":")
        if not attr:
            return self.module_file(module) is not None
        top, _, member = attr.partition(".")
        found = self._definitions(module, top, _DEPTH)
        if not member:
            return bool(found)
        return any(isinstance(d, tuple) and self._member(d[0], d[1], member, _DEPTH) for d in found)

    # -- top-level names -------------------------------------------------------------------------

    def _parse_uncached(self, module: str) -> ast.Module | None:
        f = self.module_file(module)
        if f is None:
            return None
        try:
            return ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            return None

    def _resolve(self, module: str, level: int, target: str | None) -> str:
        """The absolute module of ``from <level dots><target> import ...`` written in ``module``."""
        if level == 0:
            return target or ""
        f = self.module_file(module)
        package = module if f is not None and f.name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{target}" if target else package

    def _find(self, module: str, name: str, depth: int) -> tuple[str, ast.ClassDef] | bool | None:
        """Where ``name`` is defined from ``module``: ``(module, ClassDef)`` for a class, True for any
        other definition, None when it is not there. Of several definitions (``if TYPE_CHECKING:``
        stub / ``else:`` alias) a class wins."""
        found = self._definitions(module, name, depth)
        return next((d for d in found if isinstance(d, tuple)), True if found else None)

    def _definitions(self, module: str, name: str, depth: int) -> list[tuple[str, ast.ClassDef] | bool]:
        tree = self._parse(module)
        if tree is None or depth <= 0:
            return []
        out: list[tuple[str, ast.ClassDef] | bool] = []
        stars: list[str] = []
        lazy = False
        for node in _top_level(tree.body):
            if isinstance(node, ast.ClassDef) and node.name == name:
                out.append((module, node))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name == name:
                    out.append(True)
                elif node.name == "__getattr__" and _mentions(node, name):
                    lazy = True
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in _flatten(targets)):
                    alias = self._base(module, node.value, depth - 1) if node.value is not None else None
                    out.append(alias or True)  # X = SomeClass: X is that class
                elif isinstance(node.value, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == name for k in node.value.keys
                ):
                    lazy = True  # MODULE_ATTRS = {"LLM": ".entrypoints.llm:LLM", ...}
            elif isinstance(node, ast.ImportFrom):
                source = self._resolve(module, node.level, node.module)
                for a in node.names:
                    if a.name == "*":
                        stars.append(source)
                    elif (a.asname or a.name) == name:
                        found = self._find(source, a.name, depth - 1)
                        if found is not None:
                            out.append(found)
                        elif self.module_file(f"{source}.{a.name}") is not None:
                            out.append(True)  # from pkg import submodule
            elif isinstance(node, ast.Import):
                if any((a.asname or a.name.partition(".")[0]) == name for a in node.names):
                    out.append(True)
        if not out:
            for source in stars:
                found = self._find(source, name, depth - 1)
                if found is not None:
                    return [found]
            if self.module_file(f"{module}.{name}") is not None or lazy:
                return [True]  # a submodule (``import vllm.a.b`` binds it on ``vllm.a``), or served lazily
        return out

    # -- class members ---------------------------------------------------------------------------

    def _member(self, module: str, cls: ast.ClassDef, member: str, depth: int) -> bool:
        if depth <= 0:
            return False
        for node in ast.walk(cls):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == member and node in cls.body:
                return True
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in _flatten(targets):
                    if isinstance(t, ast.Name) and t.id == member and node in cls.body:
                        return True  # class attribute, dataclass or pydantic field
                    if (
                        isinstance(t, ast.Attribute)
                        and t.attr == member
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        return True  # self.member = ... in a method
        for base in cls.bases:
            for found in self._bases(module, base, depth - 1):
                if self._member(found[0], found[1], member, depth - 1):
                    return True
        return False

    def _base(self, module: str, expr: ast.expr, depth: int) -> tuple[str, ast.ClassDef] | None:
        """The class an expression names (``Name``, ``Name[...]``, ``mod.Name``), if one."""
        return next(iter(self._bases(module, expr, depth)), None)

    def _bases(self, module: str, expr: ast.expr, depth: int) -> list[tuple[str, ast.ClassDef]]:
        """Every class an expression may name (each branch of a conditional definition)."""
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            found = self._definitions(module, expr.id, depth)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            found = self._definitions(self._imported_module(module, expr.value.id), expr.attr, depth)
        else:
            return []
        return [d for d in found if isinstance(d, tuple)]

    def _imported_module(self, module: str, alias: str) -> str:
        tree = self._parse(module)
        for node in _top_level(tree.body if tree else []):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname == alias:
                        return a.name
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == alias:
                        return f"{self._resolve(module, node.level, node.module)}.{a.name}"
        return alias


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements, with those inside top-level ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            out += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _top_level(node.body) + _top_level(node.orelse) + _top_level(node.finalbody)
            for h in node.handlers:
                out += _top_level(h.body)
        elif isinstance(node, ast.With):
            out += _top_level(node.body)
        else:
            out.append(node)
    return out


def _flatten(targets: Sequence[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for t in targets:
        out += _flatten(list(t.elts)) if isinstance(t, ast.Tuple | ast.List) else [t]
    return out


def _mentions(fn: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(fn))
