"""`eagle-convert validate` on the command line: exit codes, messages, --json, --junit, --strict."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from fixtures.edits import drop_tensors, edit_draft, pop_config


@pytest.fixture()
def run():
    def invoke(*args: str):
        return CliRunner().invoke(main, ["validate", *map(str, args)], catch_exceptions=False)

    return invoke


@pytest.fixture()
def broken(tmp_path: Path) -> Path:
    """vllm-eagle3 without mlp.down_proj: one error, nothing else."""
    return edit_draft(tmp_path / "broken", tensors=drop_tensors("layers.0.mlp.down_proj.weight"))


@pytest.fixture()
def warned(tmp_path: Path) -> Path:
    """vllm-eagle3 without norm_before_residual: one warning (W307), no error."""
    return edit_draft(tmp_path / "warned", config=pop_config("norm_before_residual"))


def test_valid_draft_exits_0(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle31"))
    assert res.exit_code == 0
    assert res.stdout.splitlines()[-1] == "OK: 0 error(s), 0 warning(s), 0 info"


def test_errors_exit_1_and_name_code_and_tensor(run, broken: Path) -> None:
    res = run(broken)
    assert res.exit_code == 1
    assert "E101" in res.stdout and "missing-tensor" in res.stdout and "layers.0.mlp.down_proj.weight" in res.stdout
    assert res.stdout.splitlines()[-1] == "FAILED: 1 error(s), 0 warning(s), 0 info"


def test_warnings_pass_unless_strict(run, warned: Path) -> None:
    res = run(warned)
    assert res.exit_code == 0
    assert res.stdout.splitlines()[-1] == "OK: 0 error(s), 1 warning(s), 0 info"
    res = run(warned, "--strict")
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == "FAILED: 0 error(s), 1 warning(s), 0 info (--strict: warnings fail)"


def test_load_without_target_is_a_usage_error(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle3"), "--load", "vllm")
    assert res.exit_code == 2
    assert res.stderr == "Error: --load vllm needs --target: vLLM loads a draft only together with its target\n"
    assert res.stdout == ""


def test_unknown_load_engine_is_a_usage_error(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle3"), "--load", "sglang")
    assert res.exit_code == 2
    assert "Invalid value for '--load': 'sglang' is not 'vllm'." in res.stderr


def test_missing_checkpoint_exits_1(run, tmp_path: Path) -> None:
    res = run(tmp_path / "nope")
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {tmp_path / 'nope'}: no such file or folder (check the path or pass a hub repo id as org/name)\n"
    )


def test_target_without_config_exits_1(run, built_fixtures, tmp_path: Path) -> None:
    res = run(built_fixtures("vllm-eagle3"), "--target", tmp_path)
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {tmp_path}: no config.json (needed by --target) (pass the target model's folder or hub repo id)\n"
    )


def test_json_output(run, broken: Path) -> None:
    res = run(broken, "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["ok"] is False and (data["errors"], data["warnings"]) == (1, 0)
    assert data["vllm_class"] == "Eagle3LlamaForCausalLM" and data["layout"] == "vllm"
    [hit] = data["findings"]
    assert hit == {
        "code": "E101",
        "slug": "missing-tensor",
        "level": "error",
        "tensor": "layers.0.mlp.down_proj.weight",
        "field": None,
        "fix": hit["fix"],
        "impact": "loads-other-weights",
        "message": (
            "layers.0.mlp.down_proj.weight is missing: vLLM keeps uninitialised memory and loads without an error"
        ),
    }


def test_junit_file(run, broken: Path, tmp_path: Path) -> None:
    out = tmp_path / "validate.xml"
    res = run(broken, "--junit", out)
    assert res.exit_code == 1
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "2"  # the keys family and the E101 finding
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["keys checks", "E101 missing-tensor: layers.0.mlp.down_proj.weight"]
    assert {c.get("name") for c in suite.iter("testcase")} >= {"files checks", "shapes checks", "vocab checks"}


def test_junit_warnings_fail_only_when_strict(run, warned: Path, tmp_path: Path) -> None:
    out = tmp_path / "v.xml"
    run(warned, "--junit", out)
    assert ET.parse(out).getroot().get("failures") == "0"
    run(warned, "--junit", out, "--strict")
    assert ET.parse(out).getroot().get("failures") == "2"


def test_max_model_len(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle3"), "--max-model-len", "8192", "--json")
    assert res.exit_code == 0
    assert [f["code"] for f in json.loads(res.stdout)["findings"]] == ["W310"]


def test_deep_json_reports_scan(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle3-sharded"), "--deep", "--json")
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["checks"][-1] == "deep" and data["deep"]["tensors"] == 15 and data["deep"]["bytes_read"] > 0
