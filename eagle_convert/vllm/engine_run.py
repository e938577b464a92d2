"""What one engine request asks of the vLLM worker and what it answers: the generate passes
(`PassSpec`), each pass's outputs and spec-decode counters (`PassResult`), and the request's
passes with where the time went (`EngineRun`). `session.EngineSession.engine` sends and reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.jsonable import Jsonable
from eagle_convert.vllm_model import AcceptanceMetrics


@dataclass(frozen=True)
class PassSpec:
    """One ``generate`` call: which prompts (indices; None = all), at which temperature.

    ``logprobs`` > 0 returns the top-2 raw logits per generated token (near-tie margins).
    ``companion_temperature`` interleaves a sampled copy of every prompt into the same batch, so
    greedy requests are verified next to sampled ones, as in production traffic.
    """

    name: str
    temperature: float = 0.0
    seed: int = 0
    prompts: tuple[int, ...] | None = None
    logprobs: int = 0
    companion_temperature: float | None = None

    def to_request(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "temperature": self.temperature,
            "seed": self.seed,
            "prompts": None if self.prompts is None else list(self.prompts),
            "logprobs": self.logprobs,
            "companion": None
            if self.companion_temperature is None
            else {"temperature": self.companion_temperature, "seed": self.seed + 1},
        }


@dataclass
class PassResult(AcceptanceMetrics, Jsonable):
    """Outputs and spec-decode counters of one pass (counters are 0 without a draft); AL and rates
    as vLLM computes them (`vllm_model/acceptance.py`). `from_dict` reads the worker's answer
    (`session_worker._run_pass` writes every key)."""

    prompts: list[int]
    outputs: list[list[int]]
    top2: list[list[list[float]]] | None
    num_drafts: int
    num_draft_tokens: int
    num_accepted: int
    accepted_per_pos: list[int]
    seconds: float
    per_request: list[dict | None] | None
    mixed: bool = False
    timing: list[dict] | None = None  # per request: ttft_s, decode_s, tokens (engine-core timestamps)


@dataclass
class EngineRun:
    """The passes of one engine request by name, where the time went, and whether it started an
    engine or swapped the draft into the running one."""

    draft: str | None
    vllm_version: str | None
    passes: dict[str, PassResult]
    timings: dict[str, float] = field(default_factory=dict)
    started: bool = True  # False: the draft was swapped into the running engine
    swap: dict[str, Any] | None = None  # what the swap did, or why it was refused
    workarounds: list[str] = field(default_factory=list)  # engine defects avoided (vllm/cpu_rope.py)

    @property
    def seconds(self) -> float:
        return float(self.timings.get("total_s", 0.0))
