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

from eagle_convert._lazy import face_table

PKG_DIR = Path(__file__).resolve().parent.parent / "eagle_convert"

# Top-level package (or module) of eagle_convert -> layer. A module may import its own package and
# lower layers; across packages of one layer only without a cycle. `errors`, `extras` and
# `progress` are shared.
LAYERS: dict[str, int] = {
    "_version": 0,  # __version__: a constant, imports nothing
    "_lazy": 0,  # attach(): the lazy __getattr__ of every package face
    "errors": 0,
    "extras": 0,
    "progress": 0,  # the library's progress ticks (the CLI draws them)
    "optionspec": 0,  # option-object fields carrying their CLI facts (cli/options.py makes the click options)
    "jsonable": 0,  # result dataclasses whose fields carry their JSON spelling: to_dict and readers derived
    "io": 1,  # bytes only
    "vllm_model": 2,  # how vLLM reads a draft: tables and rules, no I/O of its own
    "engines": 2,  # how SGLang and TensorRT-LLM read a draft (rules as data per release); --for ENGINE
    "draft": 3,  # the checkpoint as a draft model: open, layout, config schema, describe
    "vllm": 4,  # running vLLM itself (its private APIs), in a subprocess
    "upgrade": 5,
    "validate": 5,
    "diff": 5,
    "served_diff": 5,  # two drafts compared as vLLM serves them (on diff.py's tensor comparison)
    "reference": 6,  # the torch reference engine
    "cache": 6,  # the capture cache: aux states and logits from vLLM or the reference target, read back for training
    "measure": 7,  # smoke's run and plots, and what check, report and drift share: prompts, counters, engines, passes
    "served": 8,  # acceptance and per-user speedup of running servers (smoke --server, check's serve stage)
    "drift": 8,  # attention drift by draft depth: the reference loop with the drafter's observer
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


def _graph(key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for i in _internal():
        if i.target not in _modules():
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
        if _package(i.importer) and _layer(i.target) > _layer(i.importer)
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    assert not _cycles(_graph(lambda m: m))


def test_no_import_cycles_between_packages() -> None:
    assert not _cycles(_graph(_package))


def _parent(module: str) -> str:
    """The package a module belongs to (a package's __init__ belongs to the package itself)."""
    return module if _modules()[module].name == "__init__.py" else module.rpartition(".")[0]


def _private_owner(module: str) -> str | None:
    """The package a private module (`pkg._m`, or anything under it) belongs to; None if public."""
    parts = module.split(".")
    private = [k for k, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
    return ".".join(parts[: private[0]]) if private else None


def test_no_private_names_cross_packages() -> None:
    """`from eagle_convert.x.y import _name` only from inside package x.y's parent; a private module
    `pkg._m` only from inside `pkg` (eagle_convert's own `_version` and `_lazy`: from anywhere)."""
    bad = []
    for i in _internal():
        owner = _private_owner(i.target)
        if owner is not None and not (i.importer == owner or i.importer.startswith(owner + ".")):
            bad.append(f"{i.importer}:{i.line} imports the private module {i.target}")
        if i.target in _modules() and _parent(i.importer) != _parent(i.target):
            private = [n for n in i.names if n.startswith("_") and not n.startswith("__")]
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


def _is_init(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


def test_re_exports_only_in_a_package_init() -> None:
    """Every name is imported from the module that defines it or from a package's face, and only a
    package's `__init__` passes on what it imports (`from x import y as y`, or `y` in its `__all__`)."""
    trees = _trees()
    bad = []
    for i in _internal():
        if i.target in trees and i.target != "eagle_convert" and not (_is_init(i.target) and _face(i.target).lazy):
            bad += [
                f"{i.importer}:{i.line} imports {n} from {i.target}, which does not define it"
                for n in i.names
                if n not in _defined_names(trees[i.target])
            ]
    for name, tree in trees.items():
        if _is_init(name):
            continue
        exported = set(_face(name).exported)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eagle_convert"):
                bad += [
                    f"{name}:{node.lineno} re-exports {a.name} from {node.module}"
                    for a in node.names
                    if a.asname == a.name or (a.asname or a.name) in exported
                ]
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------------ the faces

# Packages whose face is enforced (every package, in layer order): an import of them from another
# package names the face and a name in its `__all__` (`from eagle_convert.io import TensorInfo`). A
# new package starts with a face.
FACED = {
    "io",
    "vllm_model",
    "engines",
    "draft",
    "vllm",
    "validate",
    "upgrade",
    "reference",
    "cache",
    "measure",
    "served",
    "drift",
    "finetune",
    "check",
    "report",
    "cli",
}
FACE_RUNTIME_IMPORTS = {"__future__", "eagle_convert._lazy"}  # all a face imports when loaded (not even typing)


def _packages() -> set[str]:
    """eagle_convert's sub-packages (folders; a single module such as diff.py is its own face)."""
    return {_package(m) for m, p in _modules().items() if p.name == "__init__.py" and m.count(".") == 1}


@dataclass(frozen=True)
class Face:
    exported: tuple[str, ...]  # __all__ (a face whose table is its own file: the names it imports)
    typed: dict[str, str]  # name -> module, of the imports under `if TYPE_CHECKING:` (for type checkers)
    lazy: dict[str, str]  # name -> module, of the table `attach()` reads (what runs: `_lazy.face_table`)
    eager: tuple[str, ...]  # the modules imported when the face is imported


def _face(module: str) -> Face:
    exported: tuple[str, ...] = ()
    typed: dict[str, str] = {}
    lazy: dict[str, str] = {}
    eager: list[str] = []
    for node in _trees()[module].body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            exported = tuple(e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant))
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            typed |= {a.name: n.module or "" for n in node.body if isinstance(n, ast.ImportFrom) for a in n.names}
            for n in ast.walk(ast.Module(body=node.orelse, type_ignores=[])):
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "attach" and len(n.args) == 2:
                    table = n.args[1]
                    if isinstance(table, ast.Dict):
                        lazy |= {
                            getattr(k, "value", ""): getattr(v, "value", "") for k, v in zip(table.keys, table.values)
                        }
                    elif getattr(table, "id", None) == "__file__":  # the imports above are the table
                        lazy |= face_table(str(_modules()[module]))
                        exported = exported or tuple(lazy)
        elif isinstance(node, ast.Import):
            eager += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            eager.append(_resolve(node.module, node.level, module) or "")
    return Face(exported, typed, lazy, tuple(eager))


def test_every_package_has_a_face() -> None:
    assert FACED == _packages(), sorted(_packages() ^ FACED)


def test_faces_are_lazy_and_name_their_own_definitions() -> None:
    """A face's `__all__`, its TYPE_CHECKING imports and its `attach()` table name the same names,
    each defined in a module of the package itself (not a sub-module's name: the import system would
    replace the value with the module); loading a face imports only `_lazy`."""
    bad = []
    for pkg in sorted(FACED):
        face_module = f"eagle_convert.{pkg}"
        face = _face(face_module)
        if not face.exported:
            bad.append(f"{face_module}: no __all__")
        if len(set(face.exported)) != len(face.exported):
            bad.append(f"{face_module}: __all__ names a name twice")
        if set(face.exported) != set(face.typed) or face.typed != face.lazy:
            diff = sorted(set(face.exported) ^ set(face.typed) | set(face.typed.items()) ^ set(face.lazy.items()))
            bad.append(f"{face_module}: __all__, the TYPE_CHECKING imports and attach()'s table differ: {diff}")
        for name, home in face.lazy.items():
            if not home.startswith(face_module + ".") or home not in _modules():
                bad.append(f"{face_module}: {name} from {home}, not a module of {face_module}")
            elif name not in _defined_names(_trees()[home]):
                bad.append(f"{face_module}: {name} is not defined in {home}")
            if f"{face_module}.{name}" in _modules():
                bad.append(f"{face_module}: {name} is also a sub-module's name")
        bad += [f"{face_module} imports {m} when loaded" for m in face.eager if m not in FACE_RUNTIME_IMPORTS]
    assert not bad, "\n".join(bad)


def test_cross_package_imports_name_a_face() -> None:
    """From another package, `from eagle_convert.B import name` with `name` in B's `__all__`; never a
    module of B. eagle_convert's own table (the public API) names each name's home instead."""
    bad = []
    for i in _internal():
        src, dst = _package(i.importer), _package(i.target)
        if src in ("", dst) or dst not in FACED:
            continue
        face_module = f"eagle_convert.{dst}"
        if i.target != face_module or not i.names:
            what = ", ".join(i.names) or "the module"
            bad.append(f"{i.importer}:{i.line} imports {what} from {i.target}: import it from {face_module}")
        else:
            missing = [n for n in i.names if n not in _face(face_module).exported]
            if missing:
                bad.append(f"{i.importer}:{i.line} imports {missing} from {face_module}, not in its __all__")
    assert not bad, "\n".join(bad)


def test_imports_inside_a_package_stay_direct() -> None:
    """A module never imports its own package's face (it would import itself through it)."""
    bad = [
        f"{i.importer}:{i.line} imports {i.names} from its own face {i.target}"
        for i in _internal()
        if i.importer != i.target and i.target == f"eagle_convert.{_package(i.importer)}"
    ]
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------- one reading of each fact

# config.json is parsed only by io's bounded reader and draft's readers (`open_checkpoint`, `Target`);
# vllm_model reads the parsed dict and parses none. Any other package asks them.
CONFIG_PARSERS = {"io", "draft", "vllm_model"}
CONFIG_NAMES = {"config.json", "CONFIG_FNAME"}
# A speculators config's inner `transformer_layer_config` and the `d2t` map are looked up (a subscript
# read, `.get`, `in`, `==`) only where vLLM's reading of them lives (vllm_model) and in describe
# (draft: `inner_config`, `DraftInfo.disk_name`); others ask them. reference/ keeps d2t as its torch
# module's own buffer (its state dict, not the checkpoint's); validate's rules judge how vLLM loads the
# d2t tensor, by the vLLM names its Context maps from describe's canonical names.
FACT_HOMES = {
    "transformer_layer_config": {"vllm_model", "draft"},
    "d2t": {"vllm_model", "draft", "reference", "validate"},
}


def _names_config(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Constant) and n.value in CONFIG_NAMES) or (isinstance(n, ast.Name) and n.id in CONFIG_NAMES)
        for n in ast.walk(node)
    )


def _config_parses(tree: ast.Module) -> list[int]:
    """Lines of `json.load(s)(...)` calls whose argument names config.json."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("load", "loads")
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "json"
        and any(_names_config(a) for a in n.args)
    ]


def _lookups(tree: ast.Module, key: str) -> list[int]:
    """Lines that look `key` up: `x[key]` read, `x.get(key)`, `key in x`, `x == key` / `x != key`."""
    out = []
    for n in ast.walk(tree):
        is_key = lambda v: isinstance(v, ast.Constant) and v.value == key  # noqa: E731
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and is_key(n.slice):
            out.append(n.lineno)
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "get" and n.args and is_key(n.args[0]):
            out.append(n.lineno)
        elif isinstance(n, ast.Compare) and any(is_key(v) for v in (n.left, *n.comparators)):
            out.append(n.lineno)
        elif isinstance(n, ast.Compare) and any(
            isinstance(c, (ast.Tuple, ast.List, ast.Set)) and any(is_key(e) for e in c.elts) for c in n.comparators
        ):
            out.append(n.lineno)
    return out


def test_config_json_is_parsed_only_by_its_readers() -> None:
    bad = [
        f"{name}:{line} parses config.json: open it with draft.open_checkpoint / Target (or io.read_json)"
        for name, tree in _trees().items()
        if _package(name) not in CONFIG_PARSERS
        for line in _config_parses(tree)
    ]
    assert not bad, "\n".join(bad)


def test_speculators_and_vocabulary_facts_are_read_in_their_homes() -> None:
    bad = [
        f"{name}:{line} looks up {key!r}: ask {' or '.join(sorted(homes))} (read_config, describe)"
        for key, homes in FACT_HOMES.items()
        for name, tree in _trees().items()
        if _package(name) not in homes
        for line in _lookups(tree, key)
    ]
    assert not bad, "\n".join(bad)


# One folder resolver: whether a folder holds a checkpoint (config.json in it) is tested only in draft
# (`local_checkpoint`, `local_folder`, the checkpoint reader); other packages ask them.
FOLDER_RESOLVERS = {"draft"}
PATH_TESTS = {"is_file", "exists"}


def _config_tests(tree: ast.Module) -> list[int]:
    """Lines of `(folder / "config.json").is_file()` / `.exists()` calls."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in PATH_TESTS
        and _names_config(n.func.value)
    ]


