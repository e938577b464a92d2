"""The command group: commands in pipeline order, and the renamed flags and forms of upgrade, validate
and push (old spellings are hidden aliases that print one deprecation line)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from eagle_convert.cli.app import COMMANDS, PIPELINE, main


def test_help_lists_the_commands_in_pipeline_order() -> None:
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    listed = [line.split()[0] for line in res.stdout.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    expected = ["inspect", "upgrade", "diff", "validate", "smoke", "drift", "finetune", "report", "check", "push"]
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
