"""What `smoke --server` measured: per server and concurrency level, in smoke's JSON shape.

A level's acceptance comes from the server's counter deltas (`metrics.py`). Its per-user decode
rate is the engine's own where the server exports vLLM's decode histograms (`DecodeTimes`: tokens
after the first over decode time, stamped by the engine core), else the median over its requests
of the streamed rate (`stream.py`, the figure `measure/throughput.py` gives for the in-process
engine). The stream's rate measures the path to this client too: a starved client or a buffering
proxy delivers a burst of tokens at once and the rate comes out as thousands of tokens/s, so it is
kept beside the engine's (`stream_tokens_per_s`), not used where the engine's exists. The speedup
is a server's rate over the baseline server's at the same level, both from the same source
(`rate_source`). With context buckets each bucket is measured level by level in turn (the counters
are the server's, so a bucket needs its own deltas); `ServedLevel.bucket` says which. `ServedReport.to_dict()` keeps `smoke --json`'s top-level shape (`drafts[].total` with
`acceptance_length` and `per_position`, `throughput` with `concurrency`, `per_user_tokens_per_s`
and `speedup`), engine "server", plus `servers`: every level's requests, failures and checks
(schemas/smoke-report.schema.json).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.jsonable import dump, encode, key
from eagle_convert.measure import NATURAL, Counts, DraftResult, EngineRates, LevelRate, ThroughputReport
from eagle_convert.served.buckets import BucketPrompt, Skipped
from eagle_convert.served.http import ServedModel
from eagle_convert.served.metrics import DecodeTimes, SpecCounters
from eagle_convert.served.stream import RequestOutcome

BASELINE_LABEL = "no speculation"
METRIC = (
    "per-user decode tokens/s: the engine's (vllm:request_decode_time_seconds and "
    "vllm:request_generation_tokens deltas: tokens after the first over decode time), else the median over "
    "requests of (tokens - 1) / (last - first streamed token time)"
)
ENGINE, STREAM = "engine", "stream"
BURST = 1.5  # a streamed rate this many times the engine's means the tokens reached the client in bursts


@dataclass
class ServedLevel:
    """One concurrency level on one server."""

    concurrency: int
    outcomes: list[RequestOutcome]
    delta: SpecCounters | None  # None: a server without a draft (the baseline)
    seconds: float
    no_figure: str | None = None  # why this level gives no figure (too many failures, counters did not move)
    notes: list[str] = field(default_factory=list)  # other traffic, ...
    speedup: float | None = None  # over the baseline server at this level
    decode: DecodeTimes | None = None  # the engine's decode histograms' deltas (None: not exported)
    speedup_source: str | None = None  # ENGINE or STREAM: the rates the speedup divides
    bucket: int = NATURAL  # the context bucket its prompts were padded to (NATURAL: as they are)

    @property
    def failed(self) -> list[RequestOutcome]:
        return [o for o in self.outcomes if o.error is not None]

    @property
    def failures(self) -> dict[str, int]:
        """Each failure's name with its count."""
        return dict(Counter(o.error for o in self.failed if o.error))

    @property
    def rates(self) -> list[float]:
        return [r for o in self.outcomes if (r := o.tokens_per_s) is not None]

    @property
    def stream_tokens_per_s(self) -> float | None:
        """Median over requests of the streamed decode rate (what reached this client)."""
        return None if self.no_figure or not self.rates else statistics.median(self.rates)

    @property
    def engine_tokens_per_s(self) -> float | None:
        """The engine's decode rate over this level's requests (None: not exported, or not all recorded)."""
        ok = len(self.outcomes) - len(self.failed)
        d = self.decode
        if self.no_figure or d is None or d.requests < ok:
            return None
        return d.tokens_per_s

    @property
    def rate_source(self) -> str:
        return ENGINE if self.engine_tokens_per_s is not None else STREAM

    @property
    def tokens_per_s(self) -> float | None:
        """The per-user decode rate: the engine's where exported, else the streamed median."""
        e = self.engine_tokens_per_s
        return e if e is not None else self.stream_tokens_per_s

    def rate_from(self, source: str) -> float | None:
        return self.engine_tokens_per_s if source == ENGINE else self.stream_tokens_per_s

    def burst_note(self) -> str | None:
        """A note where the streamed rate far exceeds the engine's: the stream is not the measure here."""
        e, s = self.engine_tokens_per_s, self.stream_tokens_per_s
        if e is None or s is None or s <= BURST * e:
            return None
        return (
            f"the streamed tokens reached this client {s / e:.1f}x faster than the engine produced them "
            f"({s:.1f} against {e:.1f} tok/s per user): they arrived in bursts (a buffering proxy, or this "
            "client was starved of CPU); the per-user rate is the engine's"
        )

    @property
    def ttft_s(self) -> float | None:
        t = [o.ttft_s for o in self.outcomes if o.error is None and o.ttft_s is not None]
        return None if self.no_figure or not t else statistics.median(t)

    @property
    def counts(self) -> Counts:
        """The level as smoke's counters: the requests' tokens, the server's counter deltas."""
        d = self.delta
        ok = [o for o in self.outcomes if o.error is None]
        return Counts(
            requests=len(ok),
            prompt_tokens=sum(o.prompt_tokens or 0 for o in ok),
            generated_tokens=sum(o.tokens for o in ok),
            num_drafts=d.drafts if d else 0,
            num_draft_tokens=d.draft_tokens if d else 0,
            num_accepted=d.accepted if d else 0,
            accepted_per_pos=list(d.per_pos) if d else [],
            target_forwards=(d.drafts if d else 0) + len(ok),
            seconds=self.seconds,
        )

    @property
    def acceptance_length(self) -> float | None:
        return None if self.delta is None or self.no_figure else self.counts.acceptance_length

    @property
    def per_position(self) -> list[float] | None:
        return None if self.delta is None or self.no_figure else self.counts.per_position

    def level_rate(self) -> LevelRate | None:
        """The level as measure's `LevelRate` (smoke's `throughput` rows); None without a figure."""
        rates, rate = self.rates, self.tokens_per_s
        if rate is None:
            return None
        low, high = (min(rates), max(rates)) if self.rate_source == STREAM and rates else (rate, rate)
        return LevelRate(
            self.concurrency,
            len(rates),
            rate,
            low,
            high,
            self.ttft_s or 0.0,
            self.acceptance_length,
        )

    def to_dict(self) -> dict[str, Any]:
        c = self.counts
        counters = {k: getattr(c, k) for k in ("num_drafts", "num_draft_tokens", "num_accepted", "accepted_per_pos")}
        return dump(
            self,
            _LEVEL_KEYS,
            requests=len(self.outcomes),
            failed=len(self.failed),
            output_tokens=c.generated_tokens,
            per_user_tokens_per_s=self.tokens_per_s,
            **counters,
        )


