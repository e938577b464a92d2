"""`report --for ENGINE[==VERSION]` (issue 30 item 1): the upgrades are written for every named engine,
each variant is validated for every named engine release, the stage keys follow `--for`, and commands.sh
carries the same flags. Fast: the report runs on a config-only target and stops before it measures."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.engines import parse_for
from eagle_convert.measure import MeasureOptions
from eagle_convert.report.stages import ReportOptions, upgrade_command, validate_stage
from eagle_convert.upgrade import UpgradeOptions
from eagle_convert.validate import validate_checkpoint, validate_for
from fixtures.edits import edit_draft

SG = "SGLang 0.5.23"


def _target(out: Path) -> Path:
    out.mkdir(parents=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "vocab_size": 256,
           "num_hidden_layers": 8, "max_position_embeddings": 32768}  # fmt: skip
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _codes(findings: list[dict]) -> list[str]:
    return sorted(f["code"] for f in findings)


def test_default_validate_stage_is_todays(tmp_path: Path) -> None:
    d, t = edit_draft(tmp_path / "d"), _target(tmp_path / "t")
    result, cmd = validate_stage(d, t)
    rep = validate_checkpoint(d, target=t)
    assert "engines" not in result and result["ok"] == (not rep.errors) and result["errors"] == len(rep.errors)
    assert _codes(result["findings"]) == sorted(f.code for f in rep.findings)
    assert shlex.split(cmd) == ["eagle-convert", "validate", str(d), "--target", str(t)]


def test_validate_stage_for_vllm_and_sglang(tmp_path: Path) -> None:
    d, t = edit_draft(tmp_path / "d"), _target(tmp_path / "t")  # top-level ids only: SGLang taps its default
    engines = parse_for(["vllm", "sglang"])
    result, cmd = validate_stage(d, t, engines, ("vllm", "sglang"))
    vllm, sglang = result["engines"]
    assert vllm["engine"] == "vllm" and vllm["label"].startswith("vLLM ") and sglang["label"] == SG
    # each row is that engine's own verdict, as validate --for gives it
    assert _codes(vllm["findings"]) == sorted(f.code for f in validate_checkpoint(d, target=t).findings)
    sg = validate_for(d, engines[1], target=t)
    assert _codes(sglang["findings"]) == sorted(f.code for f in sg.findings) and "E335" in _codes(sglang["findings"])
    assert vllm["ok"] and not sglang["ok"]  # E335: SGLang computes differently
    # the stage's own fields: ok only when every engine is ok, counts summed, each finding naming its engine
    assert result["ok"] is False
    for n in ("errors", "warnings", "infos"):
        assert result[n] == vllm[n] + sglang[n]
    assert len(result["findings"]) == len(vllm["findings"]) + len(sglang["findings"])
    assert {f["engine"] for f in result["findings"] if f["code"] == "E335"} == {SG}
    assert shlex.split(cmd)[5:] == ["--for", "vllm", "--for", "sglang"]


def test_commands_sh_upgrade_line_carries_the_for_flags(tmp_path: Path) -> None:
    line = upgrade_command(tmp_path / "d", tmp_path / "o", UpgradeOptions(serve_for=("vllm", "sglang==0.5.23")))
    assert shlex.split(line)[-4:] == ["--for", "vllm", "--for", "sglang==0.5.23"]


def test_unknown_engine_is_refused_before_any_stage(tmp_path: Path) -> None:
    d, t = edit_draft(tmp_path / "d"), _target(tmp_path / "t")
    out = tmp_path / "r"
    res = CliRunner().invoke(
        main, ["report", str(d), "--target", str(t), "--out", str(out), "--engine", "reference", "--for", "tgi"]
    )
    assert res.exit_code == 2, res.output
    assert res.output == "Error: --for tgi: unknown engine 'tgi' (name one of: vllm, sglang, trtllm, or all)\n"
    assert not out.exists()


class _Stop(Exception):
    pass


def _until_measure(d: Path, t: Path, out: Path, serve_for: tuple[str, ...]) -> dict[str, str]:
    """Run the report up to (not into) its measurement: stage name -> ran / skipped."""
    from eagle_convert.report import run_report

    events: dict[str, str] = {}

    def stop(ev) -> None:
        events[ev.name] = ev.status
        if ev.name == "validate:eagle31-identity":
            raise _Stop

    opts = ReportOptions(
        measure=MeasureOptions(engine="reference"), calibrate=False, finetune=False, serve_for=serve_for
    )
    with pytest.raises(_Stop):
        run_report(d, t, out, opts, on_stage=stop)
    return events


def _record(out: Path, name: str) -> dict:
    return json.loads((out / ".report" / "stages" / (name.replace(":", "--") + ".json")).read_text())


def test_changing_for_reruns_exactly_the_upgrade_and_validate_stages(tmp_path: Path) -> None:
    d, t, out = edit_draft(tmp_path / "d"), _target(tmp_path / "t"), tmp_path / "r"
    first = _until_measure(d, t, out, ())
    assert set(first.values()) == {"ran"} and "engines" not in _record(out, "validate:eagle3")["result"]
    ran = _until_measure(d, t, out, ("vllm", "sglang"))
    assert ran == {
        "inspect": "skipped",
        "upgrade:identity": "ran",
        "validate:eagle3": "ran",
        "validate:eagle31-identity": "ran",
    }
    # the identity upgrade was written for both: SGLang's ids in eagle_config, in its id + 1 convention
    cfg = json.loads((out / "eagle31-identity" / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    rec = _record(out, "validate:eagle31-identity")
    assert [e["label"] for e in rec["result"]["engines"]][1:] == [SG]
    assert rec["command"].endswith("--for vllm --for sglang")
    assert _record(out, "upgrade:identity")["command"].endswith("--for vllm --for sglang")
    again = _until_measure(d, t, out, ("vllm", "sglang"))
    assert set(again.values()) == {"skipped"}


def test_a_refused_portable_upgrade_is_the_reports_one_line_error(tmp_path: Path) -> None:
    d = edit_draft(tmp_path / "d", config=lambda c: c.update(norm_before_residual=True))
    t, out = _target(tmp_path / "t"), tmp_path / "r"
    res = CliRunner().invoke(
        main, ["report", str(d), "--target", str(t), "--out", str(out), "--engine", "reference", "--for", "sglang"]
    )
    assert res.exit_code == 1, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith("Error: report stage upgrade:identity: ")
    assert "norm_before_residual" in errors[0] and "Traceback" not in res.output


def test_schema_takes_the_engines_rows(tmp_path: Path) -> None:
    d, t = edit_draft(tmp_path / "d"), _target(tmp_path / "t")
    result, _ = validate_stage(d, t, parse_for(["vllm", "sglang"]), ("vllm", "sglang"))
    from jsonschema import Draft202012Validator

    try:
        from tests.jsonschemas import _registry
    except ImportError:  # tests/ itself on sys.path
        from jsonschemas import _registry

    summary = {"$ref": "eagle-convert/report/1#/$defs/validateSummary"}
    Draft202012Validator(summary, registry=_registry()).validate(result)


def test_report_md_names_each_engine_only_with_for(tmp_path: Path) -> None:
    from eagle_convert.report.markdown import _verdict
    from eagle_convert.report.write import _validate_summary

    d, t = edit_draft(tmp_path / "d"), _target(tmp_path / "t")
    default, _ = validate_stage(d, t)
    assert _verdict(_validate_summary(default)) == f"{default['errors']} / {default['warnings']}"  # today's look
    result, _ = validate_stage(d, t, parse_for(["vllm", "sglang"]), ("vllm", "sglang"))
    vllm, sglang = result["engines"]
    assert _verdict(_validate_summary(result)) == (
        f"{vllm['label']}: {vllm['errors']} / {vllm['warnings']}; {SG}: {sglang['errors']} / {sglang['warnings']}"
    )
