"""Option objects (`optionspec`): each field is one click option, and `to_argv` writes the flags that
parse back, through the real click command, into an equal object (what report's commands.sh relies on).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import click
import pytest

from eagle_convert.cli.app import main
from eagle_convert.cli.options import options_from_params
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.measure import NATURAL, MeasureOptions
from eagle_convert.optionspec import to_argv
from eagle_convert.report import ReportOptions
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
    serve_for=("vllm", "sglang"),
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


MEASURE = MeasureOptions(
    engine="reference",
    prompts="my prompts.jsonl",
    categories=("coding", "chat"),
    limit=2,
    k=5,
    max_new_tokens=9,
    temperature=0.5,
    seed=7,
    buckets=(NATURAL, 256),
    chat_template="none",
    tensor_parallel_size=2,
    concurrency=(1, 4),
    speculative_config='{"method": "eagle3", "num_speculative_tokens": 5}',
)
# Away from both the class's defaults and report's own (--buckets natural,1024; --concurrency unset).
REPORT = ReportOptions(
    **{f: getattr(MEASURE, f) for f in MeasureOptions.__dataclass_fields__},
    calibrate=False,
    calibration_prompts="cal.jsonl",
    finetune=False,
    finetune_from="identity",
    finetune_prompts="ft.jsonl",
    continuation_tokens=12,
    steps_fc_norm=0,
    steps_all=3,
    capture="reference",
    drift=False,
    drift_depth=5,
    servers=("http://staging:8000",),
    labels=("eagle31",),
    baseline_server="http://staging:8001",
    serve_for=("vllm", "sglang==0.5.23"),
)


def test_measure_and_report_options_round_trip_through_smoke_and_report() -> None:
    for f in MeasureOptions.__dataclass_fields__:
        assert getattr(MEASURE, f) != getattr(MeasureOptions(), f), f"MeasureOptions.{f}: set it away from its default"
    for f in ReportOptions.__dataclass_fields__:
        if f != "extra":  # report does not offer it
            assert getattr(REPORT, f) != getattr(ReportOptions(), f), f"ReportOptions.{f}: set it away from its default"
    assert _parse("smoke", ["D", "--target", "T", *to_argv(MEASURE)], MeasureOptions) == MEASURE
    assert _parse("report", ["D", "--target", "T", "--out", "O", *to_argv(REPORT)], ReportOptions) == REPORT
    # report's own defaults: two buckets, concurrency left for the command to pick
    dflt = _parse("report", ["D", "--target", "T", "--out", "O"], ReportOptions)
    assert dflt.buckets == (NATURAL, 1024) and dflt.concurrency is None
    assert (
        _parse("report", ["D", "--target", "T", "--out", "O", "--concurrency", "none"], ReportOptions).concurrency == ()
    )
    assert _parse("smoke", ["D", "--target", "T"], MeasureOptions) == MeasureOptions()


def _commands_sh_lines(opts: ReportOptions, tmp: Path) -> list[str]:
    """The commands.sh lines report writes for these options (the stage builders, without running)."""
    from eagle_convert.cache import CaptureOptions
    from eagle_convert.report.stages import finetune_command, smoke_command, upgrade_command

    d, t, o = tmp / "my draft", tmp / "target", tmp / "out"
    cap = CaptureOptions(engine="vllm", tensor_parallel_size=2)
    return [
        upgrade_command(d, o / "eagle31-identity", UpgradeOptions()),
        upgrade_command(
            d, o / "eagle31-calibrated", UpgradeOptions(init="calibrated", calibration_prompts="c p.jsonl"), t
        ),
        finetune_command(o / "eagle31-calibrated", t, o / "eagle31-finetuned", opts.finetune_options()),
        finetune_command(o / "eagle31-calibrated", t, o / "ft", FINETUNE, cap, o / "finetune-capture"),
        smoke_command(t, [d, o / "eagle31-identity"], opts, "reference"),
    ]


def _parse_line(line: str) -> tuple[str, click.Context]:
    argv = shlex.split(line)
    assert argv[0] == "eagle-convert"
    root = _root()
    cmd = main.get_command(root, argv[1])
    assert cmd is not None
    return argv[1], cmd.make_context(argv[1], argv[2:], parent=root)


@pytest.mark.parametrize("opts", [ReportOptions(engine="reference", k=4, limit=1), REPORT], ids=["small", "every"])
def test_every_commands_sh_line_parses_back_into_the_same_options(opts: ReportOptions, tmp_path: Path) -> None:
    """Each line, split as a shell splits it, parsed by the command it names: the same option objects."""
    from eagle_convert.cache import CaptureOptions

    lines = _commands_sh_lines(replace(opts, concurrency=()), tmp_path)
    expected = [
        UpgradeOptions(),
        UpgradeOptions(init="calibrated", calibration_prompts="c p.jsonl"),
        opts.finetune_options(),
        FINETUNE,
        replace(opts.measure(), engine="reference", concurrency=()),
    ]
    for line, want in zip(lines, expected, strict=True):
        name, ctx = _parse_line(line)
        assert "--force" in line or name == "smoke"
        assert options_from_params(type(want), "opts", ctx.params) == want, line
    _, ft = _parse_line(lines[3])
    assert ft.params["capture_engine"] == "vllm" and ft.params["cache"] == tmp_path / "out" / "finetune-capture"
    assert options_from_params(CaptureOptions, "capture_opts", ft.params) == CaptureOptions(tensor_parallel_size=2)
    assert shlex.split(lines[0])[1:5] == [
        "upgrade",
        str(tmp_path / "my draft"),
        "--out",
        str(tmp_path / "out" / "eagle31-identity"),
    ]


def test_report_smoke_line_parses_back(tmp_path: Path) -> None:
    """The side-by-side smoke line write_outputs adds to commands.sh (the stage lines are recorded per stage)."""
    from eagle_convert.report.runner import Variant
    from eagle_convert.report.write import _commands

    opts = ReportOptions(engine="reference", limit=1, buckets=(NATURAL, 1024))
    variants = [Variant("a", tmp_path / "a", "A", None), Variant("b", tmp_path / "b b", "B", None)]
    [row] = _commands({}, variants, tmp_path / "t", opts, "reference")
    _, ctx = _parse_line(row["command"])
    assert options_from_params(MeasureOptions, "opts", ctx.params) == replace(opts.measure(), engine="reference")
    assert ctx.params["drafts"] == (str(tmp_path / "a"), str(tmp_path / "b b"))
    assert ctx.params["target"] == str(tmp_path / "t")
    # and the drift line (report's drift stages): the same prompts, buckets and depth
    opts = replace(opts, prompts="my prompts.jsonl", categories=("chat",), drift_depth=5)
    [_, row] = _commands({}, variants, tmp_path / "t", opts, "reference", drift=True)
    _, ctx = _parse_line(row["command"])
    assert ctx.params["drafts"] == (str(tmp_path / "a"), str(tmp_path / "b b"))
    got = {k: ctx.params[k] for k in ("prompts_file", "categories", "limit", "depth", "buckets", "max_new_tokens")}
    assert got == {
        "prompts_file": "my prompts.jsonl",
        "categories": ("chat",),
        "limit": 1,
        "depth": 5,
        "buckets": "natural,1024",
        "max_new_tokens": opts.max_new_tokens,
    }
