"""What `check` measures in vLLM, and the fewest engine starts that measure it.

All vLLM work of one check runs in one worker process (`vllm.session`: one vLLM import), started
when the first stage that needs vLLM runs. Each engine (the candidate draft, the baseline draft,
the target alone) starts at most once and runs every pass the policy needs from it; an engine whose
passes are all in `cache` does not start, and a baseline of the candidate's structure (its
fine-tuned or calibrated twin) is swapped into the candidate's engine instead of starting one. A
cache (a plain dict) handed to several checks shares engine runs between them: keys hold the
target, draft, prompts and every setting, on the assumption that the folders do not change in
between.

Hub references are downloaded here (into the normal Hugging Face cache, through `io.hub`), only
for the stages that load weights; the static stages read headers only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft import CheckpointRef
from eagle_convert.errors import CheckpointNotFoundError
from eagle_convert.io import missing_path_error
from eagle_convert.vllm import EngineSession, PassResult, PassSpec

MAIN, GREEDY, EPS, MIXED = "main", "greedy", "eps", "mixed"


def local_folder(ref: str, what: str) -> Path:
    """A local checkpoint folder for `ref`: the folder itself, or a hub repo downloaded into the HF cache."""
    parsed = CheckpointRef.parse(str(ref))
    if not parsed.is_hub:
        path = Path(parsed.local or ref).expanduser()
        if not path.exists():
            raise missing_path_error(path)
        folder = path if path.is_dir() else path.parent
        if not (folder / "config.json").is_file():
            raise CheckpointNotFoundError(
                f"{what} {ref}: no config.json in {folder}", hint="give the checkpoint folder (vLLM loads folders)"
            )
        return folder.resolve()
    from eagle_convert.io import HubSource

    src = HubSource(parsed.repo, parsed.revision)  # type: ignore[arg-type]
    names = src.list_files()
    if "config.json" not in names:
        raise CheckpointNotFoundError(f"{what} {ref}: the repo has no config.json at its root")
    found: Path | None = None
    for name in names:
        path = src.local_path(name)
        if name == "config.json":
            found = path.parent
    if found is None:  # list_files() named config.json, so local_path() fetched it
        raise CheckpointNotFoundError(f"{what} {ref}: config.json could not be downloaded")
    return found


@dataclass
class Plan:
    """The passes one check needs from each engine."""

    candidate: list[PassSpec]
    target_alone: list[PassSpec]
    baseline: list[PassSpec]


def plan_passes(
    *,
    temperature: float,
    seed: int,
    identity: bool,
    mixed: float | None,
    control: float | None,
    control_prompts: int,
    n_prompts: int,
) -> Plan:
    """Candidate: the measuring pass (greedy at T = 0, with top-2 logits), a greedy pass too when
    T > 0 and identity or the control needs one, T = eps on the control prompts, the mixed batch.
    Target alone (identity): greedy with top-2 logits, and T = eps when the control runs.
    Baseline: the measuring pass only."""
    main = PassSpec(MAIN, temperature, seed, None, logprobs=2 if temperature == 0 else 0)
    cand = [main]
    ctl = tuple(range(min(control_prompts, n_prompts)))
    if temperature > 0 and (identity or control is not None):
        cand.append(PassSpec(GREEDY, 0.0, seed, None, logprobs=2))
    if control is not None:
        cand.append(PassSpec(EPS, control, seed, ctl))
    if mixed is not None:
        cand.append(PassSpec(MIXED, 0.0, seed, None, companion_temperature=mixed))
    alone = [PassSpec(GREEDY, 0.0, seed, None, logprobs=2)] if identity else []
    if identity and control is not None:
        alone.append(PassSpec(EPS, control, seed, ctl))
    return Plan(cand, alone, [main])


@dataclass
class Engines:
    """The engine runs of a check (or of several checks sharing `cache`)."""

    cache: dict[Any, Any] = field(default_factory=dict)
    session: EngineSession | None = None
    engine_starts: int = 0
    draft_swaps: int = 0  # candidate/baseline drafts swapped into the running engine (`vllm/sharing.py`)
    load_checks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # per engine role: worker seconds spent
    vllm_version: str | None = None
    _own_session: bool = False

    def _session(self) -> EngineSession:
        if self.session is None:
            self.session, self._own_session = EngineSession(), True
        return self.session

    def close(self) -> None:
        if self._own_session and self.session is not None:
            self.session.close()
            self.session = None

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
        timeout_s: float,
        speculative: dict[str, Any] | None = None,
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
            )
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
        return self.session.worker_starts if self.session is not None else 0
