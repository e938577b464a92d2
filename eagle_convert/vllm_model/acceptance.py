"""vLLM's acceptance definitions over spec-decode counters, in one place.

vLLM 0.32.0 `vllm/v1/spec_decode/metrics.py`, `SpecDecodingLogging.observe` (sums the counters
of every step) and `SpecDecodingLogging.log` (mean acceptance length = 1 + accepted / drafts,
draft acceptance rate = accepted / drafted tokens, per-position rate = accepted at position i /
drafts). A mixin for the counter records of every engine (reference loop, vLLM run, smoke
totals), so AL, rates and the summing of counters can never drift apart between engines.
"""

from __future__ import annotations


class AcceptanceMetrics:
    """AL = 1 + accepted / drafts; rate = accepted / draft tokens; position i = accepted_i / drafts.

    The class using it provides the four counters below (as dataclass fields).
    """

    num_drafts: int
    num_draft_tokens: int
    num_accepted: int
    accepted_per_pos: list[int]

    @property
    def acceptance_length(self) -> float:
        """Mean tokens per target step: 1 + accepted / drafts (1.0 without drafts)."""
        return 1.0 + self.num_accepted / self.num_drafts if self.num_drafts else 1.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / drafted tokens (0.0 without drafts)."""
        return self.num_accepted / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def per_position_rate(self) -> list[float]:
        """Share of draft rounds whose first i+1 drafted tokens were all accepted."""
        drafts = self.num_drafts
        return [a / drafts if drafts else 0.0 for a in self.accepted_per_pos]

    def add_counters(self, other: AcceptanceMetrics) -> None:
        """Add `other`'s counters to these, as vLLM sums them over steps and requests; the
        per-position list grows to the longer of the two (a shorter one counts 0 beyond its end)."""
        self.num_drafts += other.num_drafts
        self.num_draft_tokens += other.num_draft_tokens
        self.num_accepted += other.num_accepted
        mine, theirs = self.accepted_per_pos, other.accepted_per_pos
        self.accepted_per_pos = [
            (mine[i] if i < len(mine) else 0) + (theirs[i] if i < len(theirs) else 0)
            for i in range(max(len(mine), len(theirs)))
        ]
