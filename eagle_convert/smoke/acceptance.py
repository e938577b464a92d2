"""vLLM's acceptance definitions (vllm-loader.md §6) over spec-decode counters, in one place.

A mixin for the counter records of every engine (reference loop, vLLM run, smoke totals), so
AL, draft acceptance rate and per-position rates can never drift apart between engines. The
class using it provides `num_drafts`, `num_draft_tokens`, `num_accepted` and `accepted_per_pos`.
"""

from __future__ import annotations


class AcceptanceMetrics:
    """AL = 1 + accepted / drafts; rate = accepted / draft tokens; position i = accepted_i / drafts."""

    @property
    def acceptance_length(self) -> float:
        """Mean tokens per target step: 1 + accepted / drafts (1.0 without drafts)."""
        return 1.0 + self.num_accepted / self.num_drafts if self.num_drafts else 1.0  # type: ignore[attr-defined]

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / drafted tokens (0.0 without drafts)."""
        return self.num_accepted / self.num_draft_tokens if self.num_draft_tokens else 0.0  # type: ignore[attr-defined]

    @property
    def per_position_rate(self) -> list[float]:
        """Share of draft rounds whose first i+1 drafted tokens were all accepted."""
        drafts = self.num_drafts  # type: ignore[attr-defined]
        return [a / drafts if drafts else 0.0 for a in self.accepted_per_pos]  # type: ignore[attr-defined]
