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
from eagle_convert.drift import DriftOptions
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.measure import NATURAL, MeasureOptions
from eagle_convert.optionspec import to_argv
from eagle_convert.report import ReportOptions
from eagle_convert.upgrade.options import UpgradeOptions


def _root() -> click.Context:
    # The group's settings (-h): click caches a command's help option from the first context it sees.
    return click.Context(main, info_name="main", **main.context_settings)


def _command(name: str, params: dict):
    """The command object (`SmokeCommand` ...) the command `name` builds from its parsed parameters."""
    from eagle_convert.cli.commands.capture import CaptureCommand
    from eagle_convert.cli.commands.drift import DriftCommand
    from eagle_convert.cli.commands.finetune import FinetuneCommand
    from eagle_convert.cli.commands.report import ReportCommand
    from eagle_convert.cli.commands.smoke import SmokeCommand
    from eagle_convert.cli.commands.upgrade import UpgradeCommand

    cls = {
        "capture": CaptureCommand,
        "drift": DriftCommand,
        "finetune": FinetuneCommand,
        "report": ReportCommand,
        "smoke": SmokeCommand,
        "upgrade": UpgradeCommand,
    }[name]
    return options_from_params(cls, "cmd" if name == "upgrade" else "opts", params)


def _parse(name: str, argv: list[str], part: str):
    """The option object `part` of what the command `name` builds from `argv` (click parses, nothing runs)."""
    root = _root()
    cmd = main.get_command(root, name)
    assert cmd is not None
    ctx = cmd.make_context(name, list(argv), parent=root)  # a copy: click consumes the list
    return getattr(_command(name, ctx.params), part)


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
    assert _parse("finetune", ft, "finetune") == FINETUNE
    assert _parse("upgrade", ["D", "--out", "O", *to_argv(UPGRADE)], "upgrade") == UPGRADE


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
    measure=MEASURE,
    calibrate=False,
    calibration_prompts="cal.jsonl",
    finetune=False,
    finetune_from="identity",
    train=FinetuneOptions(prompts="ft.jsonl", continuation_tokens=12, steps_fc_norm=0, steps_all=3),
    capture="reference",
    drift=False,
    drifting=DriftOptions(depth=5),
    servers=("http://staging:8000",),
    labels=("eagle31",),
    baseline_server="http://staging:8001",
    serve_for=("vllm", "sglang==0.5.23"),
)
DRIFT = DriftOptions(
    select=MeasureOptions(prompts="my prompts.jsonl", categories=("chat",), limit=2),
    depth=5,
    sink_tokens=2,
    max_new_tokens=9,
    buckets=(NATURAL, 256),
    chat_templates=("none", "t.jinja"),
    device="cpu",
    cross_check="vllm",
)


def test_measure_and_report_options_round_trip_through_smoke_and_report() -> None:
    for f in MeasureOptions.__dataclass_fields__:
        assert getattr(MEASURE, f) != getattr(MeasureOptions(), f), f"MeasureOptions.{f}: set it away from its default"
    for f in ReportOptions.__dataclass_fields__:
        if f != "extra":  # report does not offer it
            assert getattr(REPORT, f) != getattr(ReportOptions(), f), f"ReportOptions.{f}: set it away from its default"
    assert _parse("smoke", ["D", "--target", "T", *to_argv(MEASURE)], "measure") == MEASURE
    assert _parse("report", ["D", "--target", "T", "--out", "O", *to_argv(REPORT)], "report") == REPORT
    # report's own defaults, the library's too: two buckets, concurrency left for resolve to pick
    dflt = _parse("report", ["D", "--target", "T", "--out", "O"], "report")
    assert dflt == ReportOptions() and dflt.measure.buckets == (NATURAL, 1024) and dflt.measure.concurrency is None
    none = _parse("report", ["D", "--target", "T", "--out", "O", "--concurrency", "none"], "report")
    assert none.measure.concurrency == ()
    assert _parse("smoke", ["D", "--target", "T"], "measure") == MeasureOptions()
    # report offers only the fine-tune's and drift's fields it names, under its own flags
    assert to_argv(ReportOptions(train=FinetuneOptions(prompts="x", lr_all=1.0), drifting=DriftOptions(depth=2))) == [
        "--finetune-prompts",
        "x",
        "--drift-depth",
        "2",
    ]