def test_only_draft_tests_a_folder_for_config_json() -> None:
    bad = [
        f"{name}:{line} tests a folder for config.json: resolve it with draft.local_checkpoint (or local_folder)"
        for name, tree in _trees().items()
        if _package(name) not in FOLDER_RESOLVERS
        for line in _config_tests(tree)
    ]
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------- the release, decided once

# The release a verdict is for is resolved once, at each command's library entry, and passed down
# explicitly (issue 32): the two ambient resolvers, `installed_status()` (a named release too) and
# `default_release()` (its rules), are called only in these modules.
AMBIENT_RELEASE = ("installed_status", "default_release")
RELEASE_ENTRIES = {
    "eagle_convert.vllm_model.versions": "defines both; `default_release` is the one ambient default",
    "eagle_convert.validate.run": "validate_checkpoint: validate's entry for one release (check passes its own)",
    "eagle_convert.validate.entry": "run_validate: the matrix's default release",
    "eagle_convert.check.run": "run_check: the release checked and the one the engine stages run",
    "eagle_convert.draft.inspect": "inspect_checkpoint: inspect's entry",
    "eagle_convert.engines.select": "engine_status: the --for resolver the entries call (vLLM's branch)",
    "eagle_convert.upgrade.run": "upgrade's entry (`_open`, which plan_upgrade_draft and upgrade_draft call)",
    "eagle_convert.finetune.plan": "finetune's entry: the release travels in the plan",
    "eagle_convert.finetune.capture": "capture's entry, when its caller passed no release",
    "eagle_convert.measure.smoke": "run_smoke, when its caller passed no release",
    "eagle_convert.cli.commands.smoke": "smoke resolves its options before run_smoke, with the same release",
    "eagle_convert.report.run": "run_report: report's entry",
    "eagle_convert.drift.run": "drift's entry",
    "eagle_convert.served_diff": "served-diff's entry, when its caller passed no release",
}


