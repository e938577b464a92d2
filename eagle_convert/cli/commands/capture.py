"""`eagle-convert capture --target T --draft D --out CACHE`: the fine-tune's data, cached once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from eagle_convert.cache import CaptureOptions
from eagle_convert.cli.interrupt import on_interrupt
from eagle_convert.cli.options import dataclass_options
from eagle_convert.finetune import FinetuneOptions
from eagle_convert.optionspec import nested, option


def _kept_detail(out: Path) -> str:
    """The interrupt line's tail: every listed shard is whole (atomic per shard), so say how many."""
    try:
        from eagle_convert.cache import read_manifest

        man = read_manifest(out)
    except Exception:
        return f"; nothing was captured into {out} yet"
    return f"; {len(man.shards)} whole shards kept in {out}: run the same capture again to resume"


@dataclass(frozen=True)
class CaptureCommand:
    """`capture`'s options: the models, the cache, the data (`FinetuneOptions`' own) and the capture."""

    target: str = option(metavar="TARGET", help="The target model folder (vLLM or torch runs it).")
    draft: str = option(
        metavar="DRAFT",
        help="The draft folder the cache is for: its aux layer ids (as vLLM reads them) and its vocabulary.",
    )
    out: str = option(
        metavar="CACHE",
        help="The cache folder: created, or resumed when it holds a killed capture of the same data.",
    )
    data: FinetuneOptions = nested(
        FinetuneOptions, only=("prompts", "chat_template", "continuation_tokens"), flags={"prompts": "--prompts"}
    )
    capture: CaptureOptions = nested(CaptureOptions)
    force: bool = option(False, help="Start over when CACHE holds a capture of other data.")
    json: bool = option(False, help="Print the result (manifest summary, tokens/s) as JSON.")


@click.command("capture")
@dataclass_options(CaptureCommand, "opts")
def capture_cmd(opts: CaptureCommand) -> None:
    """Capture TARGET's aux hidden states and logits for DRAFT's training data into the cache CACHE.

    The prompts are rendered with the serving chat template and the target continues each greedily
    (--continuation-tokens, as finetune makes its data); then every whole sequence is prefilled and
    the aux states at DRAFT's aux layer ids, the logits on DRAFT's vocabulary and the token ids go
    into safetensors shards with a manifest (sha256 per shard, one shard written atomically at a
    time). A killed capture run again keeps every shard that still hashes right. `finetune --cache
    CACHE` and `upgrade --init calibrated --cache CACHE` then train or calibrate without loading
    the target.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.cli.render.capture import render_capture
    from eagle_convert.finetune import capture_training_data

    out = Path(opts.out)
    on_interrupt(lambda: _kept_detail(out))
    with ProgressDisplay(json_mode=opts.json) as display:
        res = capture_training_data(
            opts.draft,
            opts.target,
            out,
            opts.data,
            opts.capture,
            force=opts.force,
            say=None if opts.json else display.say,
            on_tick=display.tick,
        )
    if opts.json:
        echo_json(res.to_dict())
    else:
        render_capture(console(), res)


def register(group: click.Group) -> None:
    group.add_command(capture_cmd)