def test_drift_and_server_options_round_trip_through_their_commands() -> None:
    for f in DriftOptions.__dataclass_fields__:
        assert getattr(DRIFT, f) != getattr(DriftOptions(), f), f"DriftOptions.{f}: set it away from its default"
    assert _parse("drift", ["D", "--target", "T", *to_argv(DRIFT)], "drift") == DRIFT
    assert _parse("drift", ["D", "--target", "T"], "drift") == DriftOptions()
    from eagle_convert.cli.commands.smoke_server import Servers
    from eagle_convert.served import ServerOptions

    servers = Servers(servers=("http://a:1", "http://b:2"), labels=("a", "b"), baseline_server="http://c:3")
    sopts = ServerOptions(request_timeout=5.0, timeout=60.0, max_failed=0.5, timing_only=True, exclusive=True)
    argv = ["--api-key", "sk-1", *to_argv(servers), *to_argv(sopts)]
    assert _parse("smoke", argv, "servers") == servers
    assert _parse("smoke", argv, "server") == replace(sopts, api_key="sk-1")


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
        smoke_command(t, [d, o / "eagle31-identity"], replace(opts.measure, engine="reference")),
    ]


def _parse_line(line: str) -> tuple[str, click.Context]:
    argv = shlex.split(line)
    assert argv[0] == "eagle-convert"
    root = _root()
    cmd = main.get_command(root, argv[1])
    assert cmd is not None
    return argv[1], cmd.make_context(argv[1], argv[2:], parent=root)


@pytest.mark.parametrize(
    "opts", [ReportOptions(MeasureOptions(engine="reference", k=4, limit=1)), REPORT], ids=["small", "every"]
)
def test_every_commands_sh_line_parses_back_into_the_same_options(opts: ReportOptions, tmp_path: Path) -> None:
    """Each line, split as a shell splits it, parsed by the command it names: the same option objects."""
    from eagle_convert.cache import CaptureOptions

    opts = replace(opts, measure=replace(opts.measure, concurrency=()))
    lines = _commands_sh_lines(opts, tmp_path)
    expected = [
        UpgradeOptions(),
        UpgradeOptions(init="calibrated", calibration_prompts="c p.jsonl"),
        opts.finetune_options(),
        FINETUNE,
        replace(opts.measure, engine="reference"),
    ]
    for line, (part, want) in zip(
        lines, zip(["upgrade", "upgrade", "finetune", "finetune", "measure"], expected), strict=True
    ):
        name, ctx = _parse_line(line)
        assert "--force" in line or name == "smoke"
        assert getattr(_command(name, ctx.params), part) == want, line
    name, ctx = _parse_line(lines[3])
    ft = _command(name, ctx.params)
    assert ft.capture == "vllm" and ft.cache == str(tmp_path / "out" / "finetune-capture")
    assert ft.capture_opts == CaptureOptions(tensor_parallel_size=2)
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

    opts = ReportOptions(MeasureOptions(engine="reference", limit=1, buckets=(NATURAL, 1024)))
    variants = [Variant("a", tmp_path / "a", "A", None), Variant("b", tmp_path / "b b", "B", None)]
    [row] = _commands({}, variants, tmp_path / "t", opts, opts.measure)
    _, ctx = _parse_line(row["command"])
    smoke = _command("smoke", ctx.params)
    assert smoke.measure == opts.measure and smoke.json and smoke.target == str(tmp_path / "t")
    assert ctx.params["drafts"] == (str(tmp_path / "a"), str(tmp_path / "b b"))
    # and the drift line (report's drift stages): the same prompts, buckets, tokens, template and depth
    measure = replace(opts.measure, prompts="my prompts.jsonl", categories=("chat",), chat_template="none")
    opts = replace(opts, measure=measure, drifting=DriftOptions(depth=5))
    [_, row] = _commands({}, variants, tmp_path / "t", opts, opts.measure, drift=True)
    _, ctx = _parse_line(row["command"])
    assert ctx.params["drafts"] == (str(tmp_path / "a"), str(tmp_path / "b b"))
    assert _command("drift", ctx.params).drift == DriftOptions(
        select=MeasureOptions(prompts="my prompts.jsonl", categories=("chat",), limit=1),
        depth=5,
        buckets=(NATURAL, 1024),
        chat_templates=("none",),
    )
