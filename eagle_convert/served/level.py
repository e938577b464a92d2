"""One concurrency level on one server: the counters read around the streams, and the honest-number checks.

The spec-decode counters are read before the streams and again once they settle; AL and
per-position acceptance come from the deltas (`metrics.py`). Honest numbers: a counter that went
down is an error (the server restarted); deltas larger than the sent requests can explain mean
other traffic moved them (noted, or an error with `exclusive`); counters that did not move
although tokens were streamed mean `/metrics` is another replica's (a load balancer); a level
where more than `max_failed` of the requests failed gives no figure, and one where every request
failed is an error naming the first failure. The per-user rates come from vLLM's decode
histograms where the server exports them, read around each level on every server, the baseline
too (`results.py` says why the stream's rate is second).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from eagle_convert.measure import NATURAL, Prompt
from eagle_convert.served.errors import ServerError
from eagle_convert.served.http import Connection, ServedModel
from eagle_convert.served.metrics import DecodeTimes, SpecCounters, read_metrics
from eagle_convert.served.options import ServerOptions
from eagle_convert.served.results import ServedLevel
from eagle_convert.served.stream import RequestOutcome, Sampling, run_streams

SETTLE_READS = 40  # /metrics reads (50 ms apart) waiting for the counters to stop moving after a level
SETTLE_PAUSE_S = 0.05

Reading = tuple[SpecCounters | None, DecodeTimes | None]


async def read_metrics_of(conn: Connection, model: str, spec: bool) -> Reading:
    """The spec-decode counters (a server with a draft) and the decode histograms (any vLLM server)."""
    if spec:
        _, text, _ = await conn.get("/metrics")
        return read_metrics(text, conn.url, model, spec=True)
    try:  # the baseline, or a timing-only server: /metrics is optional
        _, text, _ = await conn.get("/metrics")
    except ServerError:
        return None, None
    return read_metrics(text, conn.url, model, spec=False)


async def _settled(conn: Connection, model: str, spec: bool, before: Reading | None = None, ok: int = 0) -> Reading:
    """The reading once two reads 50 ms apart agree and the histograms hold the `ok` finished requests
    (vLLM records a step's stats after streaming it)."""

    def recorded(now: Reading) -> bool:
        d, b = now[1], before[1] if before else None
        return d is None or b is None or d.requests - b.requests >= ok

    last = await read_metrics_of(conn, model, spec)
    for _ in range(SETTLE_READS):
        await asyncio.sleep(SETTLE_PAUSE_S)
        now = await read_metrics_of(conn, model, spec)
        if now == last and recorded(now):
            return now
        last = now
    return last


def _judge(level: ServedLevel, conn: Connection, s: Sampling, k: int | None, opts: ServerOptions) -> None:
    """The honest-number checks of one measured level (module docstring)."""
    n, failed = len(level.outcomes), level.failed
    if n and len(failed) == n:
        first = failed[0].error or ""
        hint = (  # vLLM refuses chat requests to a model without a chat template
            "serve it with --chat-template, or send raw text with {chat_template=none}"
            if "chat template" in first.lower()
            else None
        )
        raise ServerError(conn.url, f"failed every request at concurrency {level.concurrency}: {first}", hint=hint)
    if n and len(failed) / n > opts.max_failed:
        names = "; ".join(f"{e} ×{c}" for e, c in level.failures.items())
        level.no_figure = f"{len(failed)} of {n} requests failed (over {opts.max_failed:.0%}): {names}"
        return
    d = level.delta
    if d is None or k is None:
        return
    ok = [o for o in level.outcomes if o.error is None]
    # each draft round yields its accepted tokens + 1; the last round may overshoot by up to k
    explained = sum(o.tokens - 1 + k for o in ok) + len(failed) * (s.max_new_tokens + k)
    if d.drafts + d.accepted > explained:
        msg = (
            f"other traffic moved the counters at concurrency {level.concurrency}: {d.drafts} drafts + "
            f"{d.accepted} accepted, more than the {n} requests sent can explain ({explained})"
        )
        if opts.exclusive:
            raise ServerError(conn.url, msg, hint="measure while nothing else uses the server, or drop {exclusive}")
        level.notes.append(msg)
    if d.drafts == 0 and any(o.tokens > 1 for o in ok):
        level.no_figure = (
            "its spec-decode counters did not move although tokens were streamed: /metrics is not the server "
            "that answered (a load balancer?)"
        )


async def measure_level(
    conn: Connection,
    model: ServedModel,
    spec: bool,
    requests: list[Prompt],
    c: int,
    s: Sampling,
    k: int | None,
    opts: ServerOptions,
    on_done: Callable[[RequestOutcome], None],
    bucket: int = NATURAL,
) -> ServedLevel:
    before = await _settled(conn, model.id, spec)
    t0 = time.perf_counter()
    outcomes = await run_streams(conn, requests, c, s, on_done=on_done)
    seconds = time.perf_counter() - t0
    after = await _settled(conn, model.id, spec, before, sum(o.error is None for o in outcomes))
    counters, was = after[0], before[0]
    delta = counters.minus(was, conn.url) if counters is not None and was is not None else None
    decode = after[1].minus(before[1]) if after[1] is not None and before[1] is not None else None
    level = ServedLevel(c, outcomes, delta, seconds, decode=decode, bucket=bucket)
    _judge(level, conn, s, k, opts)
    if (note := level.burst_note()) is not None:
        level.notes.append(note)
    return level
