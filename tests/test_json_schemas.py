"""Every command's `--json` against its published schema in `schemas/`, on real outputs.

The cheap commands run here on fixture drafts (passing, warning, broken, the serve config, the
release matrix, a dry run, a real and a linked upgrade). smoke, finetune, report, push and check
with an engine are checked where their own tests already produce the output (test_smoke,
test_finetune, test_report, test_push, test_check_vllm), so no engine or training starts twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.edits import drop_tensor

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

SERVE = '{"method": "eagle3", "num_speculative_tokens": 5, "max_model_len": 999999}'


def _json(*args: object, code: int = 0) -> dict:
    res = CliRunner().invoke(main, [*map(str, args), "--json"])
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory, built_fixtures) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("schema-drafts")
    good = built_fixtures("vllm-eagle3")
    drop_tensor(good, base / "broken", "down_proj")
    return {
        "good": good,
        "eagle31": built_fixtures("vllm-eagle31"),
        "warn": build_draft(base / "warn", FIXTURE_MATRIX["specforge-eagle3"]),  # W307, W323
        "broken": base / "broken",
        "sharded": built_fixtures("vllm-eagle3-sharded"),
    }


@pytest.mark.parametrize(
    "draft, args, code",
    [
        ("good", [], 0),
        ("warn", [], 0),
        ("broken", [], 1),
        ("good", ["--speculative-config", SERVE], 0),  # the serve family and a W310
        ("good", ["--deep"], 0),
        ("eagle31", ["--vllm-version", "0.21.0"], 1),  # a release that fails to load it
    ],
)
def test_validate(drafts, draft: str, args: list[str], code: int) -> None:
    data = _json("validate", drafts[draft], *args, code=code)
    check_schema(data, "validate-report.schema.json")
    assert data["ok"] is (code == 0) and len(data["findings"]) == data["errors"] + data["warnings"] + data["infos"]


def test_validate_matrix(drafts) -> None:
    data = _json("validate", drafts["eagle31"], "--vllm-version", "all")
    check_schema(data, "validate-matrix.schema.json")
    assert {r["verdict"] for r in data["matrix"]} >= {"fails to load", "served as trained"}


def test_upgrade_dry_run_real_and_linked(drafts, tmp_path: Path) -> None:
    dry = _json("upgrade", drafts["warn"], "--out", tmp_path / "out", "--dry-run")
    check_schema(dry, "upgrade-report.schema.json")
    real = _json("upgrade", drafts["warn"], "--out", tmp_path / "out")
    check_schema(real, "upgrade-report.schema.json")
    assert real["result"]["verified"] and "result" not in dry
    linked = _json("upgrade", drafts["sharded"], "--out", tmp_path / "linked", "--link")
    check_schema(linked, "upgrade-report.schema.json")
    assert linked["link"]["linked"] and linked["result"]["links"]
    check_schema(_json("diff", drafts["warn"], tmp_path / "out", code=0), "diff-report.schema.json")


def test_diff_with_changed_tensors(drafts, tmp_path: Path) -> None:
    data = _json("diff", drafts["good"], drafts["broken"], "--exit-code", code=1)
    check_schema(data, "diff-report.schema.json")
    assert data["removed"] and not data["same"]


@pytest.mark.parametrize(
    "draft, extra, policy, code",
    [
        ("good", [], "[engine]\nload = false\n", 0),
        ("good", [], None, 1),  # the defaults ask for the strict load: not run without --target
        ("broken", ["--keep-going"], None, 1),
        ("warn", [], None, 1),
    ],
)
def test_check_without_engine(
    drafts, draft: str, extra: list[str], policy: str | None, code: int, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no eagle-check.toml here: the defaults
    if policy is not None:
        (tmp_path / "eagle-check.toml").write_text(policy)
    data = _json("check", drafts[draft], *extra, code=code)
    check_schema(data, "check-report.schema.json")
    assert data["passed"] is (code == 0)


def test_a_wrong_output_fails_its_schema(drafts) -> None:
    """The schemas are strict where the outputs are stable: a lost field or a wrong enum fails."""
    import jsonschema

    data = _json("validate", drafts["warn"])
    del data["findings"][0]["impact"]
    with pytest.raises(jsonschema.ValidationError, match="'impact' is a required property"):
        check_schema(data, "validate-report.schema.json")
    data = _json("check", drafts["good"], code=1)  # the strict load is not run without --target
    data["checks"][0]["status"] = "ok"
    with pytest.raises(jsonschema.ValidationError, match="'ok' is not one of"):
        check_schema(data, "check-report.schema.json")


def test_schema_enums_are_the_code_s() -> None:
    """The levels, impacts, verdicts and check stages written in the schemas are the library's own."""
    from eagle_convert.check.checks import STAGES
    from eagle_convert.draft import schemas
    from eagle_convert.validate.findings import IMPACTS, LEVELS
    from eagle_convert.validate.matrix import VERDICTS

    finding = schemas.load_schema("validate-report.schema.json")["$defs"]["finding"]["properties"]
    assert finding["level"]["enum"] == list(LEVELS) and finding["impact"]["enum"] == list(IMPACTS)
    row = schemas.load_schema("validate-matrix.schema.json")["properties"]["matrix"]["items"]["properties"]
    assert row["verdict"]["enum"] == list(VERDICTS)
    assert schemas.load_schema("check-report.schema.json")["$defs"]["stage"]["enum"] == list(STAGES)


# Command -> its --json schema (README "JSON output" lists the same).
SCHEMAS = {
    "inspect": "inspect-report.schema.json",
    "validate": "validate-report.schema.json",  # --vllm-version all: validate-matrix.schema.json
    "upgrade": "upgrade-report.schema.json",
    "diff": "diff-report.schema.json",
    "smoke": "smoke-report.schema.json",
    "drift": "drift-report.schema.json",
    "capture": "capture-report.schema.json",
    "finetune": "finetune-report.schema.json",
    "check": "check-report.schema.json",
    "report": "report.schema.json",
    "push": "push-report.schema.json",
}


def test_every_json_command_has_a_schema() -> None:
    """Each command with --json has a published, well-formed schema."""
    import jsonschema

    from eagle_convert.draft import schemas

    ctx = click.Context(main)
    commands = {n: main.get_command(ctx, n) for n in main.list_commands(ctx)}
    with_json = {n for n, c in commands.items() if c is not None and any("--json" in o.opts for o in c.params)}
    assert with_json == set(SCHEMAS)
    for name in [*SCHEMAS.values(), "validate-matrix.schema.json"]:
        jsonschema.Draft202012Validator.check_schema(schemas.load_schema(name))
