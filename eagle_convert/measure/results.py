"""The smoke run's data model: summed spec-decode counters, results per request, per draft and per
category x bucket group, the differences to the baseline draft, and the report with its JSON form.

Definitions follow vLLM 0.32.0 (`v1/spec_decode/metrics.py`, `SpecDecodingLogging.log`): AL =
1 + accepted / drafts, the rate at position i = rounds whose first i+1 drafts were accepted / rounds,
acceptance rate = accepted / draft tokens. Target forward passes per request = 1 (prefill) + draft
rounds. Engines fill these in `measure/engines.py`; `measure/reader.py` reads the JSON back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.jsonable import dump, key
from eagle_convert.measure.prompts import PromptSet
from eagle_convert.vllm_model import AcceptanceMetrics, Release

LOG = logging.getLogger(__name__)


@dataclass
class Counts(AcceptanceMetrics):
    """Summed spec-decode counters; `seconds` None where the engine has no per-request time."""

    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    target_forwards: int = 0
    seconds: float | None = 0.0

    def add(self, o: Counts) -> None:
        self.requests += o.requests
        self.prompt_tokens += o.prompt_tokens
        self.generated_tokens += o.generated_tokens
        self.add_counters(o)
        self.target_forwards += o.target_forwards
        self.seconds = None if self.seconds is None or o.seconds is None else self.seconds + o.seconds

    @property
    def per_position(self) -> list[float]:
        return self.per_position_rate

    @property
    def tokens_per_forward(self) -> float:
        return self.generated_tokens / self.target_forwards if self.target_forwards else 0.0

    @property
    def tokens_per_s(self) -> float | None:
        return self.generated_tokens / self.seconds if self.seconds else None

    def to_dict(self) -> dict[str, Any]:
        return dump(self, _COUNTS_KEYS)


_COUNTS_KEYS = (
    "acceptance_length:4 acceptance_rate:4 per_position:4 requests prompt_tokens generated_tokens num_drafts "
    "num_draft_tokens num_accepted accepted_per_pos target_forwards tokens_per_forward:4 seconds:4 tokens_per_s:2"
)


def counts_from_histogram(histogram: Sequence[int], num_draft_tokens: int, *, k: int) -> Counts:
    """Counters of one request from vLLM's per-request histogram (index j = drafts accepted in a
    round). In a chain, position i is accepted in every round that accepted more than i drafts."""
    rounds = sum(histogram)
    return Counts(
        requests=1,
        num_drafts=rounds,
        num_draft_tokens=int(num_draft_tokens),
        num_accepted=sum(j * c for j, c in enumerate(histogram)),
        accepted_per_pos=[sum(histogram[i + 1 :]) for i in range(k)],
        target_forwards=rounds + 1,
        seconds=None,
    )


@dataclass
class RequestResult:
    prompt_id: str = field(metadata=key("id"))
    category: str
    bucket: int
    counts: Counts | None  # None: the engine gave only totals

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "id category bucket") | (self.counts.to_dict() if self.counts else {})


@dataclass
class Group:
    category: str  # a category or "all"
    bucket: int | None  # a bucket, or None for all buckets
    counts: Counts

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "bucket": self.bucket, **self.counts.to_dict()}


@dataclass
class DraftResult:
    label: str
    path: str
    variant: str | None
    total: Counts
    groups: list[Group]
    requests: list[RequestResult]
    per_request: bool  # whether category / bucket groups are available
    load_seconds: float | None = None
    sampling_control: Any = None  # measure.control.SamplingControl of this draft's engine (vLLM, T > 0)
    k_sweep: Any = None  # measure.ksweep.KSweep: every k <= K from this run (smoke --k-sweep, report)

    def group(self, category: str, bucket: int | None) -> Counts | None:
        return next((g.counts for g in self.groups if g.category == category and g.bucket == bucket), None)

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "label path variant per_request load_seconds total sampling_control k_sweep groups requests")


@dataclass
class Delta:
    """`draft` minus the first (baseline) draft; per group where both have one."""

    draft: str
    baseline: str
    acceptance_length: float = field(metadata=key(ndigits=4))
    acceptance_rate: float = field(metadata=key(ndigits=4))
    per_position: list[float] = field(metadata=key(ndigits=4))
    tokens_per_s_ratio: float | None = field(metadata=key(ndigits=3))
    groups: list[tuple[str, int | None, float]]  # (category, bucket, ΔAL)

    def to_dict(self) -> dict[str, Any]:
        return dump(
            self, groups=[{"category": c, "bucket": b, "acceptance_length": round(v, 4)} for c, b, v in self.groups]
        )


@dataclass
class SmokeReport:
    """Acceptance of every draft on the same prompts (`to_dict()` is `smoke --json`)."""

    target: str
    engine: str
    engine_version: str | None
    settings: dict[str, Any]
    prompts: PromptSet
    drafts: list[DraftResult]
    deltas: list[Delta]
    seconds: float = field(default=0.0, metadata=key(ndigits=3))
    throughput: Any = None  # measure.throughput.ThroughputReport (vLLM with concurrency levels)

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(p.category for p in self.prompts.prompts))

    @property
    def buckets(self) -> list[int]:
        return sorted({p.bucket for p in self.prompts.prompts})

    def to_dict(self) -> dict[str, Any]:
        ps = self.prompts
        items = [
            dict(id=p.id, category=p.category, bucket=p.bucket, prompt_tokens=p.num_tokens, filler_words=p.filler_words)
            | ({"provenance": ps.provenance[p.id]} if p.id in ps.provenance else {})
            for p in ps.prompts
        ]
        skipped = [vars(s) for s in ps.skipped]
        prompts = dict(chat_template=ps.chat_template, suite=ps.suite, count=len(items), items=items, skipped=skipped)
        prompts["refused"] = list(ps.refused)
        return dump(self, _REPORT_KEYS, prompts=prompts)


_REPORT_KEYS = "target engine engine_version settings seconds prompts drafts deltas throughput"


# Per draft: the request results, the engine's totals, and the draft-load / engine-start seconds.
EngineOut = list[tuple[list[RequestResult], Counts, float | None]]


def smoke_settings(
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    buckets: Sequence[int],
    chat_template: str | None,
    tensor_parallel_size: int,
    speculative_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `SmokeReport`'s `settings` block, one shape for `smoke` and `report`'s measuring stages;
    `speculative_config` (the --speculative-config keys every vLLM engine ran with) only when given."""
    out: dict[str, Any] = {
        "k": k,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "seed": seed,
        "buckets": list(buckets),
        "chat_template": chat_template,
        "tensor_parallel_size": tensor_parallel_size,
        "ignore_eos": True,
    }
    if speculative_config is not None:
        out["speculative_config"] = dict(speculative_config)
    return out


