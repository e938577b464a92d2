"""vLLM passes and the one vLLM runner, `Engines`: one set of pass names, the passes each engine
runs, and every engine request of `check`, `smoke --engine vllm` and `report`.

A pass is one `generate` call on an engine (`vllm.PassSpec`). Every caller names its passes from
the one set below, so a pass means the same thing wherever it runs:

- `MAIN`: the measuring pass, every prompt at the measuring temperature.
- `GREEDY`: every prompt at T = 0 with top-2 logits (check's identity reference and, above T = 0,
  the greedy side of its sampling control).
- `CONTROL_GREEDY`, `CONTROL_EPS`: the sampling control's passes on its first prompts, greedy with
  top-2 logits and at T = eps (`measure/control.py`; smoke and report above T = 0).
- `MIXED`: every prompt greedily next to sampled companions (check's mixed-batch identity).

`Engines` runs them: all vLLM work of a command in one worker process (the caller's
`vllm.EngineSession`, else the one in use, `vllm.engine_session`: one vLLM import), started when the
first stage that needs vLLM runs. In `check` each engine (the candidate draft, the baseline draft,
the target alone) starts at most once and runs every pass the policy needs from it; an engine whose
passes are all in `cache` does not start, and a baseline of the candidate's structure (its
fine-tuned or calibrated twin) is swapped into the candidate's engine instead of starting one. A
cache (a plain dict) handed to several checks shares engine runs between them: keys hold the
target, draft, prompts and every setting, on the assumption that the folders do not change in
between. `smoke` and `report` plan theirs in `measure/vllm_measure.py` (drafts of one structure
swapped into one engine).
"""

from __future__ import annotations

import hashlib
import json
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.vllm import (
    ENGINE_TIMEOUT_S,
    MAX_NUM_SEQS,
    EngineRun,
    EngineSession,
    PassResult,
    PassSpec,
    engine_session,
)

MAIN, GREEDY, CONTROL_GREEDY, CONTROL_EPS, MIXED = "main", "greedy", "control-greedy", "control-eps", "mixed"
CONTROL_TEMPERATURE = 0.01  # smoke's and report's sampling control (check's is the policy's)
CONTROL_PROMPTS = 2


def _control_prompts(n_prompts: int, count: int) -> tuple[int, ...]:
    return tuple(range(min(count, n_prompts)))


def control_passes(temperature: float, n_prompts: int, seed: int, count: int = CONTROL_PROMPTS) -> list[PassSpec]:
    """The two passes of the sampling control on the first `count` prompts: greedy with top-2
    logits, and T = `temperature`."""
    idx = _control_prompts(n_prompts, count)
    return [PassSpec(CONTROL_GREEDY, 0.0, seed, idx, logprobs=2), PassSpec(CONTROL_EPS, temperature, seed, idx)]


def draft_passes(temperature: float, n_prompts: int, seed: int) -> list[PassSpec]:
    """What `smoke` and `report` run on a draft's engine: the measuring pass and, above T = 0, the
    sampling control at `CONTROL_TEMPERATURE`."""
    passes = [PassSpec(MAIN, temperature, seed)]
    if temperature > 0:
        passes += control_passes(CONTROL_TEMPERATURE, n_prompts, seed)
    return passes


@dataclass
class PassPlan:
    """The passes one check needs from each engine."""

    candidate: list[PassSpec]
    target_alone: list[PassSpec]
    baseline: list[PassSpec]


def plan_check_passes(
    *,
    temperature: float,
    seed: int,
    identity: bool,
    mixed: float | None,
    control: float | None,
    control_prompts: int,
    n_prompts: int,
) -> PassPlan:
    """Candidate: the measuring pass (greedy at T = 0, with top-2 logits), a greedy pass too when
    T > 0 and identity or the control needs one, T = eps on the control prompts, the mixed batch.
    Target alone (identity): greedy with top-2 logits, and T = eps when the control runs.
    Baseline: the measuring pass only."""
    main = PassSpec(MAIN, temperature, seed, None, logprobs=2 if temperature == 0 else 0)
    cand = [main]
    ctl = _control_prompts(n_prompts, control_prompts)
    if temperature > 0 and (identity or control is not None):
        cand.append(PassSpec(GREEDY, 0.0, seed, None, logprobs=2))
    if control is not None:
        cand.append(PassSpec(CONTROL_EPS, control, seed, ctl))
    if mixed is not None:
        cand.append(PassSpec(MIXED, 0.0, seed, None, companion_temperature=mixed))
    alone = [PassSpec(GREEDY, 0.0, seed, None, logprobs=2)] if identity else []
    if identity and control is not None:
        alone.append(PassSpec(CONTROL_EPS, control, seed, ctl))
    return PassPlan(cand, alone, [main])


