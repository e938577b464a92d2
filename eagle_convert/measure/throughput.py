"""Per-user decode tokens/s at several concurrencies, with each draft and without speculation.

EAGLE-3.1's headline numbers are per-user decode throughput at concurrency 1 / 4 / 16 over the
same target without speculation. Here every draft's engine and one engine of the target alone
run the same passes in one vLLM worker (`vllm/session.py`: one vLLM import, the same build and
engine arguments): a warm-up, then for each concurrency c, `c` requests submitted together
(`max_num_seqs` >= c, so all c decode at once), enough rounds for `MIN_REQUESTS` requests.

A request's decode rate is (tokens - 1) / (last token time - first token time), from vLLM's
per-request engine-core timestamps (0.32.0 `v1/metrics/stats.py`, `RequestStateStats`); the rate
at a concurrency is the median over its requests; the speedup is a draft's rate over the
target alone's. Greedy (T = 0), EOS ignored, so every request decodes the same number of tokens.

On a CPU these speedups do not predict a GPU's: a GPU decode step of a large target is bound by
reading its weights, so verifying k + 1 tokens costs about as much as one and accepted drafts are
nearly free; on a CPU a large model's step is compute-bound (verifying k + 1 tokens costs nearly
k + 1 steps) and a tiny model's is fixed overhead. `ThroughputReport.note` says so wherever the
numbers are shown.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle_convert.errors import UsageError
from eagle_convert.jsonable import Jsonable, dump, encode, key
from eagle_convert.measure.prompts import NATURAL, PromptSet

if TYPE_CHECKING:
    from eagle_convert.vllm import EngineRun, PassResult, PassSpec

DEFAULT_CONCURRENCY = (1, 4, 16)
MIN_REQUESTS = 4  # requests measured per concurrency level (c = 1 runs 4 rounds of one)
MAX_CONCURRENCY = 256
WARMUP = "tput-warmup"
NO_SPEC = "no speculation"


def parse_concurrency(value: str | Sequence[int] | None) -> list[int]:
    """`1,4,16` -> [1, 4, 16] (sorted, unique); UsageError names the bad item."""
    if value is None:
        return []
    items = value.replace(" ", "").split(",") if isinstance(value, str) else list(value)
    out: set[int] = set()
    for x in items:
        if x == "":
            continue
        try:
            c = int(x)
        except (TypeError, ValueError):
            raise UsageError(
                f"{{concurrency}}: {x!r} is not an integer (e.g. 1,4,16)", options=("concurrency",)
            ) from None
        if not 1 <= c <= MAX_CONCURRENCY:
            raise UsageError(f"{{concurrency}}: {c} is outside 1..{MAX_CONCURRENCY}", options=("concurrency",))
        out.add(c)
    if not out:
        raise UsageError("{concurrency}: give at least one level (e.g. 1,4,16)", options=("concurrency",))
    return sorted(out)


def throughput_passes(concurrency: Sequence[int], pset: PromptSet, seed: int) -> list[PassSpec]:
    """The warm-up and the measuring passes (greedy), on the natural-bucket prompts cycled to
    fill each batch (all prompts when no natural bucket was asked for)."""
    from eagle_convert.vllm import PassSpec

    pool = [i for i, p in enumerate(pset.prompts) if p.bucket == NATURAL] or list(range(len(pset.prompts)))
    passes = [PassSpec(WARMUP, 0.0, seed, (pool[0],))]
    n = 0
    for c in concurrency:
        for r in range(max(1, -(-MIN_REQUESTS // c))):
            passes.append(PassSpec(f"tput-c{c}-r{r}", 0.0, seed, tuple(pool[(n + j) % len(pool)] for j in range(c))))
            n += c
    return passes


@dataclass
class LevelRate(Jsonable):
    """One concurrency level of one engine."""

    concurrency: int
    requests: int
    # per user: median decode tokens/s over the requests
    tokens_per_s: float = field(metadata=key("per_user_tokens_per_s", ndigits=3))
    min_tokens_per_s: float = field(metadata=key("min_per_user_tokens_per_s", ndigits=3))
    max_tokens_per_s: float = field(metadata=key("max_per_user_tokens_per_s", ndigits=3))
    ttft_s: float = field(metadata=key(ndigits=4))  # median time to first token
    acceptance_length: float | None = field(metadata=key(ndigits=4))  # over these passes (None without a draft)


@dataclass
class EngineRates(Jsonable):
    label: str  # a draft's label, or NO_SPEC
    path: str | None
    levels: list[LevelRate]

    def level(self, c: int) -> LevelRate | None:
        return next((x for x in self.levels if x.concurrency == c), None)


def _request_rates(pr: PassResult) -> list[tuple[float, float]]:
    """(decode tokens/s, ttft) per request; without engine timestamps, the pass's wall time."""
    if pr.timing:
        return [((t["tokens"] - 1) / t["decode_s"] if t["decode_s"] > 0 else 0.0, t["ttft_s"]) for t in pr.timing]
    return [(len(o) / pr.seconds if pr.seconds else 0.0, 0.0) for o in pr.outputs]


def engine_rates(run: EngineRun, concurrency: Sequence[int], label: str, path: str | None) -> EngineRates:
    """Fold one engine's measuring passes into a rate per concurrency level."""
    levels = []
    for c in concurrency:
        prs = [pr for name, pr in run.passes.items() if name.startswith(f"tput-c{c}-")]
        rates = [x for pr in prs for x in _request_rates(pr)]
        drafts = sum(pr.num_drafts for pr in prs)
        al = 1 + sum(pr.num_accepted for pr in prs) / drafts if drafts else None
        tps = [r for r, _ in rates]
        levels.append(
            LevelRate(
                c,
                len(rates),
                statistics.median(tps),
                min(tps),
                max(tps),
                statistics.median(t for _, t in rates),
                al if path is not None else None,
            )
        )
    return EngineRates(label, path, levels)


def cpu_note(device: str) -> str | None:
    """The honest caveat for numbers measured without a GPU (module docstring)."""
    if device == "cuda":
        return None
    return (
        "measured on a CPU: what speculation saves here depends on what one decode step costs on this "
        "machine (fixed per-step overhead for a tiny model, compute for a large one, where verifying k+1 "
        "tokens costs nearly k+1 steps), not on a GPU's memory-bound step, where verifying k+1 tokens costs "
        "about as much as one. These speedups do not predict a GPU deployment; the acceptance lengths "
        "beside them do carry over."
    )


@dataclass
class ThroughputReport(Jsonable):
    concurrency: list[int]
    baseline: EngineRates
    drafts: list[EngineRates]
    device: str  # "cuda" or "cpu"
    engine_version: str | None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def note(self) -> str | None:
        return cpu_note(self.device)

    def speedup(self, label: str, c: int) -> float | None:
        d = next((x for x in self.drafts if x.label == label), None)
        a, b = (d.level(c) if d else None), self.baseline.level(c)
        return a.tokens_per_s / b.tokens_per_s if a and b and b.tokens_per_s else None

    def to_dict(self) -> dict[str, Any]:
        speedup = {
            d.label: {str(c): encode(self.speedup(d.label, c), 4) for c in self.concurrency} for d in self.drafts
        }
        return dump(self, _REPORT_KEYS, metric=METRIC, speedup=speedup)


_REPORT_KEYS = "concurrency device engine_version settings note metric baseline drafts speedup"
METRIC = "per-user decode tokens/s: median over requests of (tokens - 1) / (last - first token time)"
