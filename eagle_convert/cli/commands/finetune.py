"""`eagle-convert finetune DRAFT --target TARGET --out OUT`: the short TTT fine-tune after `upgrade`."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.commands._interrupt import output_detail
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.finetune.plan import DEFAULT_CONTINUATION_TOKENS, DEFAULT_MAX_LEN, DEFAULT_STAGES

_A, _B = DEFAULT_STAGES


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
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False),
    default=None,
    help='JSONL prompts ({"prompt": ...} or {"messages": [...]} per line) the target continues '
    "to make the training data. Default: the built-in set.",
)
@click.option(
    "--chat-template",
    default=None,
    help="Jinja template (file or literal) replacing the target's; 'none' for raw text. "
    "Use the template you serve with.",
)
@click.option(
    "--continuation-tokens",
    type=int,
    default=DEFAULT_CONTINUATION_TOKENS,
    show_default=True,
    help="Target greedy tokens generated per prompt.",
)
@click.option(
    "--max-len",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_LEN,
    show_default=True,
    help="Train on the last N positions of each sequence (the target still reads all of it).",
)
@click.option("--whole-sequences", is_flag=True, help="Train on whole sequences (slower on long prompts).")
@click.option(
    "--eval-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Score the held-out expected acceptance length every N steps; the best step is written.",
)
@click.option(
    "--steps-fc-norm",
    type=click.IntRange(min=0),
    default=_A.steps,
    show_default=True,
    help="Stage A steps (fc_norm.* and fc train); 0 skips the stage.",
)
@click.option(
    "--steps-all",
    type=click.IntRange(min=0),
    default=_B.steps,
    show_default=True,
    help="Stage B steps (every weight but embed_tokens / lm_head); 0 skips the stage.",
)
@click.option("--lr-fc-norm", type=float, default=_A.lr, show_default=True, help="Stage A peak learning rate.")
@click.option("--lr-all", type=float, default=_B.lr, show_default=True, help="Stage B peak learning rate.")
@click.option(
    "--l2sp",
    type=float,
    default=_B.l2sp,
    show_default=True,
    help="Stage B L2-SP weight: pulls the weights toward those the stage starts from.",
)
@click.option(
    "--ttt-steps",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Training-time-test depth (draft steps unrolled per position).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the batch order and the initial state.")
@click.option("--force", is_flag=True, help="Replace an existing OUT (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the result as JSON.")
@click.pass_context
def finetune_cmd(
    ctx: click.Context,
    draft: str,
    target: str,
    out: Path,
    prompts_file: str | None,
    chat_template: str | None,
    continuation_tokens: int,
    max_len: int,
    whole_sequences: bool,
    eval_every: int,
    steps_fc_norm: int,
    steps_all: int,
    lr_fc_norm: float,
    lr_all: float,
    l2sp: float,
    ttt_steps: int,
    seed: int,
    force: bool,
    as_json: bool,
) -> None:
    """Fine-tune DRAFT (typically an `upgrade`d EAGLE-3.1 draft) against TARGET into the new folder OUT.

    The training data is TARGET's own greedy continuation of each prompt, rendered with the chat
    template, so nothing is downloaded. Stage A trains fc_norm.* and fc, stage B every draft weight
    but the shared embedding and lm_head (small lr, L2-SP), both with training-time test. Every
    5th sequence is held out: each step is scored by expected acceptance length on it and the
    best step (the input included) is written. DRAFT is never modified; OUT keeps DRAFT's config
    plus a _eagle_convert provenance entry, and gets a model card (README.md).
    """
    from dataclasses import replace

    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.cli.render.finetune import FinetuneProgress, render_plan, render_result
    from eagle_convert.finetune.plan import plan_finetune
    from eagle_convert.finetune.run import run_finetune

    on_interrupt(output_detail(out, draft))
    stages = [replace(_A, steps=steps_fc_norm, lr=lr_fc_norm), replace(_B, steps=steps_all, lr=lr_all, l2sp=l2sp)]
    plan = plan_finetune(
        draft,
        target,
        out,
        prompts=prompts_file,
        chat_template=chat_template,
        continuation_tokens=continuation_tokens,
        stages=stages,
        ttt_steps=ttt_steps,
        seed=seed,
        force=force,
        max_len=None if whole_sequences else max_len,
        eval_every=eval_every,
    )
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
