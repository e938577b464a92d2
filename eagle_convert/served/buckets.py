"""Context buckets on a running server: prompts padded to about N tokens with the server's tokenizer.

Smoke pads a prompt locally by prepending neutral filler words to its first user message, as many
as keep the rendered prompt within N tokens (a binary search on the word count, `measure/prompts.py`
`prepare_prompts`). A server holds its own tokenizer and chat template, so here each candidate is
counted by vLLM's `POST /tokenize` (vLLM 0.32.0 `vllm/entrypoints/serve/tokenize/api_router.py`
`tokenize`; `protocol.py` `TokenizeChatRequest`: `messages` rendered with the server's template and
`add_generation_prompt`, what `/v1/chat/completions` sees; `TokenizeCompletionRequest`: `prompt`
with `add_special_tokens`, what `/v1/completions` sees). The same filler words, the same search, so
the padded prompts are the ones smoke would send, tokenized as the server tokenizes them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eagle_convert.errors import UsageError
from eagle_convert.measure import NATURAL, Prompt, filler_prefix, filler_text, format_buckets
from eagle_convert.served.errors import ServerError
from eagle_convert.served.http import Connection, ServedModel, status_error, translate
from eagle_convert.served.stream import raw_text

PARALLEL = 8  # /tokenize requests in flight while padding


@dataclass(frozen=True)
class BucketPrompt:
    """A prompt as sent in one bucket: padded with `filler_words` words to `prompt_tokens` tokens."""

    prompt: Prompt
    bucket: int
    prompt_tokens: int
    filler_words: int = 0


@dataclass(frozen=True)
class Skipped:
    id: str
    category: str
    bucket: int
    reason: str


def _padded(p: Prompt, prefix: str) -> Prompt:
    """`p` with `prefix` at the start of its first user message (a text prompt: of its text)."""
    if not prefix:
        return p
    if p.messages:
        return Prompt(p.id, p.category, messages=tuple(p.as_messages(prefix)))
    return Prompt(p.id, p.category, text=prefix + (p.text or ""))


async def count_tokens(conn: Connection, model: str, p: Prompt, chat: bool) -> int:
    """The prompt tokens the server's `/v1/chat/completions` (`chat`) or `/v1/completions` would see."""
    body: dict[str, object] = {"model": model}
    if chat:
        body |= {"messages": p.as_messages(), "add_generation_prompt": True}
    else:
        body |= {"prompt": raw_text(p), "add_special_tokens": True}
    try:
        r = await conn.client.post("/tokenize", json=body)
    except Exception as exc:
        raise translate(exc, conn.url, "POST /tokenize", conn.request_timeout) from None
    if r.status_code in (404, 405):
        raise ServerError(
            conn.url,
            f"has no /tokenize (HTTP {r.status_code}): context buckets are padded with the server's tokenizer",
            hint="measure the prompts' own length ({buckets=natural}), or point {server} at a vLLM server",
        )
    if r.status_code >= 400:
        raise status_error(conn.url, "/tokenize", r.status_code, r.text)
    try:
        count = json.loads(r.text).get("count")
    except (json.JSONDecodeError, AttributeError):
        count = None
    if not isinstance(count, int):
        raise ServerError(
            conn.url, f"answered /tokenize without a token count ({r.text[:60]!r})", hint="is it a vLLM server?"
        )
    return count


async def _pad(
    conn: Connection, model: str, p: Prompt, n: int, bucket: int, chat: bool, words: list[str]
) -> BucketPrompt:
    """The largest filler word count whose prompt fits in `bucket` tokens (smoke's search); `n`: its
    own length."""
    best = BucketPrompt(p, bucket, n)
    lo, hi = 1, max(1, bucket)  # a word costs at least about one token: `bucket` words overshoot
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = _padded(p, filler_prefix(words, mid))
        n = await count_tokens(conn, model, candidate, chat)
        if n <= bucket:
            best, lo = BucketPrompt(candidate, bucket, n, mid), mid + 1
        else:
            hi = mid - 1
    return best


async def pad_to_buckets(
    conn: Connection,
    model: str,
    prompts: Sequence[Prompt],
    buckets: Sequence[int],
    *,
    chat: bool,
    max_prompt_tokens: int | None,
) -> tuple[dict[int, list[BucketPrompt]], list[Skipped]]:
    """Every prompt in every bucket, padded on `conn`'s tokenizer; prompts already longer than a
    bucket (or than `max_prompt_tokens`: the server's context less the new tokens) are skipped with
    their reason, never cut."""
    for bucket in buckets:
        if max_prompt_tokens is not None and bucket > max_prompt_tokens:
            raise UsageError(
                f"{{buckets}}: {bucket} tokens leave no room for generation (at most {max_prompt_tokens} prompt "
                f"tokens fit the context of the server at {conn.url})",
                options=("buckets",),
            )
    words = filler_text().split()
    gate = asyncio.Semaphore(PARALLEL)

    async def natural(p: Prompt) -> int:
        async with gate:
            return await count_tokens(conn, model, p, chat)

    sizes = await asyncio.gather(*(natural(p) for p in prompts))
    out: dict[int, list[BucketPrompt]] = {b: [] for b in buckets}
    skipped: list[Skipped] = []
    work: list[tuple[Prompt, int, int]] = []
    for p, n in zip(prompts, sizes):
        for bucket in buckets:
            limit = max_prompt_tokens if bucket == NATURAL else bucket
            if limit is not None and n > limit:
                why = (
                    "longer than the server's context allows" if bucket == NATURAL else "already longer than the bucket"
                )
                skipped.append(Skipped(p.id, p.category, bucket, f"{n} tokens, {why}"))
            elif bucket == NATURAL:
                out[bucket].append(BucketPrompt(p, bucket, n))
            else:
                work.append((p, n, bucket))

    async def pad(p: Prompt, n: int, bucket: int) -> BucketPrompt:
        async with gate:
            return await _pad(conn, model, p, n, bucket, chat, words)

    for bp in await asyncio.gather(*(pad(*w) for w in work)):
        out[bp.bucket].append(bp)
    order = {p.id: i for i, p in enumerate(prompts)}
    return {b: sorted(v, key=lambda x: order[x.prompt.id]) for b, v in out.items()}, skipped


async def bucket_prompts(
    conn: Connection,
    model: ServedModel,
    prompts: Sequence[Prompt],
    buckets: Sequence[int],
    max_new_tokens: int,
    chat: bool,
    say: Callable[[str], None],
) -> tuple[dict[int, list[Prompt]], list[BucketPrompt], list[Skipped]]:
    """The prompts of each bucket: as they are (natural only: no `/tokenize` asked), else padded on
    `conn`'s tokenizer; with the padded prompts and the skipped ones, for the report."""
    order = list(dict.fromkeys(buckets))
    if order == [NATURAL]:
        return {NATURAL: list(prompts)}, [], []
    room = None if model.max_model_len is None else model.max_model_len - max_new_tokens
    say(f"padding {len(prompts)} prompts to {format_buckets(tuple(order))} tokens with {conn.url}/tokenize")
    padded, skipped = await pad_to_buckets(conn, model.id, prompts, order, chat=chat, max_prompt_tokens=room)
    sent = [bp for b in order for bp in padded[b]]
    if not sent:
        raise UsageError(
            "no prompt fits any of {buckets}: " + "; ".join(f"{x.id} ({x.reason})" for x in skipped[:3]),
            options=("buckets",),
        )
    return {b: [bp.prompt for bp in padded[b]] for b in order}, sent, skipped
