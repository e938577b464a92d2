"""The compatibility matrix (`validate --vllm-version all`): one verdict per known vLLM release.

The windows asserted here are read from vLLM's source on both sides of each boundary
(`vllm_model/releases.py` cites them): fc_norm.{i} exists from 0.22.0 (llama_eagle3.py
LlamaModel.__init__, vLLM #42764), so an EAGLE-3.1 draft's fc_norm tensors have no parameter on
0.21.0; Eagle3Qwen3ForCausalLM is registered from 0.24.0 (registry.py, vLLM #43132).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.validate.findings import finding
from eagle_convert.validate.matrix import (
    AS_TRAINED,
    DIFFERENTLY,
    FAILS,
    ReleaseRange,
    compatibility_matrix,
    summarize,
    verdict_of,
)
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model.releases import KNOWN_RELEASES
from eagle_convert.vllm_model.versions import installed_status, status_for
from fixtures.edits import drop_tensors, edit_draft


def _verdicts(matrix) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {r.release: (r.verdict, r.codes) for r in matrix.rows}


def test_eagle31_llama_fails_on_0_21_and_is_served_as_trained_from_0_22(built_fixtures) -> None:
    matrix = compatibility_matrix(built_fixtures("vllm-eagle31"), default=installed_status())
    rows = _verdicts(matrix)
    assert list(rows) == list(KNOWN_RELEASES)
    assert rows["0.21.0"] == (FAILS, ("E104",))
    assert all(rows[v] == (AS_TRAINED, ()) for v in KNOWN_RELEASES[1:])
    assert matrix.as_trained() == list(KNOWN_RELEASES[1:])
    assert matrix.summary() == "vLLM 0.22.0-0.34.0 serve it as trained; 0.21.0 fails to load it (E104)"


def test_qwen3_draft_needs_0_24(built_fixtures) -> None:
    rows = _verdicts(compatibility_matrix(built_fixtures("vllm-qwen3-eagle3"), default=installed_status()))
    assert {v for v, (verdict, _) in rows.items() if verdict == FAILS} == {"0.21.0", "0.22.0", "0.22.1", "0.23.0"}
    assert rows["0.23.0"] == (FAILS, ("E301",)) and rows["0.24.0"] == (AS_TRAINED, ())


def test_mla_eagle31_window_0_22_x(built_fixtures) -> None:
    """0.22.0-0.22.1 load the MLA draft's fc_norm but never apply it (fixed in 0.23.0, vLLM #43482)."""
    matrix = compatibility_matrix(built_fixtures("kimi-mla-eagle31"), default=installed_status())
    assert "E108" in matrix.row("0.22.0").codes and "E108" in matrix.row("0.22.1").codes
    assert "E108" not in matrix.row("0.23.0").codes and "E108" not in matrix.row("0.21.0").codes
    assert matrix.row("0.22.1").verdict == DIFFERENTLY


def test_plain_eagle3_is_served_as_trained_everywhere(built_fixtures) -> None:
    matrix = compatibility_matrix(built_fixtures("vllm-eagle3"), default=installed_status())
    assert {r.verdict for r in matrix.rows} == {AS_TRAINED}
    assert matrix.summary() == "every known vLLM release (0.21.0-0.34.0) serves it as trained"
    assert not matrix.failed()


@pytest.mark.parametrize(
    "name",
    [
        "specforge-eagle31",
        "speculators-qwen3-eagle31",
        "kimi-mla-eagle31",
        "vllm-qwen3-eagle3",
        "vllm-eagle3-a4",
        "nemo-eagle3",
        "legacy-aux-norm-eagle31",
        "torchspec-eagle3-full",
    ],
)
def test_each_row_is_that_releases_validate(built_fixtures, name: str) -> None:
    """The matrix shares the reading of the draft, not the verdicts: row X == validate --vllm-version X
    for every release (what `Context.memo` shares must not depend on the release)."""
    path = built_fixtures(name)
    matrix = compatibility_matrix(path, default=installed_status())
    for version in KNOWN_RELEASES:
        alone = validate_checkpoint(path, vllm_version=version)
        assert matrix.row(version).report.findings_dicts() == alone.findings_dicts(), version
        assert matrix.row(version).report.vllm_class == alone.vllm_class


def test_exit_status_is_the_default_releases(tmp_path: Path, built_fixtures) -> None:
    broken = edit_draft(tmp_path / "broken", tensors=drop_tensors("layers.0.mlp.down_proj.weight"))
    assert compatibility_matrix(
        broken, default=installed_status()
    ).failed()  # E101 in every release, the default's included
    eagle31 = built_fixtures("vllm-eagle31")
    assert not compatibility_matrix(eagle31, default=status_for(None, "0.32.0")).failed()
    assert compatibility_matrix(eagle31, default=status_for(None, "0.21.0")).failed()  # E104 there


