"""`report --server`: the running deployment as one more report stage, against the fake vLLM server
(`tests/servedfake.py`, real sockets): its refusals before any stage (fast), and on the trained
fixture the panel in report.md and report.json, the reproducing command, and the resume (a rerun
sends no request; a changed label reruns the served stage alone)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonschemas import check_schema  # noqa: E402
from servedfake import FakeServer  # noqa: E402


def _report(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["report", *args], env={"OPENAI_API_KEY": "", **(env or {})})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--label", "a"), "--label and --baseline-server go with --server"),
        (("--baseline-server", "http://h:1"), "--label and --baseline-server go with --server"),
        (("--server", "http://h:1", "--label", "a", "--label", "b"), "more --label than --server values"),
        (("--server", "ftp://h:1"), "--server: 'ftp://h:1' is not an http(s) URL (e.g. http://localhost:8000)"),
    ],
)
def test_bad_server_options_are_refused_before_any_stage(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    pytest.importorskip("torch")
    res = _report("nodraft", "--target", "notarget", "--out", str(tmp_path / "r"), "--engine", "reference", *args)
    assert (res.exit_code, res.stderr) == (2, f"Error: {message}\n")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_report_measures_the_servers_as_a_resumable_stage(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from eagle_convert.measure import NATURAL, MeasureOptions
    from eagle_convert.report import ReportOptions, run_report
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    out = tmp_path / "report"
    measure = MeasureOptions(engine="reference", categories=("chat",), limit=1, max_new_tokens=9, buckets=(NATURAL,))
    small = dict(measure=measure, calibrate=False, finetune=False, drift=False)
    with FakeServer(k=3, accept=2, api_key="sk-x", mode="auth") as srv, FakeServer(k=None) as base:
        opts = ReportOptions(**small, servers=(srv.url,), labels=("deployed",), baseline_server=base.url)
        first = run_report(draft, target, out, opts, api_key="sk-x")
        assert "served" in first.ran
        sent = srv.requests
        # every default level (1, 4, 16): the one prompt cycled to fill the streams
        assert sent == 1 + 4 + 16 and base.requests == sent
        again = run_report(draft, target, out, opts, api_key="sk-x")
        assert again.ran == [] and "served" in again.skipped and srv.requests == sent
        relabelled = run_report(draft, target, out, replace(opts, labels=("prod",)), api_key="sk-x")
        assert relabelled.ran == ["served"]
    data = json.loads((out / "report.json").read_text())
    check_schema(data, "report.schema.json")
    served = data["served"]
    [s] = served["servers"]
    assert (s["label"], s["url"], s["k"]) == ("prod", srv.url, 3)
    # 9 tokens: prefill + rounds accepting 2, 2, 1 of 3 -> AL 1 + 5/3, exact arithmetic
    assert [lv["acceptance_length"] for lv in s["levels"]] == [2.6667] * 3
    assert all(lv["speedup"] > 0 for lv in s["levels"])
    md = (out / "report.md").read_text()
    assert "## The running deployment" in md and f"**prod**: `{srv.url}`, tiny-target (vllm 0.32.0, k = 3)" in md
    assert (
        "| 16 | 16 (0) | 144 | 2.67 | 100% 67% 0% |" in md
        and f"**baseline server** (no speculation): `{base.url}`" in md
    )
    [cmd] = [c["command"] for c in data["commands"] if c["stage"] == "smoke --server (the running servers)"]
    assert cmd == (
        f"eagle-convert smoke --server {srv.url} --label prod --baseline-server {base.url} --category chat "
        "--limit 1 --max-new-tokens 9 --concurrency 1,4,16 --json"
    )
    assert "sk-x" not in (out / "report.json").read_text() + md + (out / "commands.sh").read_text()


def test_the_report_panel_names_the_context_of_padded_buckets() -> None:
    """report.md's served table, from `smoke --server --json`'s dict: a context column with buckets."""
    from eagle_convert.measure import MeasureOptions, Prompt
    from eagle_convert.report.markdown import _served
    from eagle_convert.served import run_served

    prompts = [Prompt("a", "coding", text="def f():")]
    with FakeServer(k=3, accept=2) as srv, FakeServer(k=None) as base:
        opts = MeasureOptions(max_new_tokens=9, concurrency=(1,), buckets=(0, 64))
        rep = run_served([srv.url], opts, labels=["d"], baseline=base.url, prompts=prompts, suite="mine")
    lines = _served(rep.to_dict())
    assert lines[0].startswith(
        "Measured on the running servers (`smoke --server`), not with the report's engine: 2 prompt runs "
    )
    table = [ln for ln in lines if ln.startswith("| ")]
    assert table[0].startswith("| context | concurrency | requests (failed) | output tokens | AL | per position |")
    assert table[1].startswith("| natural | 1 | 1 (0) | 9 | 2.67 | 100% 67% 0% |")
    assert table[2].startswith("| ~64 tokens | 1 | 1 (0) | 9 | 2.67 | 100% 67% 0% |")
    assert table[3] == "| context | concurrency | requests (failed) | tokens/s per user |"
    assert [ln.split(" | ")[0] for ln in table[4:]] == ["| natural", "| ~64 tokens"]
