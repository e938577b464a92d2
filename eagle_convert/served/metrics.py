"""vLLM's spec-decode counters read from a server's Prometheus `/metrics` text, and their deltas.

vLLM 0.32.0 `v1/spec_decode/metrics.py` (`SpecDecodingProm`) exports, per `model_name` and
`engine` (one per data-parallel engine): `vllm:spec_decode_num_drafts_total`,
`vllm:spec_decode_num_draft_tokens_total`, `vllm:spec_decode_num_accepted_tokens_total` and
`vllm:spec_decode_num_accepted_tokens_per_pos_total` (label `position`, 0..k-1; k positions exist
from start-up, so k is readable before any request). A server without a speculative config exports
none of them. The engines of one model are summed, as vLLM's own logger sums steps.

Every vLLM server, with or without a draft, also exports per finished request (`v1/metrics/loggers.py`
`PrometheusStatLogger`, 0.32.0 and 0.34.0 alike) the histograms `vllm:request_decode_time_seconds`
(last minus first token time, both stamped by the engine core: `v1/metrics/stats.py`
`IterationStats.update_from_finished_request`) and `vllm:request_generation_tokens`. Their `_sum` and
`_count` deltas give the engine's own per-user decode rate, which no buffering between the server and
this client can distort (`DecodeTimes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eagle_convert.served.errors import NoDraftError, ServerError, ServerRestartedError

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)
DECODE_SUM = "vllm:request_decode_time_seconds_sum"
DECODE_COUNT = "vllm:request_decode_time_seconds_count"
GENERATED_SUM = "vllm:request_generation_tokens_sum"

# name{labels} value [timestamp]; label values are quoted with \\, \" and \n escapes (exposition format 0.0.4)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text exposition as (name, labels, value); comments skipped.

    Raises:
        ValueError: a line that is not a sample (the caller names the server).
    """
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ValueError(f"line {n} is not a Prometheus sample: {line[:80]!r}")
        labels: dict[str, str] = {}
        body = m.group(2) or ""
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None or lm.end() == pos:
                raise ValueError(f"line {n} has malformed labels: {line[:80]!r}")
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        try:
            value = float(m.group(3))
        except ValueError:
            raise ValueError(f"line {n} has a value that is not a number: {line[:80]!r}") from None
        out.append((m.group(1), labels, value))
    return out


@dataclass(frozen=True)
class SpecCounters:
    """One model's spec-decode counters, summed over its engines."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_pos: tuple[int, ...]  # accepted at position 0..k-1

    @property
    def k(self) -> int:
        """The served num_speculative_tokens: vLLM creates one per-position counter per draft position."""
        return len(self.per_pos)

    def minus(self, before: SpecCounters, url: str) -> SpecCounters:
        """self - before; a counter that went down means the server restarted between the reads."""
        pos = [a - b for a, b in zip(self.per_pos, before.per_pos)]
        values = [self.drafts - before.drafts, self.draft_tokens - before.draft_tokens, self.accepted - before.accepted]
        if min([*values, *pos], default=0) < 0 or len(self.per_pos) != len(before.per_pos):
            raise ServerRestartedError(
                url,
                "restarted during the run (its spec-decode counters went down)",
                hint="a restart resets vLLM's counters; run again once the server is stable",
            )
        return SpecCounters(values[0], values[1], values[2], tuple(pos))


def spec_counters(text: str, url: str, model: str | None = None) -> SpecCounters:
    """The spec-decode counters of `model` (None: the one model the server reports) in `/metrics` text.

    Raises:
        NoDraftError: no spec-decode counters (the server runs without a draft).
        ServerError: malformed text, or counters of several models and none named.
    """
    return _spec_counters(_samples(text, url), url, model)


def _samples(text: str, url: str) -> list[tuple[str, dict[str, str], float]]:
    try:
        return parse_prometheus(text)
    except ValueError as exc:
        raise ServerError(url, f"answered /metrics with malformed Prometheus text: {exc}", hint=_METRICS_HINT) from None


def _spec_counters(samples: list[tuple[str, dict[str, str], float]], url: str, model: str | None) -> SpecCounters:
    spec = [(n, lab, v) for n, lab, v in samples if n in COUNTERS]
    if not spec:
        raise NoDraftError(
            url,
            "runs without a draft (its /metrics has no vllm:spec_decode_* counters)",
            hint="serve it with vllm serve --speculative-config, or give it as {baseline_server}",
        )
    models = sorted({lab.get("model_name", "") for _, lab, _ in spec})
    if model is None or model not in models:
        if len(models) != 1:
            raise ServerError(
                url,
                f"reports spec-decode counters for {len(models)} models ({', '.join(models)}) and none is {model!r}",
                hint="point at a server of one model",
            )
        model = models[0]
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    pos: dict[int, float] = {}
    for name, lab, value in spec:
        if lab.get("model_name", "") != model:
            continue
        if name == PER_POS:
            i = int(lab["position"]) if lab.get("position", "").isdigit() else -1
            if i < 0:
                raise ServerError(url, f"answered /metrics with a per-position counter without a position: {lab}")
            pos[i] = pos.get(i, 0.0) + value
        else:
            totals[name] += value
    per_pos = tuple(int(pos.get(i, 0.0)) for i in range(max(pos) + 1)) if pos else ()
    return SpecCounters(int(totals[DRAFTS]), int(totals[DRAFT_TOKENS]), int(totals[ACCEPTED]), per_pos)


@dataclass(frozen=True)
class DecodeTimes:
    """vLLM's per-request decode histograms of one model, summed over its engines (module docstring)."""

    requests: int  # finished requests recorded
    tokens: float  # their generated tokens
    seconds: float  # their decode time: last minus first token, engine-core clock

    def minus(self, before: DecodeTimes) -> DecodeTimes:
        return DecodeTimes(self.requests - before.requests, self.tokens - before.tokens, self.seconds - before.seconds)

    @property
    def tokens_per_s(self) -> float | None:
        """The requests' decode tokens over their decode time (the first token is the prefill's)."""
        if self.requests < 1 or self.seconds <= 0 or self.tokens <= self.requests:
            return None
        return (self.tokens - self.requests) / self.seconds


def decode_times(text: str, model: str) -> DecodeTimes | None:
    """`model`'s decode histograms in `/metrics` text; None where the server exports none (not vLLM,
    or `--disable-log-stats`). Malformed text gives None too: `spec_counters` names it."""
    try:
        samples = parse_prometheus(text)
    except ValueError:
        return None
    return _decode_times(samples, model)


def read_metrics(text: str, url: str, model: str, spec: bool) -> tuple[SpecCounters | None, DecodeTimes | None]:
    """One `/metrics` text parsed once: the spec-decode counters (`spec`: a server with a draft,
    raising as `spec_counters` does) and the decode histograms."""
    if not spec:
        return None, decode_times(text, model)
    samples = _samples(text, url)
    return _spec_counters(samples, url, model), _decode_times(samples, model)


def _decode_times(samples: list[tuple[str, dict[str, str], float]], model: str) -> DecodeTimes | None:
    sums = {DECODE_SUM: 0.0, DECODE_COUNT: 0.0, GENERATED_SUM: 0.0}
    seen = set()
    for name, lab, value in samples:
        if name in sums and lab.get("model_name", model) == model:
            sums[name] += value
            seen.add(name)
    if len(seen) < len(sums):
        return None
    return DecodeTimes(int(sums[DECODE_COUNT]), sums[GENERATED_SUM], sums[DECODE_SUM])


_METRICS_HINT = "point {server} at the vLLM server itself, not a proxy that rewrites /metrics"
