"""`report --speculative-config`: read as smoke reads it (refusals before any stage), passed to the
measuring stages as smoke passes it, and named beside the numbers it produced (report.json's
settings, report.md's head, commands.sh) with the prompts suite (issue 18 point 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema


def _cli(*args: str):
    return CliRunner().invoke(main, ["report", *args])


def test_refused_as_smoke_refuses_before_any_stage(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "config.json").write_text("{}")
    out = tmp_path / "o"
    common = ["--target", str(d), "--out", str(out), "--engine", "reference"]
    res = _cli(str(d), *common, "-k", "2", "--speculative-config", '{"num_speculative_tokens": 4}')
    assert res.exit_code == 2
    assert res.output == (
        "Error: --num-speculative-tokens 2 but --speculative-config num_speculative_tokens is 4 (give k once)\n"
    )
    served = '{"num_speculative_tokens": 3, "rejection_sample_method": "block"}'
    res = _cli(str(d), *common, "--speculative-config", served)
    assert res.exit_code == 2 and res.output == (
        "Error: --speculative-config: the reference engine drafts as method eagle3 at num_speculative_tokens "
        "only; rejection_sample_method needs --engine vllm\n"
    )
    assert not out.exists()  # refused before the first stage


@pytest.fixture(scope="module")
def served_report(tmp_path_factory: pytest.TempPathFactory):
    """A two-variant report (no calibration, no fine-tune) on the trained pair, the measuring
    library call spied on; the k (2) comes from the config, as smoke takes it."""
    import eagle_convert.report.measure as report_measure
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    tmp = tmp_path_factory.mktemp("served")
    out = tmp / "report"
    seen: list = []
    real = report_measure.measure_drafts

    def spy(target, drafts, pset, m, *args, **kwargs):  # m: the resolved Measure
        seen.append(m.serve)
        return real(target, drafts, pset, m, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(report_measure, "measure_drafts", spy)
    try:
        res = _cli(
            str(draft),
            "--target",
            str(target),
            "--out",
            str(out),
            "--engine",
            "reference",
            "--category",
            "chat",
            "--limit",
            "1",
            "--max-new-tokens",
            "8",
            "--buckets",
            "natural",
            "--no-calibrated",
            "--no-finetune",
            "--speculative-config",
            '{"method": "eagle3", "num_speculative_tokens": 2}',
        )
    finally:
        mp.undo()
    assert res.exit_code == 0, res.output
    return out, seen


@pytest.mark.slow
def test_the_serve_config_reaches_the_measuring_call(served_report) -> None:
    _, seen = served_report
    assert len(seen) == 1 and seen[0].data == {"method": "eagle3", "num_speculative_tokens": 2}


@pytest.mark.slow
def test_report_json_and_md_name_the_settings(served_report) -> None:
    out, _ = served_report
    data = json.loads((out / "report.json").read_text())
    check_schema(data, "report.schema.json")
    acc = data["acceptance"]
    assert acc["settings"]["k"] == 2 and len(acc["drafts"][0]["total"]["per_position"]) == 2
    assert acc["settings"]["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": 2}
    md = (out / "report.md").read_text()
    assert "- engine: reference (torch " in md and "k = 2, temperature 0.0" in md
    assert "- prompts: suite built-in, 1 runs" in md
    assert (
        '- speculative config: `{"method": "eagle3", "num_speculative_tokens": 2}` (--speculative-config: '
        "every engine ran with exactly these keys)" in md
    )
    smoke_line = next(c["command"] for c in data["commands"] if c["stage"].startswith("smoke"))
    assert '--speculative-config \'{"method": "eagle3", "num_speculative_tokens": 2}\'' in smoke_line


def test_without_a_config_the_md_says_what_drafted() -> None:
    from eagle_convert.report.markdown import _served_line

    assert _served_line("reference", {"k": 3}) == (
        "none given: the reference engine drafts as `method` eagle3, `num_speculative_tokens` 3"
    )
    assert _served_line("vllm", {"k": 4}).startswith("none given: each engine ran with `method` eagle3, ")


@pytest.mark.vllm
def test_vllm_report_measures_with_the_served_keys(tmp_path: Path) -> None:
    """The engine path: every vLLM engine runs with the config's keys (k = 2 from it), and the
    settings say so."""
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.report import ReportOptions
    from eagle_convert.report.run import run_report
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    served = {"method": "eagle3", "num_speculative_tokens": 2}
    measure = MeasureOptions(
        engine="vllm", categories=("chat",), limit=1, max_new_tokens=8, speculative_config=json.dumps(served)
    )
    opts = ReportOptions(measure=measure, calibrate=False, finetune=False)
    res = run_report(draft, target, tmp_path / "r", opts)
    acc = res.data["acceptance"]
    assert acc["engine"] == "vllm" and acc["settings"]["k"] == 2
    assert acc["settings"]["speculative_config"] == served
    assert all(len(d["total"]["per_position"]) == 2 for d in acc["drafts"])
    assert f"- engine: vllm ({acc['engine_version']})" in (tmp_path / "r" / "report.md").read_text()
