"""A suite rendered and tokenized for one target: its text prompts per context bucket, its long
context cut for the target's tokenizer and chat template, and the smoke preparation every measuring
command shares (`prepare_smoke_prompts`: smoke, check, report, drift).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.measure.longctx import build_long_prompts
from eagle_convert.measure.prompts import (
    NATURAL,
    Prompt,
    PromptSet,
    SkippedPrompt,
    _Renderer,
    _target_context,
    prepare_prompts,
    resolve_chat_template,
)
from eagle_convert.measure.provenance import Provenance, SuiteRows
from eagle_convert.measure.suites import Suite, as_suite


def long_rows(suite: Suite, count_tokens: Callable[[str], int]) -> tuple[SuiteRows, dict[str, int]]:
    """Cut the suite's long-context prompts for one target.

    Args:
        suite: a resolved suite (nothing to do when it names no long context).
        count_tokens: a user message's token count as the engines see it (chat template included).

    Returns:
        (`SuiteRows` of the long prompts, prompt id -> the token count it was cut to).

    Raises:
        ConfigError: see `longctx.build_long_prompts`.
    """
    rows, lengths = SuiteRows([]), dict[str, int]()
    if not suite.long_kinds:
        return rows, lengths
    built = build_long_prompts(
        count_tokens, kinds=suite.long_kinds, lengths=suite.long_lengths, rows=suite.long_per_length
    )
    for lp in built:
        rows.prompts.append(Prompt(lp.id, lp.category, text=lp.text))
        rows.provenance[lp.id] = Provenance(lp.source, "PSF-2.0 (text of this Python, read at run time)", "run time")
        lengths[lp.id] = lp.length
    return rows, lengths


def prepare_suite(
    suite: Suite,
    tokenizer: Any,
    *,
    buckets: Sequence[int] = (NATURAL,),
    chat_template: str | None = None,
    template_label: str = "target",
    max_prompt_tokens: int | None = None,
) -> PromptSet:
    """Render and tokenize a suite for one target: its text prompts once per bucket (padded with
    filler as `prepare_prompts` does), its long-context prompts cut for this tokenizer and template
    and measured in the bucket of their length (lengths over `max_prompt_tokens` skipped unbuilt).

    Raises:
        UsageError, ConfigError: see `prepare_prompts` and `long_rows`.
    """
    fitting = tuple(n for n in suite.long_lengths if max_prompt_tokens is None or n <= max_prompt_tokens)
    too_long = [n for n in suite.long_lengths if n not in fitting]
    long_suite = Suite(suite.label, SuiteRows([]), suite.long_kinds if fitting else (), fitting, suite.long_per_length)
    rows, lengths = long_rows(long_suite, token_counter(tokenizer, chat_template))
    pset = prepare_prompts(
        [*suite.prompts, *rows.prompts],
        tokenizer,
        buckets=buckets,
        chat_template=chat_template,
        template_label=template_label,
        max_prompt_tokens=max_prompt_tokens,
        sized=lengths,
    )
    pset.suite, pset.refused = suite.label, list(suite.notices)
    pset.provenance = {pid: prov.to_dict() for pid, prov in {**suite.rows.provenance, **rows.provenance}.items()}
    for kind in suite.long_kinds:
        for n in too_long:
            why = f"{n} tokens, longer than the target's context allows ({max_prompt_tokens} prompt tokens fit)"
            pset.skipped.append(SkippedPrompt(f"long-{kind}-{n}", f"long-{kind}", n, why))
    return pset


def prepare_smoke_prompts(
    target_dir: Path,
    prompts: Sequence[Prompt] | Suite | None,
    *,
    k: int,
    max_new_tokens: int,
    buckets: Sequence[int] = (NATURAL,),
    chat_template: str | None = None,
) -> PromptSet:
    """Render and tokenize `prompts` for a target folder, as smoke, check, report and drift measure.

    Args:
        target_dir: the target's folder (its tokenizer, chat template and context).
        prompts: None (the built-in set), `Prompt`s, or a `Suite` (its long-context prompts are cut
            for this target's tokenizer and template).
        k: draft tokens per round; with `max_new_tokens` what the context must leave room for.
        max_new_tokens: tokens each prompt generates.
        buckets: context lengths (`NATURAL`: as written; N: padded with filler to about N tokens).
        chat_template: a --chat-template value (None: the target's).

    Returns:
        The prepared `PromptSet` (with the suite's label, provenance and refusal lines).

    Raises:
        UsageError: no room for a prompt in the target's context, or no prompt fits the buckets.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    template, label = resolve_chat_template(chat_template)
    ctx = _target_context(target_dir)
    room = None if ctx is None else ctx - max_new_tokens - k - 1
    if room is not None and room < 16:
        raise UsageError(
            f"{{max_new_tokens={max_new_tokens}}} leaves no room for a prompt in the target's context ({ctx})",
            options=("max_new_tokens",),
        )
    pset = prepare_suite(
        as_suite(prompts),
        tokenizer,
        buckets=buckets,
        chat_template=template,
        template_label=label,
        max_prompt_tokens=room,
    )
    if not pset.prompts:
        raise UsageError("no prompt fits the requested buckets (see {buckets})", options=("buckets",))
    return pset


def token_counter(tokenizer: Any, chat_template: str | None = None) -> Callable[[str], int]:
    """A user message's token count as `prepare_prompts` renders it (same template, same tokenizer).

    Args:
        tokenizer: the target's tokenizer.
        chat_template: as `prepare_prompts` takes it (None: the target's; "none": raw text).

    Returns:
        text -> the number of token ids the engines will be given for it.
    """
    render = _Renderer(tokenizer, chat_template)
    return lambda text: len(render.encode(Prompt("long", "long", text=text)))
