"""`--for ENGINE[==VERSION]` on validate and check: exact messages and exit codes, the JSON against its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.vllm_model import KNOWN_RELEASES
from fixtures.edits import edit_draft
from tests.jsonschemas import check_schema as validate_json


def _fixed(tmp_path: Path) -> Path:
    """vLLM and SGLang serve it as trained (eagle_config holds SGLang's id - 1); TRT-LLM needs its YAML."""
    return edit_draft(
        tmp_path / "d", config=lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3, 4])
    )


def _run(*args: str):
    return CliRunner().invoke(main, ["validate", *args])


def test_unknown_engine_is_a_usage_error(tmp_path: Path) -> None:
    res = _run(str(_fixed(tmp_path)), "--for", "tgi")
    assert res.exit_code == 2
    assert res.stderr == "Error: --for tgi: unknown engine 'tgi' (name one of: vllm, sglang, trtllm, or all)\n"
    res = CliRunner().invoke(main, ["check", str(_fixed(tmp_path)), "--for", "all"])
    assert res.exit_code == 2
    assert res.stderr == (
        "Error: --for all: check gates one engine release (name one: --for vllm[==X.Y.Z], --for sglang or "
        "--for trtllm (the matrix is validate --for all))\n"
    )


def test_one_engine_exit_codes_and_json(tmp_path: Path) -> None:
    fixed = _fixed(tmp_path)
    ok = _run(str(fixed), "--for", "sglang", "--json")
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    validate_json(data, "validate-report.schema.json")
    assert data["for"]["engine"] == "sglang" and data["for"]["release"] == "0.5.23" and data["findings"] == []
    mirrored = edit_draft(tmp_path / "m")  # the old W320 advice: top-level ids copied into eagle_config
    bad = _run(str(mirrored), "--for", "sglang", "--json")
    assert bad.exit_code == 1
    assert [f["code"] for f in json.loads(bad.stdout)["findings"]] == ["E335"]
    text = " ".join(_run(str(mirrored), "--for", "sglang").stdout.split())
    assert "engine SGLang 0.5.23 (SGLang is not installed: the newest known release)" in text
    trt = _run(str(fixed), "--for", "trtllm")  # a warning only: exit 0, 1 with --strict
    assert trt.exit_code == 0
    assert _run(str(fixed), "--for", "trtllm", "--strict").exit_code == 1


def test_unknown_release_fails_unverified(tmp_path: Path) -> None:
    res = _run(str(_fixed(tmp_path)), "--for", "sglang==0.6.0", "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert [(f["code"], f["impact"]) for f in data["findings"]] == [("E707", "unverified")]
    assert data["for"]["outside_known_releases"] is True and data["for"]["verified"] is False


def test_vllm_version_is_a_spelling_of_for_vllm(tmp_path: Path) -> None:
    fixed = _fixed(tmp_path)
    a = json.loads(_run(str(fixed), "--vllm-version", "0.30.0", "--json").stdout)
    b = json.loads(_run(str(fixed), "--for", "vllm==0.30.0", "--json").stdout)
    assert a["vllm"]["release"] == b["vllm"]["release"] == "0.30.0"
    assert a["findings"] == b["findings"] and b["for"] is None


def test_for_all_is_the_matrix_with_every_engine(tmp_path: Path) -> None:
    res = _run(str(_fixed(tmp_path)), "--for", "all", "--json")
    assert res.exit_code == 0, res.output  # TRT-LLM's W334 is a warning
    data = json.loads(res.stdout)
    validate_json(data, "validate-matrix.schema.json")
    rows = [(r["engine"], r["release"], r["verdict"]) for r in data["matrix"]]
    assert rows[: len(KNOWN_RELEASES)] == [("vllm", v, "served as trained") for v in KNOWN_RELEASES]
    assert rows[len(KNOWN_RELEASES) :] == [
        ("sglang", "0.5.23", "served as trained"),
        ("trtllm", "main@00679c6", "served differently"),
    ]
    assert data["summary"] == (
        "every known vLLM release (0.21.0-0.34.0) serves it as trained; SGLang 0.5.23 serves it as trained; "
        "TensorRT-LLM main@00679c6 serves it differently (W334)"
    )
    assert _run(str(_fixed(tmp_path)), "--for", "all", "--strict").exit_code == 1  # the TRT-LLM row gates too


def test_repeated_for_rows_and_gate(tmp_path: Path) -> None:
    mirrored = edit_draft(tmp_path / "m")
    res = _run(str(mirrored), "--for", "vllm==0.33.0", "--for", "sglang", "--json")
    assert res.exit_code == 1  # SGLang's E335 fails although vLLM 0.33.0 serves it as trained
    data = json.loads(res.stdout)
    assert [(r["engine"], r["release"], r["verdict"]) for r in data["matrix"]] == [
        ("vllm", "0.33.0", "served as trained"),
        ("sglang", "0.5.23", "served differently"),
    ]
    text = " ".join(_run(str(mirrored), "--for", "vllm==0.33.0", "--for", "sglang").stdout.split())
    assert "FAILED on SGLang 0.5.23: 1 error(s), 0 warning(s), 0 info" in text


@pytest.mark.parametrize("flag", ["--deep", "--load=vllm"])
def test_engine_rows_are_static(tmp_path: Path, flag: str) -> None:
    res = _run(str(_fixed(tmp_path)), "--for", "sglang", flag)
    assert res.exit_code == 2
    name = flag.split("=")[0]
    assert res.stderr.endswith(
        f"Error: {name} does not combine with --for sglang: the engine rows run the static rules; run validate "
        f"{name} once for the vLLM release you deploy on\n"
    )


def test_check_for_sglang(tmp_path: Path) -> None:
    mirrored = edit_draft(tmp_path / "m")
    res = CliRunner().invoke(main, ["check", str(mirrored), "--for", "sglang", "--json"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    static = next(c for c in data["checks"] if c["stage"] == "static")
    assert not static["passed"] and "E335" in json.dumps(static)
    static_only = tmp_path / "static-only.toml"
    static_only.write_text("[engine]\nload = false\n")  # the engine load runs vLLM and needs --target
    args = ["check", str(_fixed(tmp_path)), "--for", "sglang", "--json", "--policy", str(static_only)]
    ok = CliRunner().invoke(main, args)
    assert ok.exit_code == 0, ok.output
