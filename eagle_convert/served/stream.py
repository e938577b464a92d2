"""C concurrent streamed requests against one server, with each request's token times.

A request streams server-sent events; with vLLM's `stream_options.continuous_usage_stats` every
chunk carries the completion-token count so far, so a token's time is the arrival of the chunk
that raised the count (one chunk may carry several tokens: a draft round's accepted ones). Other
servers: one token per chunk with text. Time to first token runs from sending to the first
token; the per-user decode rate is (tokens - 1) / (last token time - first token time), the
definition `measure/throughput.py` uses for the in-process engine. A failed request is kept,
named (`RequestOutcome.error`), never dropped.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle_convert.measure import Prompt
from eagle_convert.served.http import Connection, status_error, translate


@dataclass(frozen=True)
class Sampling:
    """What every request asks for: the model, tokens, temperature, seed; `chat` False sends raw text."""

    model: str
    max_new_tokens: int
    temperature: float
    seed: int
    chat: bool = True


@dataclass
class RequestOutcome:
    """One request: its tokens and times, or the failure that ended it."""

    prompt_id: str
    tokens: int = 0
    prompt_tokens: int | None = None
    ttft_s: float | None = None
    decode_s: float | None = None
    error: str | None = None  # the failure's one-line name; None: the request completed

    @property
    def tokens_per_s(self) -> float | None:
        """Per-user decode tokens/s, excluding the time to first token."""
        if self.error is not None or self.decode_s is None or self.decode_s <= 0 or self.tokens < 2:
            return None
        return (self.tokens - 1) / self.decode_s


def raw_text(prompt: Prompt) -> str:
    """A prompt without a chat template, as smoke renders it (`measure/prompts.py` `_Renderer`)."""
    msgs = prompt.as_messages()
    return msgs[0]["content"] if len(msgs) == 1 else "\n\n".join(f"{m['role']}: {m['content']}" for m in msgs)


def request_body(prompt: Prompt, s: Sampling) -> tuple[str, dict[str, Any]]:
    """(path, JSON body): greedy or `temperature`, EOS ignored, exactly `max_new_tokens`, streamed."""
    body: dict[str, Any] = {
        "model": s.model,
        "max_tokens": s.max_new_tokens,
        "min_tokens": s.max_new_tokens,
        "temperature": s.temperature,
        "seed": s.seed,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if s.chat:
        return "/v1/chat/completions", {**body, "messages": prompt.as_messages()}
    return "/v1/completions", {**body, "prompt": raw_text(prompt)}


def _chunk_text(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    if "text" in c:
        return str(c.get("text") or "")
    delta = c.get("delta") or {}
    return str(delta.get("content") or delta.get("reasoning_content") or "") if isinstance(delta, dict) else ""


async def stream_one(conn: Connection, prompt: Prompt, s: Sampling) -> RequestOutcome:
    """Send one streamed request; every failure is caught and named in the outcome."""
    out = RequestOutcome(prompt.id)
    t0 = time.perf_counter()
    try:
        first, last = await asyncio.wait_for(_stream(conn, prompt, s, out), conn.request_timeout)
    except asyncio.TimeoutError:
        out.error = f"no answer within {conn.request_timeout:g}s (request timeout)"
        return out
    except Exception as exc:  # transport failures, one line each
        out.error = translate(exc, conn.url, "a streamed request", conn.request_timeout).message
        return out
    if out.error is not None:
        return out
    if first is None or last is None:
        out.error = "the stream ended without a token"
        return out
    out.ttft_s, out.decode_s = first - t0, last - first
    if out.tokens < s.max_new_tokens:
        out.error = f"the stream ended after {out.tokens} of {s.max_new_tokens} tokens"
    return out


async def _stream(
    conn: Connection, prompt: Prompt, s: Sampling, out: RequestOutcome
) -> tuple[float | None, float | None]:
    """Read one stream into `out`; (first, last) token arrival times. A bad answer sets `out.error`."""
    path, body = request_body(prompt, s)
    first = last = None
    async with conn.client.stream("POST", path, json=body) as r:
        if r.status_code >= 400:
            text = (await r.aread()).decode("utf-8", "replace")
            out.error = status_error(conn.url, path, r.status_code, text).message
            return None, None
        async for line in r.aiter_lines():
            if not line or line.startswith(":"):
                continue
            if not line.startswith("data:"):
                continue  # event:, id:, retry: fields carry nothing here
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except json.JSONDecodeError:
                out.error = f"malformed SSE data ({data[:40]!r})"
                return None, None
            if not isinstance(chunk, dict):
                out.error = f"malformed SSE data ({data[:40]!r})"
                return None, None
            if "error" in chunk:
                err = chunk["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                out.error = f"error mid-stream ({' '.join(str(msg).split())[:120]})"
                return None, None
            usage = chunk.get("usage") if isinstance(chunk.get("usage"), dict) else None
            n = usage.get("completion_tokens") if usage else None
            if not isinstance(n, int):
                n = out.tokens + 1 if _chunk_text(chunk) else out.tokens
            if usage and isinstance(usage.get("prompt_tokens"), int):
                out.prompt_tokens = usage["prompt_tokens"]
            if n > out.tokens:
                now = time.perf_counter()
                first = now if first is None else first
                last = now
                out.tokens = n
    return first, last


async def run_streams(
    conn: Connection,
    prompts: Sequence[Prompt],
    concurrency: int,
    s: Sampling,
    *,
    on_done: Callable[[RequestOutcome], None] | None = None,
) -> list[RequestOutcome]:
    """Every prompt once, `concurrency` streams in flight (a stream takes the next prompt when its
    request ends), outcomes in prompt order."""
    results: list[RequestOutcome | None] = [None] * len(prompts)
    queue = iter(range(len(prompts)))

    async def worker() -> None:
        for i in queue:
            results[i] = res = await stream_one(conn, prompts[i], s)
            if on_done is not None:
                on_done(res)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(prompts)))))
    return [r for r in results if r is not None]
