"""`DriftOptions`: what `drift` measures, declared once; its prompt options are smoke's (composed).

`drift`'s click options are made from these fields (`optionspec`), `run_drift` takes the object,
and report's drift stages run it and write their `drift` line in `commands.sh` from it
(`optionspec.to_argv`), so report measures what `drift` would.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.measure import NATURAL, MeasureOptions, format_buckets, parse_buckets
from eagle_convert.optionspec import check, nested, option

CROSS_CHECK_ENGINES = ("vllm",)


def _buckets(text: str) -> tuple[int, ...]:
    return tuple(parse_buckets(text))


@dataclass(frozen=True)
class DriftOptions:
    """The prompts (`select`: smoke's --prompts, --category and --limit), the chain's depth, the
    sinks, the tokens per prompt, the buckets, the templates, the device and the vLLM cross-check."""

    select: MeasureOptions = nested(MeasureOptions, only=("prompts", "categories", "limit"))
    depth: int = option(8, min=1, help="Draft steps per round (the chain's k), beyond the serving k on purpose.")
    sink_tokens: int = option(4, min=1, help="The first context positions counted as attention sinks.")
    max_new_tokens: int = option(
        64, min=1, help="Tokens generated per prompt; every draft round is one position drafted from."
    )
    buckets: tuple[int, ...] = option(
        (NATURAL,),
        parse=_buckets,
        format=format_buckets,
        help="Context lengths to measure, e.g. natural,256,1024 (prompts padded with neutral filler text).",
    )
    chat_templates: tuple[str, ...] = option(
        flag="--chat-template",
        multiple=True,
        help="Jinja template (file or literal) replacing the target's, 'none' for raw text; repeat to compare "
        "templates. Default: the target's own.",
    )
    device: str | None = option(None, help="Where the reference engine runs (cpu, cuda). Default: cuda if present.")
    cross_check: str | None = option(
        None,
        choices=CROSS_CHECK_ENGINES,
        help="Also read each draft's fed-back RMS by depth from vLLM's own draft model on the same prompts "
        "and compare it with the reference engine's (one vLLM engine start per draft; exit 1 when a depth "
        "differs by more than the tolerance, docs/drift.md).",
    )

    def __post_init__(self) -> None:
        check(self)
