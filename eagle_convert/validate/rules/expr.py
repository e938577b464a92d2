"""Evaluate the small shape formulas and conditions of `schemas/tensors.json` safely.

The schema holds expressions like `A * T` or `use_aux and fc_norm`; they are parsed with `ast`
and only arithmetic, boolean logic, comparisons, names and constants are allowed, so the data file
can never run code. A name whose value is unknown (None) makes the whole result None, which rules
read as "cannot check" rather than as a failure.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from functools import cache
from typing import Any

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CMPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class _Unknown(Exception):
    """A name in the expression has no known value."""


@cache
def _parse(text: str) -> ast.expr:
    tree = ast.parse(text, mode="eval").body
    for node in ast.walk(tree):
        allowed = (
            ast.BoolOp,
            ast.And,
            ast.Or,
            ast.UnaryOp,
            ast.Not,
            ast.USub,
            ast.BinOp,
            ast.Compare,
            ast.Name,
            ast.Load,
            ast.Constant,
            *_BINOPS,
            *_CMPS,
        )
        if not isinstance(node, allowed):
            raise ValueError(f"schemas/tensors.json: {type(node).__name__} not allowed in {text!r}")
    return tree


def _eval(node: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ValueError(f"schemas/tensors.json: unknown symbol {node.id!r}")
        value = env[node.id]
        if value is None:
            raise _Unknown(node.id)
        return value
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            if not _CMPS[type(op)](left, right):
                return False
            left = right
        return True
    raise ValueError(f"unsupported expression node {type(node).__name__}")


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """Value of `text` under `env`, or None when it needs a symbol whose value is unknown."""
    try:
        return _eval(_parse(text), env)
    except _Unknown:
        return None