@dataclass
class Engines:
    """The engine runs of a command (or of several checks sharing `cache`)."""

    cache: dict[Any, Any] = field(default_factory=dict)
    session: EngineSession | None = None
    engine_starts: int = 0
    draft_swaps: int = 0  # candidate/baseline drafts swapped into the running engine (`vllm/sharing.py`)
    load_checks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # per engine role: worker seconds spent
    vllm_version: str | None = None
    last_run: EngineRun | None = None  # the latest engine request: started or swapped, its timings
    _borrowed: ExitStack = field(default_factory=ExitStack)
    _workers_before: int = 0  # of a session shared with earlier runs

    def __post_init__(self) -> None:
        self._workers_before = self.worker_starts

    def _session(self) -> EngineSession:
        """The caller's session, else the one in use (`vllm.engine_session`), else a new one."""
        if self.session is None:
            self.session = self._borrowed.enter_context(engine_session())
            self._workers_before = self.session.worker_starts
        return self.session

    def shares(self, tensor_parallel_size: int = 1) -> bool:
        """Whether drafts of one structure swap into one engine (`vllm.EngineSession.shares`)."""
        return self._session().shares(tensor_parallel_size)

    def close(self) -> None:
        """Leave a borrowed session with no engine up, close one opened here; the caller's stays."""
        self._borrowed.close()

    @staticmethod
    def _prompts_key(prompts: list[list[int]]) -> str:
        return hashlib.sha256(json.dumps(prompts).encode()).hexdigest()[:16]

    def passes(
        self,
        role: str,
        target: Path,
        draft: Path | None,
        prompts: list[list[int]],
        specs: list[PassSpec],
        *,
        k: int,
        max_new_tokens: int,
        max_model_len: int,
        seed: int,
        timeout_s: float = ENGINE_TIMEOUT_S,
        speculative: dict[str, Any] | None = None,
        tensor_parallel_size: int = 1,
        max_num_seqs: int = MAX_NUM_SEQS,
    ) -> dict[str, PassResult]:
        """The results of `specs` on the engine (target, draft); starts it only for uncached passes.
        `speculative`: the deployment's speculative-config keys (`--speculative-config`)."""
        base = (
            "pass",
            str(target),
            str(draft) if draft else None,
            k,
            max_new_tokens,
            max_model_len,
            seed,
            self._prompts_key(prompts),
            json.dumps(speculative or {}, sort_keys=True),
            tensor_parallel_size,
            max_num_seqs,
        )
        missing = [s for s in specs if (*base, s) not in self.cache]
        if missing:
            run = self._session().engine(
                target,
                draft,
                prompts,
                missing,
                num_speculative_tokens=k,
                max_new_tokens=max_new_tokens,
                max_model_len=max_model_len,
                seed=seed,
                timeout_s=timeout_s,
                speculative=speculative,
                tensor_parallel_size=tensor_parallel_size,
                max_num_seqs=max_num_seqs,
            )
            self.last_run = run
            self.engine_starts += run.started
            self.draft_swaps += not run.started
            self.vllm_version = run.vllm_version or self.vllm_version
            self.seconds[role] = self.seconds.get(role, 0.0) + run.seconds
            for s in missing:
                self.cache[tuple([*base, s])] = run.passes[s.name]
        return {s.name: self.cache[tuple([*base, s])] for s in specs}

    def load_check(
        self, draft: Path, target: Path, *, k: int, timeout_s: float, speculative: dict[str, Any] | None = None
    ) -> Any:
        """The strict sentinel load of `draft` (an EngineReport), cached like the passes."""
        key = ("load", str(draft), str(target), k, json.dumps(speculative or {}, sort_keys=True))
        if key not in self.cache:
            [report] = self._session().load_check(
                [draft], target, num_speculative_tokens=k, timeout_s=timeout_s, speculative=speculative
            )
            self.load_checks += 1
            self.vllm_version = report.vllm_version or self.vllm_version
            self.cache[key] = report
        return self.cache[key]

    @property
    def worker_starts(self) -> int:
        """vLLM workers started by these runs (0 when they found one running)."""
        return (self.session.worker_starts if self.session is not None else 0) - self._workers_before
