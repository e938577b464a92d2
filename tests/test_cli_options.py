"""The measuring options `smoke` and `report` share (`cli/options.py`): one validation for both, each
command's own defaults kept, and both `--help` pages still listing every option. Fast: click refuses
the values before any model is loaded.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main

# Enough arguments for each command that only the option under test is wrong.
COMMANDS = {
    "smoke": (["smoke", "DRAFT", "--target", "TARGET"], "DRAFT [DRAFT ...]"),
    "report": (["report", "DRAFT", "--target", "TARGET", "--out", "OUT"], "DRAFT"),
}
SHARED = (
    "--engine",
    "--prompts",
    "--category",
    "--limit",
    "-k, --num-speculative-tokens",
    "--max-new-tokens",
    "--temperature",
    "--seed",
    "--buckets",
    "--chat-template",
    "--tensor-parallel-size",
    "--concurrency",
)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "args, error",
    [
        (["--temperature", "-1"], "Invalid value for '--temperature': -1.0 is not in the range x>=0."),
        (["-k", "0"], "Invalid value for '--num-speculative-tokens' / '-k': 0 is not in the range x>=1."),
        (["--max-new-tokens", "0"], "Invalid value for '--max-new-tokens': 0 is not in the range x>=1."),
        (
            ["--tensor-parallel-size", "0"],
            "Invalid value for '--tensor-parallel-size': 0 is not in the range x>=1.",
        ),
        (["--limit", "0"], "Invalid value for '--limit': 0 is not in the range x>=1."),
    ],
)
def test_both_commands_refuse_out_of_range_values_as_usage(command: str, args: list[str], error: str) -> None:
    base, argument = COMMANDS[command]
    res = CliRunner().invoke(main, [*base, *args])
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (
        f"Usage: main {command} [OPTIONS] {argument}\nTry 'main {command} --help' for help.\n\nError: {error}\n"
    )


@pytest.mark.parametrize(
    "command, buckets, concurrency",
    [
        ("smoke", "natural", "Default: not measured."),
        ("report", "natural,1024", "Default with --engine vllm: 1,4,16; 'none' turns it off."),
    ],
)
def test_help_lists_the_shared_options_with_each_commands_defaults(
    command: str, buckets: str, concurrency: str
) -> None:
    res = CliRunner().invoke(main, [command, "--help"], terminal_width=1000)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    starts = [next(i for i, line in enumerate(lines) if line.lstrip().startswith(opt + " ")) for opt in SHARED]
    assert starts == sorted(starts), "the shared options keep their --help order"
    # Each option's text runs to the next option's first line (a long name wraps its help below it).
    ends = [*starts[1:], next(i for i, line in enumerate(lines) if i > starts[-1] and line.startswith("  -"))]
    by_name = {opt: " ".join(lines[a:b]) for opt, a, b in zip(SHARED, starts, ends, strict=True)}
    assert f"[default: {buckets}]" in by_name["--buckets"]
    assert concurrency in by_name["--concurrency"]
    assert "FLOAT RANGE" in by_name["--temperature"] and "[default: 0.0; x>=0]" in by_name["--temperature"]
    assert "[default: 3; x>=1]" in by_name["-k, --num-speculative-tokens"]
    assert "[default: 64; x>=1]" in by_name["--max-new-tokens"]
    assert "[default: auto]" in by_name["--engine"] and "[default: 0]" in by_name["--seed"]
