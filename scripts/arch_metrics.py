"""Size and shape of the package: the numbers the architecture issue asks for before and after.

Prints modules, lines, functions over 60 lines and the five public functions with the most
parameters. Run: python scripts/arch_metrics.py [PACKAGE_DIR]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def main(root: Path) -> None:
    modules = sorted(root.rglob("*.py"))
    lines = 0
    long_funcs: list[tuple[int, str]] = []
    n_funcs = 0
    widest: list[tuple[int, str]] = []
    for path in modules:
        text = path.read_text()
        lines += text.count("\n")
        tree = ast.parse(text)
        rel = path.relative_to(root.parent)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            n_funcs += 1
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            if span > 60:
                long_funcs.append((span, f"{rel}::{node.name}"))
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            params = [p for p in params if p.arg not in ("self", "cls")]
            if not node.name.startswith("_") and "cli" not in rel.parts:
                widest.append((len(params), f"{rel}::{node.name}"))
    print(f"modules {len(modules)}, lines {lines}, functions {n_funcs}")
    print(f"functions over 60 lines: {len(long_funcs)}")
    for span, name in sorted(long_funcs, reverse=True)[:10]:
        print(f"  {span:4d} {name}")
    print("five widest public library functions (parameters):")
    for n, name in sorted(widest, reverse=True)[:5]:
        print(f"  {n:3d} {name}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "eagle_convert"))
