"""Option objects (`optionspec`): each field is one click option, and `to_argv` writes the flags that
parse back, through the real click command, into an equal object (what report's commands.sh relies on).
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.cli.options import options_from_params
from eagle_convert.errors import UsageError
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.optionspec import to_argv
from eagle_convert.upgrade.options import UpgradeOptions


def _root() -> click.Context:
    # The group's settings (-h): click caches a command's help option from the first context it sees.
    return click.Context(main, info_name="main", **main.context_settings)


def _parse(name: str, argv: list[str], cls: type, into: str = "opts"):
    """The options object the command `name` builds from `argv` (click parses, nothing runs)."""
    root = _root()
    cmd = main.get_command(root, name)
    assert cmd is not None
    ctx = cmd.make_context(name, argv, parent=root)
    return options_from_params(cls, into, ctx.params)


def test_to_argv_writes_only_what_differs_from_the_defaults_in_field_order() -> None:
    assert to_argv(FinetuneOptions()) == []
    opts = FinetuneOptions(seed=3, steps_all=0, prompts="my data.jsonl", whole_sequences=True, lr_all=2.5e-05)
    assert to_argv(opts) == [
        "--train-prompts",
        "my data.jsonl",
        "--whole-sequences",
        "--steps-all",
        "0",
        "--lr-all",
        "2.5e-05",
        "--seed",
        "3",
    ]
    assert to_argv(UpgradeOptions(norm_output=False, aux_layer_ids=(2, 16, 29))) == [
        "--no-norm-output",
        "--aux-layer-ids",
        "2,16,29",
    ]


FINETUNE = FinetuneOptions(
    prompts="p.jsonl",
    chat_template="none",
    continuation_tokens=7,
    max_len=33,
    whole_sequences=True,
    eval_every=2,
    steps_fc_norm=5,
    steps_all=0,
    lr_fc_norm=0.003,
    lr_all=1.5e-05,
    l2sp=0.0,
    ttt_steps=2,
    seed=11,
    nproc=2,
)
UPGRADE = UpgradeOptions(
    layout="keep",
    norm_output=False,
    aux_layer_ids=(1, 4, 6),
    init="calibrated",
    calibration_prompts="c.jsonl",
    link=True,
    verify=False,
    fsync=False,
)


def test_every_field_round_trips_through_its_command() -> None:
    """Each field set away from its default, written by to_argv, parsed by the command itself."""
    for cls, sample in ((FinetuneOptions, FINETUNE), (UpgradeOptions, UPGRADE)):
        for f in cls.__dataclass_fields__:
            assert getattr(sample, f) != getattr(cls(), f), f"{cls.__name__}.{f}: set it away from its default"
    ft = ["D", "--target", "T", "--out", "O", *to_argv(FINETUNE)]
    assert _parse("finetune", ft, FinetuneOptions) == FINETUNE
    assert _parse("upgrade", ["D", "--out", "O", *to_argv(UPGRADE)], UpgradeOptions) == UPGRADE


@pytest.mark.parametrize(
    ("command", "patch", "field", "new"),
    [
        (
            ["finetune", "D", "--target", "T", "--out", "O"],
            "eagle_convert.finetune.plan.plan_finetune",
            "prompts",
            "--train-prompts",
        ),
        (
            ["upgrade", "D", "--out", "O"],
            "eagle_convert.upgrade.run.upgrade_draft",
            "calibration_prompts",
            "--calibration-prompts",
        ),
    ],
)
def test_old_prompts_spelling_still_works_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, command: list[str], patch: str, field: str, new: str
) -> None:
    """The command receives the old flag's value under the new field; stderr has exactly one warning line."""
    seen = []

    def capture(*args, **kwargs):
        seen.append(args[3] if command[0] == "finetune" else args[2])
        raise UsageError("stop here")

    monkeypatch.setattr(patch, capture)
    res = CliRunner().invoke(main, [*command, "--prompts", "p.jsonl"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == (
        f"Warning: --prompts is deprecated; use {new} (it will be removed in a later release).\nError: stop here\n"
    )
    assert getattr(seen[0], field) == "p.jsonl"
    shown = CliRunner().invoke(main, [command[0], "--help"], terminal_width=200).stdout
    assert new in shown and "--prompts " not in shown


def test_old_and_new_spelling_together_is_a_usage_error() -> None:
    res = CliRunner().invoke(
        main,
        ["finetune", "D", "--target", "T", "--out", "O", "--prompts", "a", "--train-prompts", "b"],
    )
    assert res.exit_code == 2
    assert (
        res.stderr.splitlines()[-1] == "Error: --prompts is the old name of --train-prompts: pass --train-prompts only"
    )
    assert res.stdout == ""
