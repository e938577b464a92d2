"""`eagle-convert report DRAFT --target T --out DIR`: the EAGLE-3 → EAGLE-3.1 story, side by side."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.options import measure_options


@click.command("report")
@click.argument("draft")
@click.option("--target", required=True, metavar="TARGET", help="The target model folder the draft speculates for.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Report folder: new, or an earlier report's folder to resume it (unchanged stages are skipped).",
)
@measure_options(buckets="natural,1024", concurrency_default="Default with --engine vllm: 1,4,16; 'none' turns it off.")
@click.option(
    "--calibrated/--no-calibrated",
    default=True,
    show_default=True,
    help="Also build the calibrated upgrade (upgrade --init calibrated).",
)
@click.option(
    "--calibration-prompts",
    metavar="NAME|FILE|DIR",
    default=None,
    help="Prompts the calibration measures the target's aux hidden states on: a suite (builtin, "
    "spec-bench-sample), a JSONL file or a prepared folder (as --prompts, long context excepted).",
)
@click.option("--finetune/--no-finetune", default=True, show_default=True, help="Build the fine-tuned variant.")
@click.option(
    "--finetune-from",
    type=click.Choice(["calibrated", "identity"]),
    default="calibrated",
    show_default=True,
    help="Which upgrade the fine-tune starts from (identity when there is no calibrated).",
)
@click.option(
    "--finetune-prompts",
    metavar="NAME|FILE|DIR",
    default=None,
    help="Prompts the target continues to make the fine-tune's data (finetune --train-prompts: a suite, "
    "a JSONL file or a prepared folder); keep them apart from the measured prompts.",
)
@click.option(
    "--continuation-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Fine-tune: target tokens per prompt (default: finetune's).",
)
@click.option("--steps-fc-norm", type=click.IntRange(min=0), default=None, help="Fine-tune stage A steps.")
@click.option("--steps-all", type=click.IntRange(min=0), default=None, help="Fine-tune stage B steps.")
@click.option(
    "--capture",
    "capture",
    type=click.Choice(["vllm", "reference"]),
    default=None,
    help="Fine-tune from a capture cache (finetune --capture): the fine-tune's data captured with this engine "
    "(vllm: the target in vLLM, --tensor-parallel-size passed through) into DIR/finetune-capture, then "
    "trained from without the target in memory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print report.json to stdout.")
@click.pass_context
def report_cmd(
    ctx: click.Context,
    draft: str,
    target: str,
    out: Path,
    engine: str,
    prompts_file: str | None,
    categories: tuple[str, ...],
    limit: int | None,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    buckets: str,
    chat_template: str | None,
    tensor_parallel_size: int,
    concurrency: str | None,
    calibrated: bool,
    calibration_prompts: str | None,
    finetune: bool,
    finetune_from: str,
    finetune_prompts: str | None,
    continuation_tokens: int | None,
    steps_fc_norm: int | None,
    steps_all: int | None,
    capture: str | None,
    as_json: bool,
) -> None:
    """Inspect DRAFT, upgrade it to EAGLE-3.1 (identity and calibrated fc_norm), fine-tune, validate,
    and measure every variant against TARGET on the same prompts, buckets and engine.

    Writes DIR/report.md, report.json (its `acceptance` has the shape of smoke --json), PNGs,
    commands.sh (the command of each step) and one folder per variant, each with its model card.
    Re-running the same command skips every stage whose inputs and options did not change, so an
    interrupted report resumes where it stopped. Exit 0 when the report was written, 1 on a
    failure (the message names the stage), 2 on usage, 130 when interrupted.
    """
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.measure import DEFAULT_CONCURRENCY, default_engine, parse_buckets, parse_concurrency
    from eagle_convert.report import ReportOptions, run_report

    chosen = None if engine == "auto" else engine
    if concurrency is not None and concurrency.strip().lower() == "none":
        levels: list[int] = []
    elif concurrency is not None:
        levels = parse_concurrency(concurrency)  # run_report refuses levels without --engine vllm
    else:
        levels = list(DEFAULT_CONCURRENCY) if (chosen or default_engine()) == "vllm" else []
    opts = ReportOptions(
        engine=chosen,
        prompts_file=prompts_file,
        categories=categories,
        limit=limit,
        k=k,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        buckets=tuple(parse_buckets(buckets)),
        chat_template=chat_template,
        tensor_parallel_size=tensor_parallel_size,
        concurrency=tuple(levels),
        calibrate=calibrated,
        calibration_prompts=calibration_prompts,
        finetune=finetune,
        finetune_from=finetune_from,
        finetune_prompts=finetune_prompts,
        continuation_tokens=continuation_tokens,
        steps_fc_norm=steps_fc_norm,
        steps_all=steps_all,
        capture=capture,
    )
    events: list[object] = []

    def resume() -> str:  # read when interrupted: how many stages had finished by then
        return (
            f" after {len(events)} finished stages, which are recorded in {out}; run the same command again to resume"
        )

    on_interrupt(resume)
    from eagle_convert.cli.progress import ProgressDisplay

    with ProgressDisplay(json_mode=as_json) as display:
        result = run_report(
            draft, target, out, opts, progress=display.say, on_stage=events.append, on_tick=display.tick
        )
    if as_json:
        from eagle_convert.cli.output import echo_json

        echo_json(result.data)
    else:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.report import render_report

        render_report(console(), result)
    click.echo(f"report: {result.files['report.md']}", err=as_json)
    click.echo(f"plot: {result.files['report.png']}", err=as_json)


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
