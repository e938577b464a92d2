"""scripts/vllm_release.py offline, on wheel-shaped fixtures the tests build (no network, no real vLLM).

A known release 0.90.0 (its fingerprints written by `--regenerate` into a temporary data file) and a
"new" 0.91.0 wheel in which `update_eagle3`'s flag default changed, one function appeared, one
disappeared and a new file mentions eagle3: the tool names each, diffs the changed unit, exits 1,
and `--write` adds 0.91.0's fingerprints. An unchanged release (comments only) exits 0; usage,
download and unpack errors exit 2 in one line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from eagle_convert.vllm_model import check_release

ROOT = Path(__file__).resolve().parent.parent
ALGOS = "transformers_utils/configs/speculators/algos.py"
SPEC = "config/speculative.py"
ALGOS_SRC = '''"""Speculators algorithms."""


def update_eagle3(config_dict: dict, pre: dict) -> None:
    pre["fc_norm"] = config_dict.get("fc_norm", False)
    pre["norm_output"] = config_dict.get("norm_output", False)


def update_peagle(config_dict: dict, pre: dict) -> None:
    pre["parallel_drafting"] = True
'''
SPEC_SRC = "METHODS = ('eagle', 'eagle3')\n\n\ndef verify(method):\n    return method in METHODS\n"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_release", ROOT / "scripts" / "vllm_release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version(v: str) -> str:
    return f"__version__ = version = '{v}'\n__commit_id__ = commit_id = 'gabc{v[-1]}'\n"


def _files(version: str, algos: str = ALGOS_SRC, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"_version.py": _version(version), ALGOS: algos, SPEC: SPEC_SRC, "__init__.py": "", **(extra or {})}


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in files.items():
            zf.writestr(f"vllm/{rel}", text)
        zf.writestr("vllm-x.dist-info/METADATA", "Name: vllm\n")
    return path


@pytest.fixture
def known(tmp_path: Path, tool: ModuleType) -> Path:
    """A data file that knows 0.90.0: its deciding files (algos.py, speculative.py) fingerprinted."""
    tree = tmp_path / "trees" / "0.90.0"
    for rel, text in _files("0.90.0").items():
        if rel != "__init__.py":
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
    data = tmp_path / "fingerprints.json"
    assert tool.main(["--regenerate", str(tmp_path / "trees"), "--data", str(data)]) == 0
    assert tool.main(["--regenerate", str(tmp_path / "trees"), "--data", str(data), "--check"]) == 0
    return data


MOVED = ALGOS_SRC.replace('config_dict.get("fc_norm", False)', 'config_dict.get("fc_norm", True)').replace(
    'def update_peagle(config_dict: dict, pre: dict) -> None:\n    pre["parallel_drafting"] = True\n',
    "def update_dflash(config_dict: dict, pre: dict) -> None:\n    pass\n",
)


def test_a_moved_release_names_each_unit_and_diffs_it(tmp_path: Path, tool: ModuleType, known: Path, capsys) -> None:
    old = _wheel(tmp_path / "vllm-0.90.0-py3-none-any.whl", _files("0.90.0"))
    new_files = _files("0.91.0", MOVED, {"v1/spec_decode/eagle3_new.py": "def draft_eagle3():\n    pass\n"})
    new = _wheel(tmp_path / "vllm-0.91.0-py3-none-any.whl", new_files)
    args = ["0.91.0", "--wheel", str(new), "--against-wheel", str(old), "--data", str(known), "--no-compat"]
    assert tool.main(args) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        "vLLM 0.91.0 (vLLM 0.91.0 wheel (vllm-0.91.0-py3-none-any.whl)) against 0.90.0: 2 deciding files, 4 units\n"
        f"changed (1):\n  {ALGOS}::update_eagle3\n"
        f"    --- 0.90.0/{ALGOS}::update_eagle3\n    +++ 0.91.0/{ALGOS}::update_eagle3\n"
    )
    assert '    -    pre["fc_norm"] = config_dict.get("fc_norm", False)\n' in out
    assert '    +    pre["fc_norm"] = config_dict.get("fc_norm", True)\n' in out
    assert f"appeared (1):\n  {ALGOS}::update_dflash\n" in out
    assert f"disappeared (1):\n  {ALGOS}::update_peagle\n" in out
    assert "deciding files gone (0):" in out
    assert "(1): read them, --include those that decide\n  v1/spec_decode/eagle3_new.py\n" in out
    assert out.endswith("deciding code MOVED since 0.90.0\n")
    # --include widens the deciding set: the new file's units appear; --write records the release
    assert tool.main([*args, "--include", "v1/spec_decode/eagle3_new.py", "--write"]) == 1
    out = capsys.readouterr().out
    assert "v1/spec_decode/eagle3_new.py::draft_eagle3" in out and f"wrote vLLM 0.91.0's fingerprints to {known}" in out
    data = tool.load_data(known)
    assert list(data["releases"]) == ["0.90.0", "0.91.0"]
    assert data["releases"]["0.91.0"]["commit"] == "gabc0" and len(data["releases"]["0.91.0"]["files"]) == 3
    unpacked = tmp_path / "unpacked"
    tool.unpack(new, unpacked)
    assert check_release("0.91.0", unpacked / "vllm", data=data).same
    assert not check_release("0.90.0", unpacked / "vllm", data=data).same


def test_an_unmoved_release_exits_0(tmp_path: Path, tool: ModuleType, known: Path, capsys) -> None:
    cosmetic = ALGOS_SRC.replace('"""Speculators algorithms."""', '"""Reworded."""\n# a comment')
    src = tmp_path / "src" / "vllm"
    for rel, text in _files("0.91.0", cosmetic).items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    assert tool.main(["0.91.0", "--src", str(src), "--data", str(known), "--no-compat"]) == 0
    out = capsys.readouterr().out
    assert "changed (0):\nappeared (0):\ndisappeared (0):\ndeciding files gone (0):" in out
    assert out.endswith("deciding code unchanged since 0.90.0\n")
    # a deciding file gone is a move
    (src / SPEC).unlink()
    assert tool.main(["0.91.0", "--src", str(src), "--data", str(known), "--no-compat", "--no-download"]) == 1
    out = capsys.readouterr().out
    assert f"disappeared (2):\n  {SPEC}::METHODS\n  {SPEC}::verify\ndeciding files gone (1):\n  {SPEC}\n" in out


def test_the_compat_check_runs_on_the_unpacked_tree(
    tmp_path: Path, tool: ModuleType, known: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eagle_convert.vllm.compat (item 3's check) is called on the tree; a missing name fails the run."""
    wheel = _wheel(tmp_path / "vllm-0.90.0-py3-none-any.whl", _files("0.90.0"))
    seen: list[tuple[str, bool]] = []

    def check_tree(tree: Path):
        seen.append((tree.name, (tree / "_version.py").is_file()))  # the unpacked vllm/ package
        failure = SimpleNamespace(line=lambda: "MISSING  strict load: vllm.v1.worker.gpu_model_runner")
        return SimpleNamespace(ok=False, failures=lambda: [failure])

    monkeypatch.setitem(sys.modules, "eagle_convert.vllm.compat", SimpleNamespace(check_tree=check_tree))
    assert tool.main(["0.90.0", "--wheel", str(wheel), "--data", str(known)]) == 1
    out = capsys.readouterr().out
    assert seen == [("vllm", True)]
    assert "engine-code compatibility: FAILED\nMISSING  strict load: vllm.v1.worker.gpu_model_runner\n" in out
    assert out.endswith("deciding code unchanged since 0.90.0; engine code would not run\n")
    monkeypatch.setitem(sys.modules, "eagle_convert.vllm.compat", None)  # an eagle-convert without it
    assert tool.main(["0.90.0", "--wheel", str(wheel), "--data", str(known)]) == 0
    assert "engine-code compatibility: not checked (eagle_convert.vllm.compat is not in this eagle-convert)" in (
        capsys.readouterr().out
    )