def test_verdict_rules() -> None:
    hygiene = finding("W308", "flags not mirrored")
    assert verdict_of([hygiene]) == (AS_TRAINED, ())
    assert verdict_of([hygiene, finding("W320", "no aux ids")]) == (DIFFERENTLY, ("W320",))
    assert verdict_of([finding("E101", "x")]) == (DIFFERENTLY, ("E101",))  # loads other weights
    assert verdict_of([finding("W320", "x"), finding("E104", "x")]) == (FAILS, ("E104",))
    # the impact for the release at hand decides, not the table's
    assert verdict_of([finding("W107", "x", impact="fails-to-load")]) == (FAILS, ("W107",))
    assert verdict_of([finding("W320", "x", impact="hygiene")]) == (AS_TRAINED, ())


def test_summary_groups_consecutive_releases_newest_first() -> None:
    ranges = [
        ReleaseRange("0.21.0", "0.21.0", FAILS, ("E104",)),
        ReleaseRange("0.22.0", "0.22.1", DIFFERENTLY, ("E108",)),
        ReleaseRange("0.23.0", "0.33.0", AS_TRAINED, ()),
    ]
    assert summarize(ranges) == (
        "vLLM 0.23.0-0.33.0 serve it as trained; 0.22.0-0.22.1 serve it differently (E108); "
        "0.21.0 fails to load it (E104)"
    )


# ---------------------------------------------------------------- CLI


@pytest.fixture()
def run():
    def invoke(*args: str):
        return CliRunner().invoke(main, ["validate", *map(str, args)], catch_exceptions=False)

    return invoke


def test_cli_table_rows_and_exit(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle31"), "--vllm-version", "all")
    assert res.exit_code == 0, res.output
    lines = [line.rstrip() for line in res.stdout.splitlines()]
    assert "0.21.0   fails to load       E104 tensor-without-flag" in lines
    assert "0.22.0   served as trained" in lines
    assert "0.34.0   served as trained" in lines  # the newest known release has its row
    assert "vLLM 0.22.0-0.34.0 serve it as trained; 0.21.0 fails to load it (E104)" in lines
    assert len([line for line in lines if line[:6] in KNOWN_RELEASES]) == len(KNOWN_RELEASES)


def test_cli_fails_when_the_default_release_has_errors(run, tmp_path: Path) -> None:
    broken = edit_draft(tmp_path / "broken", tensors=drop_tensors("layers.0.mlp.down_proj.weight"))
    res = run(broken, "--vllm-version", "all")
    assert res.exit_code == 1
    lines = [line.rstrip() for line in res.stdout.splitlines()]
    assert "0.33.0   served differently  E101 missing-tensor" in lines
    assert lines[-1].startswith("FAILED on vLLM ") and lines[-1].endswith(": 1 error(s), 0 warning(s), 0 info")


def test_cli_json_has_the_matrix(run, built_fixtures) -> None:
    res = run(built_fixtures("vllm-eagle31"), "--vllm-version", "all", "--json")
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert [r["release"] for r in data["matrix"]] == list(KNOWN_RELEASES)
    first = data["matrix"][0]
    assert (first["verdict"], first["codes"], first["why"]) == ("fails to load", ["E104"], "E104 tensor-without-flag")
    assert [f["code"] for f in first["findings"]] == ["E104", "E318"]  # E318: norm_output read nowhere on 0.21
    assert data["matrix"][1]["verdict"] == "served as trained" and data["matrix"][1]["findings"] == []
    assert data["as_trained"] == list(KNOWN_RELEASES[1:])
    assert data["summary"] == "vLLM 0.22.0-0.34.0 serve it as trained; 0.21.0 fails to load it (E104)"
    assert data["ok"] is True


@pytest.mark.parametrize("flag", [["--deep"], ["--load", "vllm", "--target", "x"]])
def test_cli_refuses_deep_and_engine_with_all(run, built_fixtures, flag: list[str]) -> None:
    res = run(built_fixtures("vllm-eagle3"), "--vllm-version", "all", *flag)
    assert res.exit_code == 2
    assert f"{flag[0]} does not combine with --vllm-version all" in res.output


def test_cli_junit_holds_the_default_releases_findings(run, built_fixtures, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    junit = tmp_path / "v.xml"
    res = run(built_fixtures("vllm-eagle31"), "--vllm-version", "all", "--junit", junit)
    assert res.exit_code == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0"  # E104 is 0.21.0's, not the default release's
    assert not [c for c in root.iter("testcase") if "E104" in (c.get("name") or "")]
