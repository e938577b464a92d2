"""`--help` reads whole (issue 33 item 5): no word of an option's help is split across lines, and an
option that must be given says [required]."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.cli.helpformat import wrap_words

_CTX = click.Context(main)
COMMANDS = main.list_commands(_CTX)


@pytest.mark.parametrize("name", COMMANDS)
def test_no_word_of_an_option_help_is_split(name: str) -> None:
    res = CliRunner().invoke(main, [name, "--help"])
    assert res.exit_code == 0, res.output
    shown = set(res.stdout.split())
    cmd = main.get_command(_CTX, name)
    words = {w for p in cmd.params if isinstance(p, click.Option) and not p.hidden for w in (p.help or "").split()}
    assert sorted(words - shown) == []


def test_a_long_identifier_stays_whole() -> None:
    res = CliRunner().invoke(main, ["capture", "--help"])
    assert "ParallelConfig.distributed_executor_backend):" in res.stdout.split()
    assert wrap_words("see ParallelConfig.distributed_executor_backend now", 20) == [
        "see",
        "ParallelConfig.distributed_executor_backend",
        "now",
    ]
    assert wrap_words("--tensor-parallel-size x", 12) == ["--tensor-parallel-size", "x"]


def test_upgrade_help_marks_out_required() -> None:
    res = CliRunner().invoke(main, ["upgrade", "--help"])
    block = res.stdout.split("  --out OUT", 1)[1].split("\n  --", 1)[0]
    assert "[required]" in block
    res = CliRunner().invoke(main, ["upgrade", "x"])
    assert res.exit_code == 2 and "Missing option '--out'" in res.stderr