_REPORT_KEYS = (
    "target engine engine_version settings seconds:3 interrupted prompts drafts deltas throughput "
    "servers baseline_server"
)
_SENT_KEYS = "bucket prompt_tokens filler_words"
_LEVEL_KEYS = (
    "concurrency bucket requests failed failures output_tokens acceptance_length:4 per_position:4 num_drafts "
    "num_draft_tokens num_accepted accepted_per_pos per_user_tokens_per_s:3 rate_source engine_tokens_per_s:3 "
    "stream_tokens_per_s:3 speedup_source ttft_s:4 speedup:4 seconds:3 no_figure notes"
)


@dataclass
class ServedServer:
    """One server measured at every level."""

    label: str
    url: str
    model: ServedModel
    k: int | None  # served num_speculative_tokens (per-position counters); None without a draft
    levels: list[ServedLevel]
    identity: list[str] = field(default_factory=list)  # what confirms (or cannot) which draft it serves
    # the served speculative config, where the server exposes it
    speculative: dict[str, Any] | None = field(default=None, metadata=key("speculative_config"))

    def level(self, c: int, bucket: int | None = None) -> ServedLevel | None:
        """The level at concurrency `c` in `bucket` (None: the first bucket measured)."""
        return next((x for x in self.levels if x.concurrency == c and bucket in (None, x.bucket)), None)

    @property
    def total(self) -> Counts:
        """Every level's counters summed (the `drafts[].total` of smoke's shape)."""
        total = Counts(accepted_per_pos=[], seconds=0.0)
        for lv in self.levels:
            if lv.no_figure is None:
                total.add(lv.counts)
        return total

    def rates(self, bucket: int | None = None) -> EngineRates:
        """The per-user rates by level (of one bucket, when given), as measure's `EngineRates`."""
        rows = [r for lv in self.levels if bucket in (None, lv.bucket) and (r := lv.level_rate()) is not None]
        return EngineRates(self.label, self.url, rows)

    def to_dict(self) -> dict[str, Any]:
        m, keys = self.model, "label url model root max_model_len engine k identity speculative_config levels"
        return dump(self, keys, model=m.id, root=m.root, max_model_len=m.max_model_len, engine=m.engine)


