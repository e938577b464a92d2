"""The engine-code compatibility check (`vllm/compat.py`): every vLLM name the engine code touches
exists in a vLLM source tree, read with `ast`. It passes on the installed vLLM, fails naming the
missing name and the code that needs it on a tree built without it, takes the branch the engine
code takes (V1 runner or V2 speculator), and its list covers every vLLM import of the engine code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from eagle_convert.vllm import compat
from eagle_convert.vllm.compat_names import CPU2, NEEDS, SPEC2, V1, V1_CPU
from eagle_convert.vllm.compat_source import SourceTree
from eagle_convert.vllm_model.features import vllm_available, vllm_package_dir

ROOT = Path(__file__).resolve().parents[1]
# The engine code; the check itself (compat*.py: the list and its reader) names vLLM only as data.
ENGINE_CODE = sorted(f for f in (ROOT / "eagle_convert" / "vllm").glob("*.py") if not f.name.startswith("compat"))


def _all_names() -> set[str]:
    return {n for need in NEEDS for b in need.branches for n in b.names} | {
        b.when.lstrip("!") for need in NEEDS for b in need.branches if b.when
    }


def _build_tree(root: Path, names: set[str]) -> Path:
    """A vLLM-shaped package holding exactly ``names`` (each module a file, each class its members)."""
    modules: dict[str, dict[str, set[str]]] = {}
    for name in names:
        module, _, attr = name.partition(":")
        top, _, member = attr.partition(".")
        entry = modules.setdefault(module, {})
        if top:
            entry.setdefault(top, set())
            if member:
                entry[top].add(member)
    pkg = root / "vllm"
    for module, tops in modules.items():
        parts = module.split(".")[1:]
        for i in range(len(parts)):  # every package on the way
            (pkg.joinpath(*parts[:i])).mkdir(parents=True, exist_ok=True)
            (pkg.joinpath(*parts[:i]) / "__init__.py").touch()
        path = (
            pkg.joinpath(*parts) / "__init__.py"
            if parts and any(m.startswith(module + ".") for m in modules)
            else (pkg.joinpath(*parts).with_suffix(".py") if parts else pkg / "__init__.py")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for top, members in sorted(tops.items()):
            if members:
                lines += [f"class {top}:"] + [f"    {m} = None" for m in sorted(members)]
            else:
                lines.append(f"{top} = None")
        path.write_text("\n".join(lines) + "\n")
    (pkg / "__init__.py").touch()
    return pkg


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_the_installed_vllm_has_every_name_the_engine_code_needs(capsys: pytest.CaptureFixture[str]) -> None:
    pkg = vllm_package_dir()
    assert pkg is not None
    report = compat.check_tree(pkg)
    assert report.ok, report.text()
    assert compat.main([str(pkg)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "engine code compatible: every required name exists"


def test_a_tree_with_every_name_passes_and_one_without_a_name_fails_naming_it_and_its_user(tmp_path: Path) -> None:
    names = _all_names()
    assert compat.check_tree(_build_tree(tmp_path / "full", names)).ok
    gone = f"{SPEC2}._prefill"
    report = compat.check_tree(_build_tree(tmp_path / "cut", names - {gone}))
    assert not report.ok
    (bad,) = report.failures()
    assert bad.need.used_by == "drift_ext.DriftExtension.eagle_convert_drift_arm"
    assert bad.missing == {"Model Runner V2 (runner.speculator)": (gone,)}
    text = report.text()
    assert f"Model Runner V2 (runner.speculator) lacks {gone}" in text
    assert text.splitlines()[-1] == "engine code NOT compatible: 1 use(s) lack 1 name(s) or every branch"
    assert compat.main([str(tmp_path / "cut" / "vllm")]) == 1


def test_a_v2_only_tree_takes_the_v2_branches_and_a_tree_without_runners_fails(tmp_path: Path) -> None:
    """vLLM 0.34 has no V1 runner: its names are not needed, and the CPU accelerator no-op falls back to
    the V2 CPU patches; without any runner the drafter cannot be reached at all."""
    v1 = {n for n in _all_names() if n.startswith((V1, V1_CPU, "vllm.v1.spec_decode."))}
    report = compat.check_tree(_build_tree(tmp_path / "v2", _all_names() - v1))
    assert report.ok, report.text()
    taken = {r.need.used_by: r.taken for r in report.results}
    assert taken["runners.cpu_accelerator_noop"] == ("V2 CPU patches at import",)
    assert taken["strict_load_worker._aux_layers"] == ("Model Runner V2",)
    no_runner = {n for n in _all_names() if ".model_runner" in n or "gpu_model_runner" in n}
    bare = compat.check_tree(_build_tree(tmp_path / "none", _all_names() - no_runner - v1 - {CPU2}))
    assert "drift_ext.DriftExtension.eagle_convert_drift_arm" in {r.need.used_by for r in bare.failures()}
    assert "none of its branches applies here" in bare.text()


@pytest.mark.parametrize(
    "files, name, exists",
    [
        ({"__init__.py": "from .a import *\n", "a.py": "def f(): pass\n"}, "vllm:f", True),
        ({"__init__.py": "from .a import g as f\n", "a.py": "def g(): pass\n"}, "vllm:f", True),
        ({"__init__.py": "from .a import f\n", "a.py": "def g(): pass\n"}, "vllm:f", False),
        ({"__init__.py": "def __getattr__(name):\n    if name == 'p': return 1\n"}, "vllm:p", True),
        ({"__init__.py": "ATTRS = {'LLM': '.x:LLM'}\n"}, "vllm:LLM", True),
        ({"__init__.py": "", "a.py": "class B:\n    def __init__(self):\n        self.x = 1\n"}, "vllm.a:B.x", True),
        ({"__init__.py": "", "a.py": "class B:\n    y: int = 0\n"}, "vllm.a:B.x", False),
        (
            {
                "__init__.py": "",
                "base.py": "class Base:\n    @property\n    def x(self): ...\n",
                "a.py": "from typing import TYPE_CHECKING\nfrom vllm.base import Base\n"
                "if TYPE_CHECKING:\n    class _B: pass\nelse:\n    _B = Base\nclass C(_B): pass\n",
            },
            "vllm.a:C.x",
            True,
        ),
        ({"__init__.py": "", "sub/__init__.py": "", "sub/m.py": ""}, "vllm.sub.m", True),
        ({"__init__.py": "", "sub/__init__.py": ""}, "vllm.sub.m", False),
    ],
)
def test_names_are_found_the_way_python_would_find_them(tmp_path: Path, files: dict, name: str, exists: bool) -> None:
    for rel, text in files.items():
        (tmp_path / "vllm" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm" / rel).write_text(text)
    assert SourceTree(tmp_path / "vllm").has(name) is exists


def test_the_tree_comes_from_the_argument_vllm_src_or_the_installed_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = _build_tree(tmp_path / "wheel", _all_names())
    monkeypatch.setenv("VLLM_SRC", str(tmp_path / "wheel"))  # an unpacked wheel's root: its vllm/ is used
    assert compat.find_tree() == pkg
    assert compat.find_tree(str(pkg)) == pkg
    monkeypatch.delenv("VLLM_SRC")
    assert compat.find_tree() == vllm_package_dir()
    assert compat.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'nowhere'}: not a vLLM package folder (no __init__.py); pass the 'vllm' folder\n"


def _engine_vllm_uses(files: list[Path]) -> set[tuple[str, str, str | None]]:
    """(file, module, name) for every ``import vllm...`` / ``from vllm... import name`` and every
    ``"vllm.a.b"`` string (a module the code imports by name) in the engine code."""
    out: set[tuple[str, str, str | None]] = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vllm":
                out |= {(f.name, node.module or "", a.name) for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {(f.name, a.name, None) for a in node.names if a.name.split(".")[0] == "vllm"}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"vllm(\.\w+)+", node.value):
                    out.add((f.name, node.value, None))
    return out


def _unlisted(files: list[Path]) -> list[tuple[str, str, str | None]]:
    listed = _all_names()

    def covered(module: str, name: str | None) -> bool:
        if name is None:  # a module, or a dotted "module.function" string
            head, _, tail = module.rpartition(".")
            return module in listed or f"{head}:{tail}" in listed or module == "vllm"
        # listed itself, as a module, or through a member of it ("mod:Class.member", "mod.sub:fn")
        prefixes = (f"{module}:{name}", f"{module}.{name}")
        return any(n == p or n.startswith((f"{p}.", f"{p}:")) for n in listed for p in prefixes)

    return sorted(((f, m, n) for f, m, n in _engine_vllm_uses(files) if not covered(m, n)), key=str)


def test_every_vllm_import_of_the_engine_code_is_in_the_list(tmp_path: Path) -> None:
    assert len(_engine_vllm_uses(ENGINE_CODE)) >= 30, "the scan found too little to mean anything"
    assert _unlisted(ENGINE_CODE) == []
    new = tmp_path / "new_ext.py"  # engine code that starts using a name the list lacks
    new.write_text("def f():\n    from vllm.v1.worker.gpu.model_runner import GPUModelRunner, new_helper\n")
    assert _unlisted([new]) == [("new_ext.py", "vllm.v1.worker.gpu.model_runner", "new_helper")]
