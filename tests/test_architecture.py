"""The package reads in pipeline order: checked on the source with `ast`, no import executed.

Every import counts, module level, inside functions (lazy) and under TYPE_CHECKING alike: a lazy
import still makes the importer depend on the imported module. The layer table is the one of
docs/ARCHITECTURE.md; a new package needs a row here.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PKG_DIR = Path(__file__).resolve().parent.parent / "eagle_convert"

# Top-level package (or module) of eagle_convert -> layer. A module may import its own package and
# lower layers; across packages of one layer only without a cycle. `errors`, `extras` and
# `progress` are shared.
LAYERS: dict[str, int] = {
    "errors": 0,
    "extras": 0,
    "progress": 0,  # the library's progress ticks (the CLI draws them)
    "io": 1,  # bytes only
    "vllm_model": 2,  # how vLLM reads a draft: tables and rules, no I/O of its own
    "draft": 3,  # the checkpoint as a draft model: open, layout, config schema, describe
    "vllm": 4,  # running vLLM itself (its private APIs), in a subprocess
    "upgrade": 5,
    "validate": 5,
    "diff": 5,
    "reference": 6,  # the torch reference engine
    "measure": 7,  # what smoke, check, report and drift share: prompts, counters, engines, pass planning
    "smoke": 8,
    "finetune": 8,
    "check": 8,  # the pre-deployment gate: runs validate, the vLLM worker and measure's passes
    "report": 8,  # inspect, upgrade, finetune, validate and smoke of one draft, side by side, resumable
    "push": 8,  # validate, then upload a draft folder to the hub
    "cli": 9,  # click and rich
    "__main__": 9,  # `python -m eagle_convert`: the CLI
}
ROOT_LAYER = 10  # eagle_convert/__init__.py: the public API, loaded lazily
UI_MODULES = ("click", "rich")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # the eagle_convert module imported (the module a `from X import name` names)
    names: tuple[str, ...]  # names taken from it (`from X import a, b`); () for `import X`
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG_DIR.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG_DIR.rglob("*.py"))}


@cache
def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in _modules().items()}


def _resolve(module: str | None, level: int, importer: str) -> str | None:
    if level:  # relative: the package says to keep imports absolute, but resolve them anyway
        base = importer.split(".")
        is_pkg = _modules()[importer].name == "__init__.py"
        base = base[: len(base) - level + (1 if is_pkg else 0)]
        return ".".join(base + ([module] if module else []))
    return module


@cache
def _imports() -> list[Import]:
    out = []
    mods = _modules()
    for name, tree in _trees().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [Import(name, a.name, (), node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node.module, node.level, name) or ""
                for a in node.names:  # `from pkg import module` imports the module
                    sub = f"{target}.{a.name}"
                    out.append(
                        Import(name, sub if sub in mods else target, (a.name,) if sub not in mods else (), node.lineno)
                    )
    return out


def _internal() -> list[Import]:
    return [i for i in _imports() if i.target == "eagle_convert" or i.target.startswith("eagle_convert.")]


def _package(module: str) -> str:
    """The top-level package (or module) under eagle_convert; "" for eagle_convert itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    pkg = _package(module)
    return ROOT_LAYER if pkg == "" else LAYERS[pkg]


def _is_version_import(i: Import) -> bool:
    """`from eagle_convert import __version__`: a constant of the root, which imports nothing eagerly."""
    return i.target == "eagle_convert" and i.names == ("__version__",)