@dataclass
class ServedReport:
    """Every server (and the baseline) at every level, on the same prompts (`smoke --server`)."""

    settings: dict[str, Any]
    suite: str
    prompt_ids: list[tuple[str, str]]  # (id, category) in the order sent
    servers: list[ServedServer]
    baseline: ServedServer | None = field(metadata=key("baseline_server"))
    concurrency: list[int]
    seconds: float = 0.0
    interrupted: bool = False
    buckets: list[int] = field(default_factory=lambda: [NATURAL])  # in the order measured
    sent: list[BucketPrompt] = field(default_factory=list)  # padded prompts (empty: natural context only)
    skipped: list[Skipped] = field(default_factory=list)  # prompts longer than a bucket

    @property
    def prompt_count(self) -> int:
        """Distinct prompts sent: the suite's text prompts and any long-context ones."""
        return len({i for i, _ in self.prompt_ids} | {b.prompt.id for b in self.sent})

    def throughput(self) -> ThroughputReport | None:
        """The speedup table as measure's `ThroughputReport`, of the first bucket (None without a
        baseline server); every bucket's levels are in `servers[].levels`."""
        if self.baseline is None:
            return None
        first = self.buckets[0]
        return ThroughputReport(
            list(self.concurrency),
            self.baseline.rates(first),
            [s.rates(first) for s in self.servers],
            "server",
            self.baseline.model.engine,
            {"max_new_tokens": self.settings.get("max_new_tokens")},
        )

    def to_dict(self) -> dict[str, Any]:
        t = self.throughput()
        tput = None
        if t is not None:
            tput = {**t.to_dict(), "note": None, "metric": METRIC}
            tput["speedup"] = {
                s.label: {str(c): encode(lv.speedup, 4) if (lv := s.level(c)) else None for c in self.concurrency}
                for s in self.servers
            }
        first = self.servers[0] if self.servers else self.baseline
        assert first is not None
        tokens = {o.prompt_id: o.prompt_tokens for lv in first.levels for o in lv.outcomes if o.prompt_tokens}
        items = [
            {"id": i, "category": c, "bucket": NATURAL, "prompt_tokens": tokens.get(i, 0), "filler_words": 0}
            for i, c in self.prompt_ids
        ]
        if self.sent:
            natural_padded = any(b.bucket == NATURAL for b in self.sent)
            items = [] if natural_padded or NATURAL not in self.buckets else items  # long context beside them
            items += [{"id": b.prompt.id, "category": b.prompt.category} | dump(b, _SENT_KEYS) for b in self.sent]
        chat_template = self.settings.get("chat_template") or "server"
        prompts = dict(chat_template=chat_template, suite=self.suite, count=len(items), items=items)
        prompts |= {"skipped": [vars(x) for x in self.skipped], "refused": []}
        drafts = [DraftResult(s.label, s.url, None, s.total, [], [], False).to_dict() for s in self.servers]
        m = first.model
        return dump(
            self,
            _REPORT_KEYS,
            target=m.root or m.id,
            engine="server",
            engine_version=m.engine,
            prompts=prompts,
            drafts=drafts,
            deltas=[],
            throughput=tput,
        )