def draft_labels(paths: Sequence[Path]) -> list[str]:
    """Each draft's folder name; `name#i` (1-based position) where two drafts share one."""
    names = [p.name for p in paths]
    return [n if names.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(names)]


def _variant(path: Path, release: Release) -> str | None:
    try:
        from eagle_convert.draft import describe, open_checkpoint

        return describe(open_checkpoint(path), release, read_vocab=False).variant
    except Exception as exc:  # a label only: the engines report real load problems
        LOG.debug("variant of %s unknown: %s", path, exc)
        return None


def _group(d_requests: list[RequestResult], categories: list[str], buckets: list[int]) -> list[Group]:
    groups: list[Group] = []
    keys: list[tuple[str, int | None]] = [(c, b) for c in categories for b in buckets]
    if len(buckets) > 1:  # otherwise these repeat the rows above and the draft total
        keys += [(c, None) for c in categories] + [("all", b) for b in buckets]
    for cat, bucket in keys:
        sel = [
            r.counts
            for r in d_requests
            if r.counts is not None and cat in ("all", r.category) and bucket in (None, r.bucket)
        ]
        if sel:
            total = Counts(accepted_per_pos=[])
            for c in sel:
                total.add(c)
            groups.append(Group(cat, bucket, total))
    return groups


def draft_results(
    paths: Sequence[Path], raw: EngineOut, pset: PromptSet, release: Release, labels: Sequence[str] | None = None
) -> list[DraftResult]:
    """One DraftResult per draft from an engine's request results and totals (groups where the
    engine gave per-request counters); each draft's variant as vLLM `release` describes it."""
    categories = list(dict.fromkeys(p.category for p in pset.prompts))
    bucket_ids = sorted({p.bucket for p in pset.prompts})
    out = []
    for path, label_, (reqs, total, load_s) in zip(paths, labels or draft_labels(paths), raw):
        per_request = all(r.counts is not None for r in reqs)
        groups = _group(reqs, categories, bucket_ids) if per_request else []
        out.append(DraftResult(label_, str(path), _variant(path, release), total, groups, reqs, per_request, load_s))
    return out


def deltas(drafts: list[DraftResult]) -> list[Delta]:
    """Every draft after the first minus the first (the baseline)."""
    if len(drafts) < 2:
        return []
    base = drafts[0]
    out = []
    for d in drafts[1:]:
        tps_b, tps_d = base.total.tokens_per_s, d.total.tokens_per_s
        groups = []
        for g in d.groups:
            b = base.group(g.category, g.bucket)
            if b is not None:
                groups.append((g.category, g.bucket, g.counts.acceptance_length - b.acceptance_length))
        pp = [x - y for x, y in zip(d.total.per_position, base.total.per_position)]
        out.append(
            Delta(
                d.label,
                base.label,
                d.total.acceptance_length - base.total.acceptance_length,
                d.total.acceptance_rate - base.total.acceptance_rate,
                pp,
                tps_d / tps_b if tps_b and tps_d else None,
                groups,
            )
        )
    return out
