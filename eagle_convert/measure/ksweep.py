"""Every k from one run: the acceptance length a draft would get at each k <= K, read from the
counters of one run at k = K, and the expected speedup per k from the measured step costs.

The estimator. A run at k = K gives, per draft round, the accepted count a in [0, K]; vLLM's
counters (0.32.0 `v1/spec_decode/metrics.py`, `SpecDecodingStats.observe_draft`) keep
accepted_per_pos[i] = rounds that accepted at least i + 1 drafts. At k' <= K the same round would
accept min(a, k'), so

    AL(k') = 1 + sum(accepted_per_pos[i] for i < k') / rounds

(and the acceptance rate sum(...) / (rounds * k')). At k' = K this is the run's own AL.

Where it differs from a separate run at k' (the tests measure how much, `tests/test_ksweep.py`):

- **Round boundaries.** A run at k' < K has more rounds, each starting where the previous one
  ended. A round of the K run that accepts more than k' drafts continues its chain on the draft's
  own fed-back state past depth k'; the k' run stops there and starts a fresh chain from the
  target's states. So the positions rounds start at, and what the draft sees at depth 1..k', differ.
  A draft whose accuracy falls with depth does at least as well after the restart, so the estimate
  tends to be low (conservative) for such drafts; a draft whose accuracy does not depend on depth or
  position (perfect, random) is estimated exactly or within sampling noise.
- **The bonus token.** At T = 0 the target's greedy text is the same at every k (the bonus token of
  a k' round is the token the K run's draft k'+1 was accepted for), so both runs score the same
  text, partitioned into other rounds. At T > 0 the random streams differ, so the texts differ and
  the comparison holds in expectation only.
- **The end of the request.** The last round is cut at `max_new_tokens` but still counted, as vLLM
  counts it; the K run and the k' run end in different places, which matters for short outputs.

The expected speedup over the target alone, for a round that costs one target forward plus k draft
steps: speedup(k) = AL(k) * t_target / (t_target + k * (t_draft + t_verify_extra)), with
t_verify_extra the extra cost of verifying one more token (0 on a GPU, where a decode step is bound
by reading the weights; close to t_target per token on a compute-bound CPU). The costs come from
the same run (`StepCosts`): timed steps on the reference engine (`measure/stepcost.py`), or the
per-user decode rates with and without speculation at concurrency 1 on vLLM (`costs_from_rates`).
The recommended k is the smallest one within 1 % of the best expected speedup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.jsonable import Jsonable, dump, key
from eagle_convert.vllm_model import AcceptanceMetrics

TIE = 0.01  # relative: expected speedups closer than this are one choice, and the smaller k wins
ESTIMATOR = "AL(k) = 1 + sum(accepted_per_pos[i] for i < k) / rounds: each round's accepted count capped at k"


def _check(num_drafts: int, accepted_per_pos: Sequence[int], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    if k > len(accepted_per_pos):
        raise ValueError(f"k = {k} exceeds the run's k = {len(accepted_per_pos)}: a run at K estimates k <= K only")
    if num_drafts < 0 or any(c < 0 or c > num_drafts for c in accepted_per_pos):
        raise ValueError(f"counters out of range: {num_drafts} rounds, accepted_per_pos {list(accepted_per_pos)}")


def acceptance_at(num_drafts: int, accepted_per_pos: Sequence[int], k: int) -> float:
    """AL at k <= K from a run at K: 1 + sum(accepted_per_pos[:k]) / rounds (1.0 without rounds).

    Args:
        num_drafts: draft rounds of the run (vLLM's num_drafts).
        accepted_per_pos: rounds that accepted at least i + 1 drafts, i = 0..K-1.
        k: the k to estimate, 1..K.

    Returns:
        The acceptance length each round's count capped at k gives.

    Raises:
        ValueError: k outside 1..K, or counters that cannot come from one run.
    """
    _check(num_drafts, accepted_per_pos, k)
    return 1.0 + sum(accepted_per_pos[:k]) / num_drafts if num_drafts else 1.0


def acceptance_rate_at(num_drafts: int, accepted_per_pos: Sequence[int], k: int) -> float:
    """Accepted / drafted tokens at k <= K: sum(accepted_per_pos[:k]) / (rounds * k)."""
    _check(num_drafts, accepted_per_pos, k)
    return sum(accepted_per_pos[:k]) / (num_drafts * k) if num_drafts else 0.0


def al_standard_error(num_drafts: int, accepted_per_pos: Sequence[int], k: int) -> float:
    """The standard error of AL(k) over rounds, treating rounds as independent draws.

    The per-round count min(a, k) has P(min(a, k) >= i + 1) = accepted_per_pos[i] / rounds for
    i < k, so its mean and variance follow from the counters alone (no histogram needed).
    """
    _check(num_drafts, accepted_per_pos, k)
    if num_drafts < 2:
        return 0.0
    n = num_drafts
    tail = [c / n for c in accepted_per_pos[:k]]  # P(X >= j), j = 1..k
    mean = sum(tail)
    second = sum((2 * j + 1) * p for j, p in enumerate(tail))  # E[X^2] = sum_j (2j - 1) P(X >= j)
    var = max(0.0, second - mean * mean) * n / (n - 1)
    return math.sqrt(var / n)


@dataclass(frozen=True)
class StepCosts(Jsonable):
    """What one step costs, in seconds, measured in the same run as the counters.

    `draft_s` is one draft step (one token); `target_s` one target decode step (one token, the
    no-speculation baseline); `verify_extra_s` what verifying one more token adds to a target
    forward (0.0 where it was not measured apart: a GPU's memory-bound step). Where only a round's
    total is known (vLLM's decode rates), `draft_s` holds draft step plus extra verify cost.
    """

    draft_s: float
    target_s: float
    verify_extra_s: float = 0.0
    source: str = ""

    def round_s(self, k: int) -> float:
        """One round at k: a target forward over k + 1 tokens plus k draft steps."""
        return self.target_s + k * (self.draft_s + self.verify_extra_s)

    def to_dict(self) -> dict[str, Any]:
        ratio = round(self.draft_s / self.target_s, 6) if self.target_s else None
        return dump(self, "draft_s target_s verify_extra_s draft_to_target source", draft_to_target=ratio)


def expected_speedup(acceptance_length: float, k: int, costs: StepCosts) -> float:
    """AL(k) * t_target / (t_target + k * (t_draft + t_verify_extra)): tokens per second with the
    draft at k over the target alone's, from the step costs."""
    return acceptance_length * costs.target_s / costs.round_s(k) if costs.round_s(k) > 0 else 0.0


def costs_from_rates(
    *, no_spec_tokens_per_s: float, spec_tokens_per_s: float, acceptance_length: float, k: int, source: str
) -> StepCosts | None:
    """Step costs from per-user decode rates at concurrency 1, with and without the draft at k.

    Without speculation a token costs t_target = 1 / rate; with it a round yields AL tokens, so
    it costs AL / rate_spec = t_target + k * t_per_draft. t_per_draft (stored as `draft_s`) then
    holds the draft step and whatever verifying one more token adds. None where the rates are
    missing; a negative difference (noise on a tiny draft) is clamped to 0.
    """
    if no_spec_tokens_per_s <= 0 or spec_tokens_per_s <= 0 or k < 1:
        return None
    target_s = 1.0 / no_spec_tokens_per_s
    per_draft = max(0.0, (acceptance_length / spec_tokens_per_s - target_s) / k)
    return StepCosts(per_draft, target_s, 0.0, source)


def costs_from_throughput(throughput: Any, label: str, k: int) -> StepCosts | None:
    """`costs_from_rates` at concurrency 1 of a `ThroughputReport` (vLLM): the draft `label`'s
    per-user rate and AL there, and the target alone's; None without a concurrency-1 level."""
    draft = next((d for d in throughput.drafts if d.label == label), None)
    base, mine = throughput.baseline.level(1), draft.level(1) if draft is not None else None
    if base is None or mine is None or mine.acceptance_length is None:
        return None
    return costs_from_rates(
        no_spec_tokens_per_s=base.tokens_per_s,
        spec_tokens_per_s=mine.tokens_per_s,
        acceptance_length=mine.acceptance_length,
        k=k,
        source=f"vLLM per-user decode rates at concurrency 1 ({throughput.device})",
    )


@dataclass(frozen=True)
class KRow(Jsonable):
    k: int
    acceptance_length: float = field(metadata=key(ndigits=4))
    acceptance_rate: float = field(metadata=key(ndigits=4))
    standard_error: float = field(metadata=key(ndigits=4))
    expected_speedup: float | None = field(metadata=key(ndigits=4))  # None without step costs


@dataclass(frozen=True)
class KSweep(Jsonable):
    """AL, acceptance rate and expected speedup at every k = 1..K of one run at K."""

    k_max: int
    rounds: int
    rows: tuple[KRow, ...]
    costs: StepCosts | None = field(default=None, metadata=key("step_costs"))

    def row(self, k: int) -> KRow:
        return self.rows[k - 1]

    @property
    def recommended_k(self) -> int | None:
        """The smallest k whose expected speedup is within `TIE` of the best (a larger k spends
        more compute for no gain the estimate can resolve); None without costs."""
        scored = [r for r in self.rows if r.expected_speedup is not None]
        if not scored:
            return None
        best = max(r.expected_speedup or 0.0 for r in scored)
        return next(r.k for r in scored if (r.expected_speedup or 0.0) >= best * (1 - TIE))

    @property
    def at_edge(self) -> bool:
        """The best k is K itself: a run at a larger K may find a better one."""
        return self.recommended_k == self.k_max and self.k_max > 1

    def to_dict(self) -> dict[str, Any]:
        rk = self.recommended_k
        speedup = None if rk is None else self.row(rk).to_dict()["expected_speedup"]
        keys = "k_max rounds estimator rows step_costs recommended_k recommended_speedup at_edge"
        return dump(self, keys, estimator=ESTIMATOR, recommended_speedup=speedup)


def k_sweep(counts: AcceptanceMetrics, costs: StepCosts | None = None) -> KSweep:
    """Every k <= K from the counters of one run at K (K = len(counts.accepted_per_pos)).

    Args:
        counts: summed counters of the run (any engine's: reference loop, vLLM, smoke totals).
        costs: the step costs measured in the same run; None leaves the speedups out.

    Returns:
        One row per k = 1..K, and the recommended k where costs are given.

    Raises:
        ValueError: counters without per-position counts (K = 0) or out of range.
    """
    n, app = counts.num_drafts, list(counts.accepted_per_pos)
    if not app:
        raise ValueError("the run has no per-position counters: a k sweep needs accepted_per_pos")
    rows = []
    for k in range(1, len(app) + 1):
        al = acceptance_at(n, app, k)
        speed = expected_speedup(al, k, costs) if costs is not None else None
        rows.append(KRow(k, al, acceptance_rate_at(n, app, k), al_standard_error(n, app, k), speed))
    return KSweep(len(app), n, tuple(rows), costs)
