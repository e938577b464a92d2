"""`eagle-convert capture --target T --draft D --out CACHE`: the fine-tune's data, cached once."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cache import CaptureOptions
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.cli.options import dataclass_options
from eagle_convert.finetune import FinetuneOptions


def _kept_detail(out: Path) -> str:
    """The interrupt line's tail: every listed shard is whole (atomic per shard), so say how many."""
    try:
        from eagle_convert.cache import read_manifest

        man = read_manifest(out)
    except Exception:
        return f"; nothing was captured into {out} yet"
    return f"; {len(man.shards)} whole shards kept in {out}: run the same capture again to resume"


@click.command("capture")
@click.option("--target", required=True, metavar="TARGET", help="The target model folder (vLLM or torch runs it).")
@click.option(
    "--draft",
    required=True,
    metavar="DRAFT",
    help="The draft folder the cache is for: its aux layer ids (as vLLM reads them) and its vocabulary.",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    metavar="CACHE",
    help="The cache folder: created, or resumed when it holds a killed capture of the same data.",
)
@click.option(
    "--prompts",
    "prompts",
    metavar="NAME|FILE|DIR",
    default=None,
    help="Prompts the target continues, as finetune --train-prompts reads them: a suite (builtin, "
    'spec-bench-sample), a JSONL file ({"prompt": ...} or {"messages": [...]} per line, or Spec-Bench / '
    "SPEED-Bench rows) or a prepared folder. Default: the built-in set.",
)
@dataclass_options(FinetuneOptions, "data", only=("chat_template", "continuation_tokens"))
@dataclass_options(CaptureOptions, "opts")
@click.option("--force", is_flag=True, help="Start over when CACHE holds a capture of other data.")
@click.option("--json", "as_json", is_flag=True, help="Print the result (manifest summary, tokens/s) as JSON.")
def capture_cmd(
    target: str,
    draft: str,
    out: Path,
    prompts: str | None,
    data: FinetuneOptions,
    opts: CaptureOptions,
    force: bool,
    as_json: bool,
) -> None:
    """Capture TARGET's aux hidden states and logits for DRAFT's training data into the cache CACHE.

    The prompts are rendered with the serving chat template and the target continues each greedily
    (--continuation-tokens, as finetune makes its data); then every whole sequence is prefilled and
    the aux states at DRAFT's aux layer ids, the logits on DRAFT's vocabulary and the token ids go
    into safetensors shards with a manifest (sha256 per shard, one shard written atomically at a
    time). A killed capture run again keeps every shard that still hashes right. `finetune --cache
    CACHE` and `upgrade --init calibrated --cache CACHE` then train or calibrate without loading
    the target.
    """
    from dataclasses import replace

    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.cli.render.capture import render_capture
    from eagle_convert.finetune import capture_training_data

    on_interrupt(lambda: _kept_detail(out))
    with ProgressDisplay(json_mode=as_json) as display:
        res = capture_training_data(
            draft,
            target,
            out,
            replace(data, prompts=prompts),
            opts,
            force=force,
            say=None if as_json else display.say,
            on_tick=display.tick,
        )
    if as_json:
        echo_json(res.to_dict())
    else:
        render_capture(console(), res)


def register(group: click.Group) -> None:
    group.add_command(capture_cmd)