def test_usage_download_and_unpack_errors_exit_2(
    tmp_path: Path, tool: ModuleType, known: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(*args: str) -> str:
        assert tool.main([*args, "--data", str(known), "--no-compat"]) == 2
        return capsys.readouterr().err

    assert (
        run("0.91.0", "--wheel", str(tmp_path / "nope.whl"))
        == f"error: --wheel {tmp_path / 'nope.whl'}: no such file\n"
    )
    (tmp_path / "bad.whl").write_text("not a zip")
    assert "bad.whl: cannot unpack" in run("0.91.0", "--wheel", str(tmp_path / "bad.whl"))
    other = _wheel(tmp_path / "other.whl", {"README": "x"})
    assert run("0.91.0", "--wheel", str(other)) == f"error: {other}: no vllm/_version.py: not a vLLM wheel\n"
    wrong = _wheel(tmp_path / "vllm-0.92.0-py3-none-any.whl", _files("0.92.0"))
    assert "_version.py says 0.92.0, not 0.91.0" in run("0.91.0", "--wheel", str(wrong))
    assert run("0.91.0", "--src", str(wrong), "--against", "0.80.0") == (
        "error: --against 0.80.0: no fingerprints of that release (known: 0.90.0)\n"
    )
    failed = SimpleNamespace(returncode=1, stderr="ERROR: No matching distribution found for vllm==0.91.0\n")
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: failed)  # no network in tests
    said, error = run("0.91.0").splitlines()
    assert said.startswith("downloading vllm 0.91.0: pip download vllm==0.91.0 --no-deps --only-binary :all: -d ")
    assert error == "error: pip download vllm==0.91.0 failed: ERROR: No matching distribution found for vllm==0.91.0"
    with pytest.raises(SystemExit) as exc:
        tool.main(["latest"])
    assert exc.value.code == 2 and "latest: not a release version such as 0.35.0" in capsys.readouterr().err


def test_the_committed_data_is_in_its_own_stored_form(tool: ModuleType) -> None:
    """What `--write` / `--regenerate` would write back from the committed file is the file itself."""
    text = tool.DATA_PATH.read_text(encoding="utf-8")
    assert tool.dump_data(tool.load_data()) == text
    assert json.loads(text)["$comment"] == tool.COMMENT
