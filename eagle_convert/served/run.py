"""`run_served`: AL, per-position acceptance and per-user speedup of running servers, level by level.

For each concurrency level in turn and each server (the baseline last), one level measured
(`level.py`: the counters read around the streams, the honest-number checks), then the speedups
over the baseline. With context buckets (`buckets.py`: prompts padded with the first server's
`/tokenize`) every bucket is measured level by level in turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from eagle_convert.errors import UsageError
from eagle_convert.measure import NATURAL, MeasureOptions, Prompt, Suite, smoke_settings
from eagle_convert.progress import OnTick, Tick, tick_or_nothing
from eagle_convert.served.buckets import bucket_prompts
from eagle_convert.served.errors import NoDraftError, ServerError
from eagle_convert.served.http import Connection, ServedModel
from eagle_convert.served.level import measure_level
from eagle_convert.served.longctx import long_context_prompts
from eagle_convert.served.metrics import spec_counters
from eagle_convert.served.options import ServerOptions
from eagle_convert.served.results import BASELINE_LABEL, ENGINE, STREAM, ServedLevel, ServedReport, ServedServer
from eagle_convert.served.stream import RequestOutcome, Sampling

DEFAULT_LEVELS = (1, 4, 16)


def level_requests(prompts: Sequence[Prompt], c: int) -> list[Prompt]:
    """Every prompt once, cycled to at least `c` requests (so all `c` streams are busy)."""
    n = max(len(prompts), c)
    return [prompts[i % len(prompts)] for i in range(n)]


def _check_options(opts: MeasureOptions, servers: Sequence[str], labels: Sequence[str]) -> None:
    for bad, message, names in (
        (not servers, "give at least one {server}", ("server",)),
        (len(labels) > len(servers), "more {label} than {server} values", ("label", "server")),
        (len(set(labels)) != len(labels), "two servers share a {label}", ("label",)),
        (
            opts.engine not in (None, "auto"),
            "{engine} does not apply with {server}: the server is the engine",
            ("engine", "server"),
        ),
        (
            opts.tensor_parallel_size != 1,
            "{tensor_parallel_size} is the server's own; drop it with {server}",
            ("tensor_parallel_size", "server"),
        ),
        (
            opts.speculative_config is not None,
            "{speculative_config} is the server's own (vllm serve --speculative-config); drop it with {server}",
            ("speculative_config", "server"),
        ),
        (
            opts.chat_template not in (None, "none"),
            "{chat_template}: a server applies its own template (vllm serve --chat-template); only 'none' applies",
            ("chat_template", "server"),
        ),
    ):
        if bad:
            raise UsageError(message, options=names)


async def _probe(conn: Connection, baseline: bool, timing_only: bool = False) -> tuple[ServedModel, int | None]:
    """The served model, and k from its per-position counters (None: the baseline, or timing only)."""
    model = await conn.model()
    vllm = model.owned_by == "vllm"
    try:
        _, text, _ = await conn.get("/metrics")
        counters = spec_counters(text, conn.url, model.id)
    except ServerError as exc:
        if baseline or timing_only:
            return model, None
        if not vllm:  # another engine: name it, and the way to measure it anyway
            raise NoDraftError(
                conn.url,
                f"is not a vLLM server ({model.engine or 'its engine is unknown'}): it has no vllm:spec_decode_* "
                "counters, so no acceptance can be read",
                hint="give {timing_only} for per-user tokens/s and speedups without acceptance",
            ) from None
        raise exc from None
    if baseline:
        raise ServerError(
            conn.url,
            f"runs with a draft (k={counters.k}) but is the baseline",
            hint="the baseline serves the same target without vllm serve --speculative-config",
        )
    return model, counters.k


async def _level(
    entries: list[tuple[Connection, ServedServer, bool]],
    report: ServedReport,
    prompts: Sequence[Prompt],
    c: int,
    bucket: int,
    opts: MeasureOptions,
    chat: bool,
    sopts: ServerOptions,
    say: Callable[[str], None],
    on_done: Callable[[RequestOutcome], None],
    on_level: Callable[[ServedServer, ServedLevel], None] | None,
) -> None:
    """One concurrency level of one bucket on every server in turn (the baseline last), then the speedups."""
    requests = level_requests(prompts, c)
    where = "" if bucket == NATURAL else f", context ~{bucket} tokens"
    for conn, server, spec in entries:
        s = Sampling(server.model.id, opts.max_new_tokens, opts.temperature, opts.seed, chat)
        say(f"{server.label}: concurrency {c}{where}, {len(requests)} requests")
        level = await measure_level(conn, server.model, spec, requests, c, s, server.k, sopts, on_done, bucket)
        server.levels.append(level)
        if on_level is not None:
            on_level(server, level)
    base_level = report.baseline.level(c, bucket) if report.baseline else None
    for server in report.servers:
        lv = server.level(c, bucket)
        if lv is None or base_level is None:
            continue
        both = lv.engine_tokens_per_s and base_level.engine_tokens_per_s
        source = ENGINE if both else STREAM  # the same source on both sides
        a, b = lv.rate_from(source), base_level.rate_from(source)
        if a and b:
            lv.speedup, lv.speedup_source = a / b, source


async def _run(
    urls: Sequence[str],
    labels: Sequence[str],
    baseline_url: str | None,
    prompts: Sequence[Prompt],
    opts: MeasureOptions,
    sopts: ServerOptions,
    levels: Sequence[int],
    report: ServedReport,
    say: Callable[[str], None],
    tick: OnTick,
    on_level: Callable[[ServedServer, ServedLevel], None] | None,
    long_context: Suite | None,
) -> None:
    conns = [Connection(u, api_key=sopts.api_key, request_timeout=sopts.request_timeout) for u in urls]
    base = (
        Connection(baseline_url, api_key=sopts.api_key, request_timeout=sopts.request_timeout) if baseline_url else None
    )
    everyone = [*conns, *([base] if base else [])]
    for conn in everyone:
        await conn.__aenter__()
    try:
        entries: list[tuple[Connection, ServedServer, bool]] = []
        for conn, label in zip(conns, labels):
            model, k = await _probe(conn, baseline=False, timing_only=sopts.timing_only)
            server = ServedServer(label, conn.url, model, k, [])
            server.speculative = await conn.speculative_config() if k is not None else None
            say(f"{label}: {model.id} at {conn.url} ({model.engine or 'engine unknown'}, k={k})")
            report.servers.append(server)
            entries.append((conn, server, k is not None))
        if base is not None:
            model, _ = await _probe(base, baseline=True)
            report.baseline = ServedServer(BASELINE_LABEL, base.url, model, None, [])
            say(f"baseline: {model.id} at {base.url} (no speculation)")
            entries.append((base, report.baseline, False))
            for server in report.servers:  # a speedup over another target measures nothing
                mine, theirs = server.model.root or server.model.id, model.root or model.id
                if mine != theirs:
                    server.identity.append(f"it serves {mine}, the baseline server {theirs}: not the same target?")
        chat = opts.chat_template is None
        first, first_model = entries[0][0], entries[0][1].model
        per_bucket, report.sent, report.skipped = await bucket_prompts(
            first, first_model, prompts, opts.buckets, opts.max_new_tokens, chat, say
        )
        if long_context is not None:  # each length its own bucket, after the suite's text prompts
            per_length, sent, skipped = await long_context_prompts(
                first, first_model, long_context, opts.max_new_tokens, chat, say
            )
            per_bucket |= {n: ps for n, ps in per_length.items() if n not in per_bucket}
            report.sent += sent
            report.skipped += skipped
            report.buckets = [b for b, ps in per_bucket.items() if ps]
            if not any(per_bucket.values()):
                raise UsageError(
                    "no prompt fits the server's context: " + "; ".join(x.reason for x in skipped[:2]),
                    options=("prompts",),
                )
        total = sum(len(level_requests(ps, c)) for ps in per_bucket.values() if ps for c in levels) * len(entries)
        done = [0]

        def on_done(_o: RequestOutcome) -> None:
            done[0] += 1
            tick(Tick("requests", done[0], total))

        for bucket, in_bucket in per_bucket.items():
            for c in levels:
                if in_bucket:
                    await _level(entries, report, in_bucket, c, bucket, opts, chat, sopts, say, on_done, on_level)
    finally:
        for conn in everyone:
            await conn.__aexit__()


def run_served(
    servers: Sequence[str],
    opts: MeasureOptions | None = None,
    sopts: ServerOptions | None = None,
    *,
    labels: Sequence[str] = (),
    baseline: str | None = None,
    prompts: Sequence[Prompt],
    suite: str = "custom",
    long_context: Suite | None = None,
    progress: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    on_level: Callable[[ServedServer, ServedLevel], None] | None = None,
) -> ServedReport:
    """Measure running servers (one per draft compared) and a baseline server at each concurrency.

    Args:
        servers: each server's URL (`http://host:8000`; a trailing /v1 is dropped).
        opts: the measuring settings smoke takes (`max_new_tokens`, `temperature`, `seed`,
            `concurrency` (default 1,4,16), `chat_template` None or "none"); the engine, buckets,
            k and parallelism are the server's own.
        sopts: the API key, request and run timeouts, the failure share, exclusivity.
        labels: a name per server (default: its URL).
        baseline: the same target served without speculation: the speedups' denominator.
        prompts: the prompts (smoke's suites, `measure.select_suite`).
        suite: the suite's label for the report.
        long_context: a suite naming long context (`Suite.long_kinds`): its prompts are cut on the
            first server's tokenizer (`longctx.py`), each length measured as its own bucket.
        progress: one line per server and level.
        on_tick: a count of requests finished.
        on_level: each level once measured (what an interrupted run has).

    Returns:
        The report; `interrupted` is never set here (the CLI keeps the levels it saw).

    Raises:
        UsageError: bad settings. ServerError: a server that cannot be measured (exit code 3).
    """
    opts = opts or MeasureOptions()
    sopts = sopts or ServerOptions()
    _check_options(opts, servers, labels)
    if not prompts and not (long_context is not None and long_context.long_kinds):
        raise UsageError("no prompt to send (check {prompts} and {categories})", options=("prompts", "categories"))
    levels = list(opts.concurrency or DEFAULT_LEVELS)
    urls = list(servers)
    names = [*labels, *(Connection(u).url for u in urls[len(labels) :])]
    settings = smoke_settings(
        k=0,
        max_new_tokens=opts.max_new_tokens,
        temperature=opts.temperature,
        seed=opts.seed,
        buckets=tuple(dict.fromkeys(opts.buckets)),
        chat_template="none" if opts.chat_template == "none" else "server",
        tensor_parallel_size=1,
    )
    report = ServedReport(settings, suite, [(p.id, p.category) for p in prompts], [], None, levels)
    report.buckets = list(dict.fromkeys(opts.buckets))
    t0 = time.perf_counter()
    coro = _run(
        urls,
        names,
        baseline,
        prompts,
        opts,
        sopts,
        levels,
        report,
        progress or (lambda _m: None),
        tick_or_nothing(on_tick),
        on_level,
        long_context,
    )
    try:
        asyncio.run(asyncio.wait_for(coro, sopts.timeout) if sopts.timeout else coro)
    except asyncio.TimeoutError:
        raise ServerError(
            report.servers[-1].url if report.servers else names[0],
            f"did not finish the run within {sopts.timeout:g}s",
            hint="raise {timeout}, or give fewer prompts or levels",
        ) from None
    ks = {s.k for s in report.servers if s.k is not None}
    report.settings["k"] = ks.pop() if len(ks) == 1 else None
    report.settings["concurrency"] = levels
    report.settings["buckets"] = list(report.buckets)  # with long context: each length measured
    report.seconds = time.perf_counter() - t0
    return report
