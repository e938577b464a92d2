"""`eagle-convert finetune DRAFT --target TARGET --out OUT`: the short TTT fine-tune after `upgrade`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from eagle_convert.cache import CAPTURE_ENGINES, CaptureOptions
from eagle_convert.cli.interrupt import on_interrupt, output_detail
from eagle_convert.cli.options import dataclass_options
from eagle_convert.errors import UsageError
from eagle_convert.finetune import FinetuneOptions
from eagle_convert.optionspec import nested, option

CAPTURE_FIELDS = (
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "shard_size",
    "max_model_len",
)  # the capture settings finetune --capture takes


@dataclass(frozen=True)
class FinetuneCommand:
    """`finetune`'s options: the target, the output, the training (`FinetuneOptions`), the capture cache."""

    target: str = option(metavar="TARGET", help="The target model folder the draft speculates for.")
    out: str = option(metavar="OUT", help="New folder for the fine-tuned draft (vLLM layout, written atomically).")
    finetune: FinetuneOptions = nested(FinetuneOptions)
    cache: str | None = option(
        None,
        metavar="CACHE",
        help="Train from this capture cache (eagle-convert capture): its sequences and the target features in it; "
        "the target is not loaded (its embedding is read from its files). With --capture: the folder to capture "
        "into (default OUT.cache).",
    )
    capture: str | None = option(
        None,
        choices=CAPTURE_ENGINES,
        help="Capture the training data first (vllm: the target in vLLM, tensor parallel if asked; reference: the "
        "torch target) into --cache, then train from the cache. A killed run resumes the cache.",
    )
    capture_opts: CaptureOptions = nested(CaptureOptions, only=CAPTURE_FIELDS)
    force: bool = option(
        False, help="Replace an existing OUT (atomically); with --capture, also restart a cache of other data."
    )
    json: bool = option(False, help="Print the plan and the result as JSON.")


@click.command("finetune")
@click.argument("draft")
@dataclass_options(FinetuneCommand, "opts", help_extra={f"capture_opts.{k}": "With --capture." for k in CAPTURE_FIELDS})
def finetune_cmd(draft: str, opts: FinetuneCommand) -> None:
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

    cmd, train = opts, opts.finetune
    out, cache = Path(cmd.out), None if cmd.cache is None else Path(cmd.cache)
    world = torchrun_world()
    if world is not None:  # one of torchrun's ranks (docs/scale.md): rank 0 runs the fine-tune, the rest train
        # torchrun's own parser takes `--nproc` for its `--nproc-per-node`: the world size is the default here
        if train.nproc not in (1, world[1]):
            raise UsageError(f"--nproc {train.nproc}: torchrun started {world[1]} processes; leave --nproc out")
        train = replace(train, nproc=world[1])
        if world[0] > 0:
            serve_torchrun()
            return
    on_interrupt(output_detail(out, draft))
    capture = None if cmd.capture is None else replace(cmd.capture_opts, engine=cmd.capture)
    plan = plan_finetune(draft, cmd.target, out, train, force=cmd.force, cache=cache, capture=capture)
    for line in plan.notices:
        click.echo(f"Note: {line}", err=True)
    screen = console()
    if not cmd.json:
        render_plan(screen, plan)
    with ProgressDisplay(json_mode=cmd.json) as display:
        result = run_finetune(plan, progress=FinetuneProgress(display))
    if cmd.json:
        echo_json({"plan": plan.to_dict(), "result": result.to_dict()})
    else:
        render_result(screen, plan, result)


def register(group: click.Group) -> None:
    group.add_command(finetune_cmd)