def _calls(tree: ast.Module, name: str) -> list[int]:
    """Lines that call `name(...)` or `x.name(...)`."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and name in (getattr(n.func, "id", None), getattr(n.func, "attr", None))
    ]


def test_the_release_is_resolved_only_at_command_entries() -> None:
    trees = _trees()
    stale = [f"{name}: listed in RELEASE_ENTRIES, no such module" for name in RELEASE_ENTRIES if name not in trees]
    bad = stale + [
        f"{name}:{line} calls {call}(): take the release the command's entry resolved as an argument"
        for name, tree in trees.items()
        if name not in RELEASE_ENTRIES
        for call in AMBIENT_RELEASE
        for line in _calls(tree, call)
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
        ("eagle_convert.measure.smoke", "import rich", test_only_cli_imports_click_or_rich),
        (
            "eagle_convert.measure.smoke",
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
            "from eagle_convert.draft.info import x",
            test_no_import_cycles_between_modules,
        ),
        ("eagle_convert.diff", "from eagle_convert.upgrade.plan import x", test_no_import_cycles_between_packages),
        (
            "eagle_convert.io.writer",
            "from eagle_convert.io.outfile import PAGE_BYTES as PAGE_BYTES",
            test_re_exports_only_in_a_package_init,
        ),
        (
            "eagle_convert.draft.checkpoint",
            "from eagle_convert.io.source import x",
            test_cross_package_imports_name_a_face,
        ),
        ("eagle_convert.draft.checkpoint", "from eagle_convert.io import x", test_cross_package_imports_name_a_face),
        ("eagle_convert.draft.checkpoint", "import eagle_convert.io.source", test_cross_package_imports_name_a_face),
        (
            "eagle_convert.io.source",
            "from eagle_convert.io import LocalSource",
            test_imports_inside_a_package_stay_direct,
        ),
        ("eagle_convert.io", "import json", test_faces_are_lazy_and_name_their_own_definitions),
        ("eagle_convert.io", "__all__ = ['nope']", test_faces_are_lazy_and_name_their_own_definitions),
        (
            "eagle_convert.upgrade.plan",
            "from eagle_convert.validate._x import y",
            test_no_private_names_cross_packages,
        ),
        (
            "eagle_convert.cache.capture",
            "x = json.loads(p / 'config.json')",
            test_config_json_is_parsed_only_by_its_readers,
        ),
        (
            "eagle_convert.cache.capture",
            "x = cfg.get('transformer_layer_config')",
            test_speculators_and_vocabulary_facts_are_read_in_their_homes,
        ),
        (
            "eagle_convert.cache.capture",
            "x = t == 'd2t'",
            test_speculators_and_vocabulary_facts_are_read_in_their_homes,
        ),
        (
            "eagle_convert.push",
            "x = (path / 'config.json').is_file()",
            test_only_draft_tests_a_folder_for_config_json,
        ),
        (
            "eagle_convert.measure.options",
            "x = installed_status().rules",
            test_the_release_is_resolved_only_at_command_entries,
        ),
        (
            "eagle_convert.report.measure",
            "x = default_release()",
            test_the_release_is_resolved_only_at_command_entries,
        ),
    ],
    ids=[
        "layer",
        "rich",
        "cli-from-smoke",
        "private",
        "module-cycle",
        "package-cycle",
        "shim",
        "deep-import",
        "not-in-face",
        "module-import",
        "own-face",
        "eager-face",
        "face-lists-differ",
        "private-module",
        "config-json",
        "inner-config",
        "d2t",
        "folder-resolver",
        "installed-status",
        "default-release",
    ],
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
