"""`eagle-convert finetune DRAFT --target TARGET --out OUT`: the short TTT fine-tune after `upgrade`."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cache import CaptureOptions
from eagle_convert.cli.commands._interrupt import output_detail
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.cli.options import cache_options, dataclass_options
from eagle_convert.errors import UsageError
from eagle_convert.finetune import FinetuneOptions

CAPTURE_FIELDS = (
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "shard_size",
    "max_model_len",
)  # the capture settings finetune --capture takes


@click.command("finetune")
@click.argument("draft")
@click.option("--target", required=True, metavar="TARGET", help="The target model folder the draft speculates for.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    metavar="OUT",
    help="New folder for the fine-tuned draft (vLLM layout, written atomically).",
)
@dataclass_options(FinetuneOptions, "opts")
@cache_options(
    cache_help="Train from this capture cache (eagle-convert capture): its sequences and the target features in it; "
    "the target is not loaded (its embedding is read from its files). With --capture: the folder to capture "
    "into (default OUT.cache).",
    capture_help="Capture the training data first (vllm: the target in vLLM, tensor parallel if asked; reference: the "
    "torch target) into --cache, then train from the cache. A killed run resumes the cache.",
)
@dataclass_options(
    CaptureOptions,
    "capture_opts",
    only=CAPTURE_FIELDS,
    help_extra={k: "With --capture." for k in CAPTURE_FIELDS},
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing OUT (atomically); with --capture, also restart a cache of other data.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the result as JSON.")
@click.pass_context
def finetune_cmd(
    ctx: click.Context,
    draft: str,
    target: str,
    out: Path,
    opts: FinetuneOptions,
    cache: Path | None,
    capture_engine: str | None,
    capture_opts: CaptureOptions,
    force: bool,
    as_json: bool,
) -> None:
    """Fine-tune DRAFT (typically an `upgrade`d EAGLE-3.1 draft) against TARGET into the new folder OUT.

    The training data is TARGET's own greedy continuation of each prompt, rendered with the chat
    template, so nothing is downloaded. Stage A trains fc_norm.* and fc, stage B every draft weight
    but the shared embedding and lm_head (small lr, L2-SP), both with training-time test. Every
    5th sequence is held out: each step is scored by expected acceptance length on it and the
    best step (the input included) is written. DRAFT is never modified; OUT keeps DRAFT's config
    plus a _eagle_convert provenance entry, and gets a model card (README.md). With --cache (a
    capture cache) or --capture (capture first), the target's features come from the cache and the
    target is not loaded for training.
    """
    from dataclasses import replace

    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.cli.render.finetune import FinetuneProgress, render_plan, render_result
    from eagle_convert.finetune import plan_finetune, run_finetune, serve_torchrun, torchrun_world

    world = torchrun_world()
    if world is not None:  # one of torchrun's ranks (docs/scale.md): rank 0 runs the fine-tune, the rest train
        # torchrun's own parser takes `--nproc` for its `--nproc-per-node`: the world size is the default here
        if opts.nproc not in (1, world[1]):
            raise UsageError(f"--nproc {opts.nproc}: torchrun started {world[1]} processes; leave --nproc out")
        opts = replace(opts, nproc=world[1])
        if world[0] > 0:
            serve_torchrun()
            return
    on_interrupt(output_detail(out, draft))
    capture = None if capture_engine is None else replace(capture_opts, engine=capture_engine)
    plan = plan_finetune(draft, target, out, opts, force=force, cache=cache, capture=capture)
    for line in plan.notices:
        click.echo(f"Note: {line}", err=True)
    screen = console()
    if not as_json:
        render_plan(screen, plan)
    with ProgressDisplay(json_mode=as_json) as display:
        result = run_finetune(plan, progress=FinetuneProgress(display))
    if as_json:
        echo_json({"plan": plan.to_dict(), "result": result.to_dict()})
    else:
        render_result(screen, plan, result)


def register(group: click.Group) -> None:
    group.add_command(finetune_cmd)
