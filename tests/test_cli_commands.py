"""The command group: commands in pipeline order, and the renamed flags and forms of upgrade, validate
and push (old spellings are hidden aliases that print one deprecation line)."""

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


def _warning(old: str, new: str) -> str:
    return f"Warning: {old} is deprecated; use {new} (it will be removed in a later release).\n"


def test_upgrade_takes_the_output_as_out(built_fixtures, tmp_path: Path) -> None:
    res = _run("upgrade", built_fixtures("vllm-eagle3"), "--out", tmp_path / "out")
    assert (res.exit_code, res.stderr) == (0, "")
    assert (tmp_path / "out" / "config.json").is_file()
    assert "[OUTPUT]" not in _run("upgrade", "--help").stdout  # the old form is not advertised


def test_upgrades_old_positional_output_still_works_with_one_line(built_fixtures, tmp_path: Path) -> None:
    res = _run("upgrade", built_fixtures("vllm-eagle3"), tmp_path / "out")
    assert res.exit_code == 0
    assert res.stderr == _warning("upgrade CHECKPOINT OUTPUT", "upgrade CHECKPOINT --out OUT")
    assert (tmp_path / "out" / "config.json").is_file()


def test_upgrade_with_both_forms_or_neither_is_a_usage_error(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3")
    res = _run("upgrade", src, tmp_path / "a", "--out", tmp_path / "b")
    assert res.exit_code == 2 and res.stderr.endswith(
        "Error: upgrade CHECKPOINT --out OUT and upgrade CHECKPOINT OUTPUT at once: pass --out only\n"
    )
    res = _run("upgrade", src)
    assert res.exit_code == 2 and res.stderr.endswith("Error: Missing option '--out'.\n")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _capture_validate(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """validate_checkpoint runs statically (no engine, no target); the keywords the command passed are kept."""
    from eagle_convert.validate import entry

    real, seen = entry.validate_checkpoint, {}

    def fake(checkpoint: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(checkpoint, **{**kwargs, "load": None, "target": None})

    monkeypatch.setattr(entry, "validate_checkpoint", fake)
    return seen


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["--load", "vllm", "--load-timeout", "7"], ""),
        (["--engine", "vllm", "--load-timeout", "7"], _warning("--engine", "--load")),
        (["--load", "vllm", "--engine-timeout", "7"], _warning("--engine-timeout", "--load-timeout")),
    ],
)
def test_validate_load_and_its_old_spelling(
    built_fixtures, monkeypatch: pytest.MonkeyPatch, args: list[str], stderr: str
) -> None:
    seen = _capture_validate(monkeypatch)
    draft = built_fixtures("vllm-eagle31")
    res = _run("validate", draft, "--target", "T", *args)
    assert (res.exit_code, res.stderr) == (0, stderr), res.output
    assert seen["load"] == "vllm" and seen["load_timeout_s"] == 7


def test_validate_help_shows_only_the_new_spellings() -> None:
    out = _run("validate", "--help").stdout
    assert "--load [vllm]" in out and "--load-timeout" in out
    assert "--engine" not in out


@pytest.mark.parametrize(
    ("flag", "stderr"), [("--allow-invalid", ""), ("--force", _warning("--force", "--allow-invalid"))]
)
def test_push_allow_invalid_and_its_old_spelling(built_fixtures, tmp_path: Path, flag: str, stderr: str) -> None:
    bad = shutil.copytree(built_fixtures("vllm-eagle31"), tmp_path / "bad")
    cfg = json.loads((bad / "config.json").read_text())
    cfg["fc_norm"] = False  # E104: fc_norm tensors with the flag off
    (bad / "config.json").write_text(json.dumps(cfg))
    refused = _run("push", bad, "org/name", "--dry-run", "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["would_push"] is False
    res = _run("push", bad, "org/name", "--dry-run", "--json", flag)
    assert (res.exit_code, res.stderr) == (0, stderr)
    assert json.loads(res.stdout)["would_push"] is True
    assert "--force" not in _run("push", "--help").stdout


def test_push_library_keeps_force_as_a_deprecated_keyword(built_fixtures, tmp_path: Path) -> None:
    from eagle_convert.push import plan_push

    with pytest.warns(DeprecationWarning, match="use allow_invalid="):
        plan = plan_push(built_fixtures("vllm-eagle31"), "org/name", force=True)
    assert plan.allow_invalid is True
