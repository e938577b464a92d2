"""The library API of `eagle_convert/__init__.py`: cheap to import, every name resolves, the example runs."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import eagle_convert

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "eagle_convert" / "__init__.py"
# What the lean import must not load: the heavy engines, the array library and the CLI toolkit.
HEAVY = ("torch", "numpy", "vllm", "transformers", "matplotlib", "click", "rich", "huggingface_hub")


def _run(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_import_is_cheap() -> None:
    proc = _run(f"import sys, eagle_convert; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"`import eagle_convert` loaded {proc.stdout.strip()}"


@pytest.mark.parametrize("name", [n for n in eagle_convert.__all__ if n != "__version__"])
def test_every_public_name_resolves_to_its_definition(name: str) -> None:
    obj = getattr(eagle_convert, name)
    module = importlib.import_module(eagle_convert._API[name])
    assert obj is getattr(module, name)
    # Defined there, not re-exported from somewhere else: the table names each name's home.
    assert inspect.getmodule(obj) is module, f"{name} is defined in {inspect.getmodule(obj).__name__}"


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        eagle_convert.nope  # noqa: B018
    assert set(eagle_convert.__all__) <= set(dir(eagle_convert))


def test_type_checking_imports_match_the_lazy_table() -> None:
    """Type checkers see the TYPE_CHECKING imports, the runtime sees `_API`: the two must agree."""
    tree = ast.parse(INIT.read_text())
    blocks = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    seen = {  # the package's own names (another block imports typing.Any for annotations)
        a.name: n.module
        for block in blocks
        for n in block.body
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("eagle_convert")
        for a in n.names
    }
    assert seen == eagle_convert._API


def test_public_names_do_not_shadow_subpackages() -> None:
    """`import eagle_convert.X.Y` sets the attribute X on the package, which would hide a function X."""
    subpackages = {p.name for p in (ROOT / "eagle_convert").iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in (ROOT / "eagle_convert").glob("*.py")}
    assert not set(eagle_convert.__all__) & (subpackages | modules)


def test_docstring_example_runs_on_a_fixture(built_fixtures, tmp_path: Path) -> None:
    """The usage example of the package docstring, verbatim but for its two paths, in a fresh process:
    it upgrades a fixture, the upgrade validates clean, the diff shows the fc_norm tensors, and the
    whole static path (inspect, upgrade, validate, diff) never imports torch."""
    doc = eagle_convert.__doc__ or ""
    match = re.search(r"::\n\n((?:    .*\n|\n)+)", doc)
    assert match, "no indented example block after '::' in eagle_convert.__doc__"
    example = "\n".join(line[4:] for line in match.group(1).splitlines())
    assert "path/to/draft" in example and "path/to/out" in example
    draft, out = built_fixtures("vllm-eagle3"), tmp_path / "eagle31"
    code = example.replace("path/to/draft", str(draft)).replace("path/to/out", str(out))
    proc = _run(
        code + "\nimport sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "EAGLE-3 LlamaForCausalLMEagle3", lines  # inspect: a Llama EAGLE-3 draft, as built
    assert lines[1] == "[]", lines  # validate: no errors in the upgrade
    assert lines[2] == str([f"fc_norm.{i}.weight" for i in range(3)]), lines  # diff: what upgrade added
    assert lines[3] == "[]", f"the static example imported torch: {lines[3]}"
    assert (out / "config.json").is_file()


FACES = sorted(f"eagle_convert.{p.name}" for p in (ROOT / "eagle_convert").iterdir() if (p / "__init__.py").is_file())


def test_package_faces_are_cheap() -> None:
    """Importing every package's face (its __init__) loads no heavy module and no module of the
    package: a face's names are imported on first use (tests/test_architecture.py checks the source)."""
    code = (
        f"import json, sys, {', '.join(FACES)}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith('eagle_convert'))))"
    ).replace("{HEAVY!r}", repr(set(HEAVY)))
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == sorted({"eagle_convert", "eagle_convert._lazy", "eagle_convert._version", *FACES})


def test_a_face_loads_a_name_from_its_home_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the lazy face (eagle_convert._lazy.attach) promises: the defining module's current object
    (a patched home is seen through the face, as through a direct import), listed by dir(), and
    AttributeError for a name the face does not offer."""
    import eagle_convert.io as face

    home = importlib.import_module("eagle_convert.io.safetensors_header")
    assert face.TensorInfo is home.TensorInfo
    monkeypatch.setattr(home, "TensorInfo", stand_in := object())
    assert face.TensorInfo is stand_in
    assert set(face.__all__) <= set(dir(face))
    with pytest.raises(AttributeError, match="module 'eagle_convert.io' has no attribute 'nope'"):
        face.nope  # noqa: B018
