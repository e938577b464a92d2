"""`eagle-convert finetune DRAFT --target TARGET --out OUT`: the short TTT fine-tune after `upgrade`."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.commands._interrupt import output_detail
from eagle_convert.cli.deprecated import renamed_option
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.cli.options import dataclass_options
from eagle_convert.finetune import FinetuneOptions


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
@renamed_option("--prompts", "--train-prompts")
@dataclass_options(FinetuneOptions, "opts")
@click.option("--force", is_flag=True, help="Replace an existing OUT (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the result as JSON.")
@click.pass_context
def finetune_cmd(
    ctx: click.Context, draft: str, target: str, out: Path, opts: FinetuneOptions, force: bool, as_json: bool
) -> None:
    """Fine-tune DRAFT (typically an `upgrade`d EAGLE-3.1 draft) against TARGET into the new folder OUT.

    The training data is TARGET's own greedy continuation of each prompt, rendered with the chat
    template, so nothing is downloaded. Stage A trains fc_norm.* and fc, stage B every draft weight
    but the shared embedding and lm_head (small lr, L2-SP), both with training-time test. Every
    5th sequence is held out: each step is scored by expected acceptance length on it and the
    best step (the input included) is written. DRAFT is never modified; OUT keeps DRAFT's config
    plus a _eagle_convert provenance entry, and gets a model card (README.md).
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.cli.render.finetune import FinetuneProgress, render_plan, render_result
    from eagle_convert.finetune import plan_finetune, run_finetune

    on_interrupt(output_detail(out, draft))
    plan = plan_finetune(draft, target, out, opts, force=force)
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
