"""Option objects refuse what their fields declare impossible when they are built (`optionspec.check`):
a Python caller reads the keyword, the command line the flag, from the same one-line error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cache import CaptureOptions
from eagle_convert.check import CheckOptions, Policy, run_check
from eagle_convert.cli.app import main
from eagle_convert.cli.errors import format_error
from eagle_convert.diff import DiffOptions
from eagle_convert.drift import DriftOptions
from eagle_convert.errors import UsageError
from eagle_convert.finetune import FinetuneOptions
from eagle_convert.measure import MeasureOptions
from eagle_convert.optionspec import check, option
from eagle_convert.push import PushOptions, push_draft
from eagle_convert.report import ReportOptions
from eagle_convert.upgrade import UpgradeOptions
from eagle_convert.validate import ValidateOptions

# (command, class, keywords, what Python says, what the command line says)
CASES = [
    ("smoke", MeasureOptions, {"k": 0}, "`k` must be at least 1", "--num-speculative-tokens must be at least 1"),
    (
        "smoke",
        MeasureOptions,
        {"temperature": -0.5},
        "`temperature` must be at least 0",
        "--temperature must be at least 0",
    ),
    (
        "smoke",
        MeasureOptions,
        {"engine": "tpu"},
        "`engine='tpu'`: expected one of auto, reference, vllm",
        "--engine 'tpu': expected one of auto, reference, vllm",
    ),
    (
        "validate",
        ValidateOptions,
        {"load": "sglang"},
        "`load='sglang'`: expected one of vllm",
        "--load 'sglang': expected one of vllm",
    ),
    (
        "validate",
        ValidateOptions,
        {"load_timeout": 0},
        "`load_timeout` must be at least 1",
        "--load-timeout must be at least 1",
    ),
    (
        "validate",
        ValidateOptions,
        {"serving_context": 0},
        "`serving_context` must be at least 1",
        "--max-model-len must be at least 1",
    ),
    (
        "check",
        CheckOptions,
        {"max_model_len": 0},
        "`max_model_len` must be at least 1",
        "--max-model-len must be at least 1",
    ),
    (
        "capture",
        CaptureOptions,
        {"shard_size": 0},
        "`shard_size` must be at least 1",
        "--shard-size must be at least 1",
    ),
    (
        "upgrade",
        UpgradeOptions,
        {"init": "zeros"},
        "`init='zeros'`: expected one of ones, calibrated",
        "--init 'zeros': expected one of ones, calibrated",
    ),
    ("finetune", FinetuneOptions, {"ttt_steps": 0}, "`ttt_steps` must be at least 1", "--ttt-steps must be at least 1"),
    (
        "report",
        ReportOptions,
        {"finetune_from": "x"},
        "`finetune_from='x'`: expected one of calibrated, identity",
        "--finetune-from 'x': expected one of calibrated, identity",
    ),
    ("drift", DriftOptions, {"depth": 0}, "`depth` must be at least 1", "--depth must be at least 1"),
    (
        "diff",
        DiffOptions,
        {"served": True, "headers_only": True},
        "`served` compares tensor values: drop `headers_only`",
        "--served compares tensor values: drop --headers-only",
    ),
]


@pytest.mark.parametrize(("command", "cls", "kwargs", "python", "cli"), CASES)
def test_an_object_out_of_bounds_is_refused_when_built(
    command: str, cls: type, kwargs: dict[str, Any], python: str, cli: str
) -> None:
    with pytest.raises(UsageError) as err:
        cls(**kwargs)
    assert str(err.value) == python and err.value.exit_code == 2
    assert format_error(err.value, main.get_command(click.Context(main), command)) == cli


def test_every_item_of_a_repeated_field_is_checked() -> None:
    @dataclass(frozen=True)
    class Levels:
        levels: tuple[int, ...] = option(multiple=True, min=1, max=64, help="Concurrency levels.")

        def __post_init__(self) -> None:
            check(self)

    assert Levels((1, 64)).levels == (1, 64)
    with pytest.raises(UsageError, match=r"^`levels` must be at most 64$"):
        Levels((1, 65))


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["--serve-config", "s.yaml"], "Error: --serve-config goes with one --for sglang or --for trtllm\n"),
        (
            ["--vllm-version", "all", "--deep"],
            "Error: --deep does not combine with --vllm-version all: the matrix runs the static rules once per "
            "release; run validate --deep once for the release you deploy on (--vllm-version X.Y.Z)\n",
        ),
    ],
)
def test_the_command_line_names_the_flags_of_a_refused_combination(args: list[str], stderr: str) -> None:
    """Refused when validate's object is built, before the draft is opened (it need not exist)."""
    res = _cli("validate", "no-such-draft", *args)
    assert (res.exit_code, res.stderr) == (2, stderr)


def test_check_refuses_a_baseline_server_without_a_server() -> None:
    with pytest.raises(
        UsageError, match=r"^`baseline_server` goes with `server` \(or \[serve\] server in the policy\)$"
    ):
        run_check("no-such-draft", CheckOptions(baseline_server="http://localhost:1"), policy=Policy())


def test_push_draft_refuses_a_dry_run() -> None:
    with pytest.raises(UsageError, match=r"^`dry_run` sends nothing: call plan_push for the plan$"):
        push_draft("no-such-draft", "org/name", PushOptions(dry_run=True))