def _graph(key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for i in _internal():
        if _is_version_import(i) or i.target not in _modules():
            continue
        a, b = key(i.importer), key(i.target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# ------------------------------------------------------------------------------------ the rules


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in _modules()} - {""}
    assert packages == set(LAYERS), f"add to LAYERS (and docs/ARCHITECTURE.md): {sorted(packages - set(LAYERS))}"


def test_every_internal_import_names_an_existing_module() -> None:
    missing = sorted({f"{i.importer}:{i.line} -> {i.target}" for i in _internal() if i.target not in _modules()})
    assert not missing


def test_lower_layers_never_import_higher_ones() -> None:
    bad = [
        f"{i.importer}:{i.line} imports {i.target} (layer {_layer(i.importer)} -> {_layer(i.target)})"
        for i in _internal()
        if not _is_version_import(i) and _package(i.importer) and _layer(i.target) > _layer(i.importer)
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    assert not _cycles(_graph(lambda m: m))


def test_no_import_cycles_between_packages() -> None:
    assert not _cycles(_graph(_package))


def _parent(module: str) -> str:
    """The package a module belongs to (a package's __init__ belongs to the package itself)."""
    return module if _modules()[module].name == "__init__.py" else module.rpartition(".")[0]


def test_no_private_names_cross_packages() -> None:
    """`from eagle_convert.x.y import _name` (or a `_module`) only from inside package x.y's parent."""
    bad = []
    for i in _internal():
        if i.target not in _modules() or _parent(i.importer) == _parent(i.target):
            continue
        private = [n for n in i.names if n.startswith("_") and not n.startswith("__")]
        private += [p for p in i.target.split(".") if p.startswith("_") and not p.startswith("__")]
        if private:
            bad.append(f"{i.importer}:{i.line} imports {private} from {i.target}")
    # `module._name` attribute access on an imported eagle_convert module of another package.
    for name, tree in _trees().items():
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name): a.name for a in node.names if a.name.startswith("eagle_convert.")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eagle_convert"):
                aliases |= {
                    (a.asname or a.name): f"{node.module}.{a.name}"
                    for a in node.names
                    if f"{node.module}.{a.name}" in _modules()
                }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and _parent(aliases[node.value.id]) != _parent(name)
            ):
                bad.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_only_cli_imports_click_or_rich() -> None:
    bad = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in _imports()
        if i.target.split(".")[0] in UI_MODULES and _package(i.importer) != "cli"
    ]
    assert not bad, "\n".join(bad)


def _defined_names(tree: ast.Module) -> set[str]:
    """Names a module defines at top level (def, class, assignment), imports not counted."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):  # e.g. a fallback definition
            out |= _defined_names(
                ast.Module(
                    body=[n for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node], type_ignores=[]
                )
            )
    return out


def test_no_re_export_shims() -> None:
    """Every name is imported from the module that defines it, and no module passes on what it
    imports (`from x import y as y`, or `y` in its `__all__`): no shims, no facades but the root's."""
    trees = _trees()
    bad = []
    for i in _internal():
        if i.target in trees and i.target != "eagle_convert":
            bad += [
                f"{i.importer}:{i.line} imports {n} from {i.target}, which does not define it"
                for n in i.names
                if n not in _defined_names(trees[i.target])
            ]
    for name, tree in trees.items():
        exported: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                exported |= {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eagle_convert"):
                bad += [
                    f"{name}:{node.lineno} re-exports {a.name} from {node.module}"
                    for a in node.names
                    if a.name != "__version__" and (a.asname == a.name or (a.asname or a.name) in exported)
                ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "rule",
    [
        (
            "eagle_convert.io.source",
            "from eagle_convert.draft.layout import x",
            test_lower_layers_never_import_higher_ones,
        ),
        ("eagle_convert.smoke.run", "import rich", test_only_cli_imports_click_or_rich),
        (
            "eagle_convert.smoke.run",
            "from eagle_convert.cli.output import _x",
            test_lower_layers_never_import_higher_ones,
        ),
        (
            "eagle_convert.upgrade.plan",
            "from eagle_convert.validate.run import _x",
            test_no_private_names_cross_packages,
        ),
        (
            "eagle_convert.draft.layout",
            "from eagle_convert.draft.describe import x",
            test_no_import_cycles_between_modules,
        ),
        ("eagle_convert.diff", "from eagle_convert.upgrade.plan import x", test_no_import_cycles_between_packages),
        (
            "eagle_convert.io.writer",
            "from eagle_convert.io.outfile import PAGE_BYTES as PAGE_BYTES",
            test_no_re_export_shims,
        ),
    ],
    ids=["layer", "rich", "cli-from-smoke", "private", "module-cycle", "package-cycle", "shim"],
)
def test_the_rules_catch_a_violation(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rule fails when one offending import is added to a real module (so none passes vacuously)."""
    module, line, check = rule
    trees = dict(_trees())
    tree = trees[module]
    trees[module] = ast.Module(body=[*tree.body, *ast.parse(line).body], type_ignores=[])
    for fn in (_imports, _trees):
        fn.cache_clear()
    monkeypatch.setattr(sys.modules[__name__], "_trees", lambda: trees)
    try:
        with pytest.raises(AssertionError):
            check()
    finally:
        _imports.cache_clear()
