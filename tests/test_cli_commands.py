"""The command group: commands in pipeline order, and the flags and forms of upgrade, validate and push
(the spellings renamed before the first release are gone: a usage error, exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import COMMANDS, PIPELINE, main


def test_help_lists_the_commands_in_pipeline_order() -> None:
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    listed = [line.split()[0] for line in res.stdout.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    expected = [
        *("inspect", "upgrade", "diff", "validate", "smoke", "drift", "capture", "finetune", "report", "check"),
        "push",
    ]
    assert [c for c in listed if c in expected] == expected
    assert listed == [c for c in PIPELINE if c in listed]


def test_every_lazy_command_has_a_place_in_the_pipeline() -> None:
    assert set(COMMANDS) <= set(PIPELINE)
    with click.Context(main) as ctx:
        assert main.list_commands(ctx) == [c for c in PIPELINE if c in main.list_commands(ctx)]


def test_a_command_without_a_place_comes_last() -> None:
    group = type(main)(commands=[click.Command("zzz"), click.Command("aaa"), click.Command("push")])
    with click.Context(group) as ctx:
        names = group.list_commands(ctx)
    assert names[-2:] == ["aaa", "zzz"]
    assert names.index("push") < names.index("aaa")


def _run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_upgrade_takes_the_output_as_out(built_fixtures, tmp_path: Path) -> None:
    res = _run("upgrade", built_fixtures("vllm-eagle3"), "--out", tmp_path / "out")
    assert (res.exit_code, res.stderr) == (0, "")
    assert (tmp_path / "out" / "config.json").is_file()
    assert "[OUTPUT]" not in _run("upgrade", "--help").stdout  # the old form is not advertised


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["upgrade", "D", "OUT", "--out", "O"], "Error: Got unexpected extra argument (OUT)"),
        (
            ["upgrade", "D", "--out", "O", "--prompts", "p"],
            "Error: No such option '--prompts'. Did you mean '--calibration-prompts'?",
        ),
        (
            ["finetune", "D", "--target", "T", "--out", "O", "--prompts", "p"],
            "Error: No such option '--prompts'. (Did you mean one of: '--nproc', '--train-prompts'?)",
        ),
        (["validate", "D", "--engine", "vllm"], "Error: No such option '--engine'."),
        (
            ["validate", "D", "--engine-timeout", "7"],
            "Error: No such option '--engine-timeout'. Did you mean '--load-timeout'?",
        ),
        (["push", "D", "org/name", "--force"], "Error: No such option '--force'."),
        (["smoke", "T", "-d", "D"], "Error: No such option '-d'."),
    ],
)
def test_the_spellings_renamed_before_the_first_release_are_usage_errors(argv: list[str], error: str) -> None:
    res = _run(*argv)
    assert (res.exit_code, res.stderr.splitlines()[-1]) == (2, error), res.stderr


def test_upgrade_without_out_is_a_usage_error(built_fixtures, tmp_path: Path) -> None:
    res = _run("upgrade", built_fixtures("vllm-eagle3"))
    assert res.exit_code == 2 and res.stderr.endswith("Error: Missing option '--out'.\n")


def _capture_validate(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """validate_checkpoint runs statically (no engine, no target); the keywords the command passed are kept."""
    from eagle_convert.validate import entry

    real, seen = entry.validate_checkpoint, {}

    def fake(checkpoint: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(checkpoint, **{**kwargs, "load": None, "target": None})

    monkeypatch.setattr(entry, "validate_checkpoint", fake)
    return seen


def test_validate_load(built_fixtures, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_validate(monkeypatch)
    draft = built_fixtures("vllm-eagle31")
    res = _run("validate", draft, "--target", "T", "--load", "vllm", "--load-timeout", "7")
    assert (res.exit_code, res.stderr) == (0, ""), res.output
    assert seen["load"] == "vllm" and seen["load_timeout_s"] == 7


def test_validate_help_shows_only_the_new_spellings() -> None:
    out = _run("validate", "--help").stdout
    assert "--load [vllm]" in out and "--load-timeout" in out
    assert "--engine" not in out


def test_push_allow_invalid(built_fixtures, tmp_path: Path) -> None:
    bad = shutil.copytree(built_fixtures("vllm-eagle31"), tmp_path / "bad")
    cfg = json.loads((bad / "config.json").read_text())
    cfg["fc_norm"] = False  # E104: fc_norm tensors with the flag off
    (bad / "config.json").write_text(json.dumps(cfg))
    refused = _run("push", bad, "org/name", "--dry-run", "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["would_push"] is False
    res = _run("push", bad, "org/name", "--dry-run", "--json", "--allow-invalid")
    assert (res.exit_code, res.stderr) == (0, "")
    assert json.loads(res.stdout)["would_push"] is True
    assert "--force" not in _run("push", "--help").stdout


def test_push_library_keeps_force_as_a_deprecated_keyword(built_fixtures, tmp_path: Path) -> None:
    from eagle_convert.push import plan_push

    with pytest.warns(DeprecationWarning, match="use allow_invalid="):
        plan = plan_push(built_fixtures("vllm-eagle31"), "org/name", force=True)
    assert plan.allow_invalid is True
