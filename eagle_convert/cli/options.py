"""The measuring options `smoke` and `report` share, declared once so that names, validation and
help cannot drift apart between the two commands (report runs smoke's measurement on each variant).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

ENGINE_CHOICES = ("auto", "reference", "vllm")

F = TypeVar("F", bound=Callable[..., Any])


def measure_options(*, buckets: str, concurrency_default: str) -> Callable[[F], F]:
    """`--engine` through `--concurrency`, in that `--help` order. The two commands differ only in
    defaults: `buckets` is the command's `--buckets` default, and `concurrency_default` is the help
    sentence saying what an unset `--concurrency` measures (report picks levels itself on vLLM)."""
    options = [
        click.option(
            "--engine",
            type=click.Choice(ENGINE_CHOICES),
            default="auto",
            show_default=True,
            help="Engine for every measurement: auto = vllm when it is importable and a GPU is present, "
            "else reference (torch).",
        ),
        click.option(
            "--prompts",
            "prompts_file",
            type=click.Path(dir_okay=False),
            default=None,
            help='JSONL file, one object per line: {"prompt": ...} or {"messages": [...]}, '
            'optional "category" and "id". Default: the built-in set.',
        ),
        click.option("--category", "categories", multiple=True, help="Only prompts of this category (repeatable)."),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N prompts per category."),
        click.option(
            "--num-speculative-tokens",
            "-k",
            "k",
            type=click.IntRange(min=1),
            default=3,
            show_default=True,
            help="Draft tokens per round (k); AL is at most k + 1.",
        ),
        click.option(
            "--max-new-tokens",
            type=click.IntRange(min=1),
            default=64,
            show_default=True,
            help="Tokens generated per prompt (EOS ignored).",
        ),
        click.option(
            "--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True, help="0 is greedy."
        ),
        click.option(
            "--seed", type=int, default=0, show_default=True, help="Seed for sampling (and for report's fine-tune)."
        ),
        click.option(
            "--buckets",
            default=buckets,
            show_default=True,
            help="Context lengths to measure, e.g. natural,256,1024: prompts are padded with neutral filler "
            "text to about N tokens; prompts already longer are skipped for that bucket.",
        ),
        click.option(
            "--chat-template",
            default=None,
            help="Jinja template (file or literal) replacing the target's; 'none' sends raw text "
            "(report: also for the fine-tune's data).",
        ),
        click.option(
            "--tensor-parallel-size",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="vLLM tensor parallelism.",
        ),
        click.option(
            "--concurrency",
            default=None,
            metavar="LEVELS",
            help="With --engine vllm: also measure per-user decode tokens/s at these concurrencies (e.g. "
            "1,4,16) with each draft and with the target alone (no speculation), and show the speedups "
            f"beside AL. {concurrency_default} On a CPU the speedups do not predict a GPU's (see "
            "docs/smoke.md).",
        ),
    ]

    def apply(f: F) -> F:
        for option in reversed(options):  # click stacks decorators bottom-up
            f = option(f)
        return f

    return apply


def vllm_version_option(*, allow_all: bool) -> Callable[[F], F]:
    """`--vllm-version X.Y.Z` (validate, check, inspect): the release the verdict is for."""
    from eagle_convert.vllm_model import NEWEST_RELEASE, OLDEST_RELEASE

    every = " 'all' prints one row per known release (the compatibility matrix)." if allow_all else ""

    def no_all(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value == "all" and not allow_all:
            raise click.BadParameter("'all' (the compatibility matrix) is validate's: name one release here")
        return value

    return click.option(
        "--vllm-version",
        "vllm_version",
        callback=no_all,
        metavar="X.Y.Z" + ("|all" if allow_all else ""),
        default=None,
        help=f"The vLLM release the draft will be served on ({OLDEST_RELEASE} ... {NEWEST_RELEASE}; default: the "
        f"installed vLLM, else the newest known).{every}",
    )


def speculative_config_option() -> Callable[[F], F]:
    """`--speculative-config JSON|FILE` (validate, check, smoke): the deployment's serve config."""
    return click.option(
        "--speculative-config",
        "speculative_config",
        metavar="JSON|FILE",
        default=None,
        help="The speculative config you serve with, exactly as `vllm serve --speculative-config` takes it "
        '(e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\'), or a JSON file holding it: checked '
        "against the draft and the vLLM release; engine runs use exactly these settings (the draft's path "
        'replaces "model").',
    )
