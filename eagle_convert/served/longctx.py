"""Long-context suites on a running server: smoke's documents, cut on the server's own tokenizer.

Smoke cuts its long-context prompts (`measure/longctx.py`: the standard library's sources, the
reference documentation's topics) to N tokens of the target's tokenizer, chat template included,
and measures each in the bucket of its own length. A server holds its tokenizer and template, so
here each candidate cut is counted by the server's `POST /tokenize` (`buckets.count_tokens`, the
count `/v1/chat/completions` or `/v1/completions` sees): the same documents, the same search,
counted as the server counts them. The search is synchronous (`measure.long_rows`); it runs in a
worker thread whose counts are coroutines on the run's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from eagle_convert.measure import Prompt, Suite, long_rows
from eagle_convert.served.buckets import BucketPrompt, Skipped, count_tokens
from eagle_convert.served.http import Connection, ServedModel


async def long_context_prompts(
    conn: Connection,
    model: ServedModel,
    suite: Suite,
    max_new_tokens: int,
    chat: bool,
    say: Callable[[str], None],
) -> tuple[dict[int, list[Prompt]], list[BucketPrompt], list[Skipped]]:
    """The suite's long-context prompts per length (each length its own bucket), as sent, and the
    lengths the server's context cannot hold (skipped unbuilt, as smoke skips them).

    Raises:
        ServerError: no `/tokenize` (buckets.count_tokens). ConfigError: a length the corpus cannot
            meet (`measure.long_rows`).
    """
    if not suite.long_kinds:
        return {}, [], []
    room = None if model.max_model_len is None else model.max_model_len - max_new_tokens
    fitting = tuple(n for n in suite.long_lengths if room is None or n <= room)
    skipped = [
        Skipped(
            f"long-{kind}-{n}",
            f"long-{kind}",
            n,
            f"{n} tokens, longer than the server's context allows ({room} prompt tokens fit)",
        )
        for kind in suite.long_kinds
        for n in suite.long_lengths
        if n not in fitting
    ]
    if not fitting:
        return {}, [], skipped
    loop = asyncio.get_running_loop()
    counts: dict[str, int] = {}

    def counted(text: str) -> int:  # in the worker thread: the request runs on the loop
        p = Prompt("long-context", "long", text=text)
        counts[text] = asyncio.run_coroutine_threadsafe(count_tokens(conn, model.id, p, chat), loop).result()
        return counts[text]

    kinds = " and ".join(suite.long_kinds)
    say(f"cutting {kinds} long-context prompts to {', '.join(map(str, fitting))} tokens with {conn.url}/tokenize")
    part = Suite(suite.label, suite.rows, suite.long_kinds, fitting, suite.long_per_length)
    rows, lengths = await asyncio.to_thread(long_rows, part, counted)
    per_length: dict[int, list[Prompt]] = {}
    sent: list[BucketPrompt] = []
    for p in rows.prompts:  # lengths: the length each was cut to; counts: its tokens as counted
        n = lengths[p.id]
        per_length.setdefault(n, []).append(p)
        sent.append(BucketPrompt(p, n, counts.get(p.text or "", n)))
    return {n: per_length[n] for n in fitting if n in per_length}, sent, skipped
