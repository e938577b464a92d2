"""`MeasureOptions`: the measurement settings smoke and report share, declared once with help and bounds.

`smoke`'s and `report`'s click options are made from these fields (`optionspec`), `run_smoke` and
`measure_drafts` take the object, and report's `commands.sh` writes its `smoke` lines from it
(`optionspec.to_argv`), so a flag cannot mean one thing in smoke and another in report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_convert.measure.prompts import NATURAL, parse_buckets
from eagle_convert.measure.suites import PROMPTS_HELP
from eagle_convert.measure.throughput import parse_concurrency
from eagle_convert.optionspec import check, option
from eagle_convert.validate import speculative_config_option

__all__ = [
    "ENGINE_CHOICES",
    "ENGINES",
    "default_engine",
    "MeasureOptions",
    "format_buckets",
    "format_levels",
    "parse_levels",
]

DEFAULT_K = 3
ENGINES = ("reference", "vllm")
ENGINE_CHOICES = ("auto", *ENGINES)


def default_engine() -> str:
    """vllm when it is importable and a GPU is present, else the reference engine."""
    from eagle_convert.vllm_model import vllm_available

    if not vllm_available():
        return "reference"
    import torch

    return "vllm" if torch.cuda.is_available() else "reference"


def _buckets(text: str) -> tuple[int, ...]:
    return tuple(parse_buckets(text))


def format_buckets(buckets: tuple[int, ...]) -> str:
    """`(0, 1024)` -> `"natural,1024"` (the inverse of `parse_buckets`)."""
    return ",".join("natural" if b == NATURAL else str(b) for b in buckets)


def parse_levels(text: str) -> tuple[int, ...]:
    """`"1,4,16"` -> `(1, 4, 16)`; `"none"` -> `()` (report: no per-user tokens/s)."""
    return () if text.strip().lower() == "none" else tuple(parse_concurrency(text))


def format_levels(levels: tuple[int, ...]) -> str:
    """`(1, 4, 16)` -> `"1,4,16"`; `()` -> `"none"`."""
    return ",".join(map(str, levels)) or "none"


@dataclass(frozen=True)
class MeasureOptions:
    """How drafts are measured: the engine, the prompts, the decoding and the context buckets.

    `engine` "auto" (or None) is `default_engine()`; `k` None (library only) takes the
    speculative config's num_speculative_tokens, else 3.
    """

    engine: str | None = option(
        "auto",
        choices=ENGINE_CHOICES,
        help="Engine for every measurement: auto = vllm when it is importable and a GPU is present, "
        "else reference (torch).",
    )
    prompts: str | None = option(None, metavar="NAME|FILE|DIR", help=PROMPTS_HELP)
    categories: tuple[str, ...] = option(
        flag="--category", multiple=True, help="Only prompts of this category (repeatable)."
    )
    limit: int | None = option(None, min=1, help="At most N prompts per category.")
    k: int | None = option(
        DEFAULT_K,
        flag="--num-speculative-tokens",
        short="-k",
        min=1,
        help="Draft tokens per round (k); AL is at most k + 1.",
    )
    max_new_tokens: int = option(64, min=1, help="Tokens generated per prompt (EOS ignored).")
    temperature: float = option(0.0, min=0, help="0 is greedy.")
    seed: int = option(0, help="Seed for sampling (and for report's fine-tune).")
    buckets: tuple[int, ...] = option(
        (NATURAL,),
        parse=_buckets,
        format=format_buckets,
        help="Context lengths to measure, e.g. natural,256,1024: prompts are padded with neutral filler "
        "text to about N tokens; prompts already longer are skipped for that bucket. Long-context "
        "suites' prompts are measured once, in the bucket of their own length.",
    )
    chat_template: str | None = option(
        None,
        help="Jinja template (file or literal) replacing the target's; 'none' sends raw text "
        "(report: also for the fine-tune's data).",
    )
    tensor_parallel_size: int = option(1, min=1, help="vLLM tensor parallelism.")
    concurrency: tuple[int, ...] = option(
        (),
        metavar="LEVELS",
        parse=parse_levels,
        format=format_levels,
        help="With --engine vllm: also measure per-user decode tokens/s at these concurrencies (e.g. "
        "1,4,16) with each draft and with the target alone (no speculation), and show the speedups "
        "beside AL. {extra} On a CPU the speedups do not predict a GPU's (see docs/smoke.md).",
    )
    speculative_config: str | dict[str, Any] | None = speculative_config_option()  # validate's and check's

    def __post_init__(self) -> None:
        check(self)

    @property
    def k_value(self) -> int:
        """`k`, or 3 where it is None (without a speculative config that sets it)."""
        return DEFAULT_K if self.k is None else self.k

    def resolved_engine(self) -> str:
        """The engine this measures with: `engine`, or `default_engine()` for "auto" / None."""
        return default_engine() if self.engine in (None, "auto") else str(self.engine)
