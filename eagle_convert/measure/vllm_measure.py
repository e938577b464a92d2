"""Acceptance and per-user throughput of several drafts in one vLLM worker, fewest engine starts.

Each draft runs the acceptance pass (and, above T = 0, the sampling control of
`measure/vllm_run.py`) and, with concurrency levels, the throughput passes of `measure/throughput.py`
on its engine: drafts
of one structure (`vllm/sharing.py`) share one engine start, each swapped in after the other. One
more engine, the target alone, runs the same throughput passes. Every engine lives in the same
`EngineSession` worker, so the drafts and the no-speculation baseline share the vLLM build, the
engine arguments and `max_num_seqs`. Used by `smoke --engine vllm` and `report`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.measure.passes import CONTROL_EPS, CONTROL_GREEDY, MAIN, draft_passes
from eagle_convert.measure.prompts import PromptSet
from eagle_convert.measure.throughput import (
    NO_SPEC,
    EngineRates,
    ThroughputReport,
    engine_rates,
    parse_concurrency,
    throughput_passes,
)
from eagle_convert.measure.vllm_run import (
    engine_line,
    max_model_len_for,
    ready_seconds,
    sampling_control,
    target_dtype,
)
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.vllm import EngineSession, PassResult
    from eagle_convert.vllm_model import ServeConfig

__all__ = ["DraftMeasurement", "Measurement", "engine_device", "measure_vllm", "throughput_report"]

MIN_MAX_NUM_SEQS = 8  # what the session's engines use without a concurrency above it


@dataclass
class DraftMeasurement:
    path: Path
    main: PassResult
    start_seconds: float | None
    control: Any  # measure.control.SamplingControl, None at T = 0
    rates: EngineRates | None


@dataclass
class Measurement:
    drafts: list[DraftMeasurement]
    baseline: EngineRates | None  # the target alone (None without concurrency levels or when not asked)
    version: str  # "vllm X.Y.Z"
    settings: dict[str, Any]
    engine_starts: int
    draft_swaps: int = 0  # drafts swapped into a running engine instead of starting one

    @property
    def engine_settings(self) -> dict[str, Any]:
        """The engine settings with how many engines started and drafts were swapped in."""
        return {**self.settings, "engine_starts": self.engine_starts, "draft_swaps": self.draft_swaps}


def engine_device() -> str:
    """Where the vLLM engines run: "cuda" when torch sees a GPU (the CUDA vllm build), else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def measure_vllm(
    target: Path,
    drafts: Sequence[Path],
    pset: PromptSet,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    tensor_parallel_size: int = 1,
    concurrency: Sequence[int] = (),
    labels: Sequence[str] | None = None,
    baseline: bool = True,
    say: Callable[[str], None] = print,
    session: EngineSession | None = None,
    serve: ServeConfig | None = None,
    on_tick: OnTick | None = None,
) -> Measurement:
    """Run every draft (and, with `concurrency` and `baseline`, the target alone) in one worker;
    with `serve` (--speculative-config) every draft's engine runs with exactly its keys; `on_tick`
    counts the engines run (one per draft, plus the target alone)."""
    from eagle_convert.vllm import engine_order, engine_session

    concurrency = parse_concurrency(concurrency) if concurrency else []
    dtype = target_dtype(target)
    mml = max_model_len_for(target, pset, max_new_tokens, k)
    mml = serve.engine_max_model_len(mml) if serve is not None else mml
    speculative = dict(serve.data) if serve is not None and serve.given else None
    seqs = max(MIN_MAX_NUM_SEQS, *concurrency) if concurrency else MIN_MAX_NUM_SEQS
    prompts = [p.token_ids for p in pset.prompts]
    tput = throughput_passes(concurrency, pset, seed) if concurrency else []
    kw: dict[str, Any] = dict(
        num_speculative_tokens=k,
        max_new_tokens=max_new_tokens,
        max_model_len=mml,
        seed=seed,
        tensor_parallel_size=tensor_parallel_size,
        max_num_seqs=seqs,
        speculative=speculative,
    )
    out: list[DraftMeasurement | None] = [None] * len(drafts)
    version = None
    names = list(labels) if labels is not None else [p.name for p in drafts]
    tick = tick_or_nothing(on_tick)
    runs = len(drafts) + int(bool(tput and baseline))
    tick(Tick("vllm", 0, runs))
    with engine_session(session) as session:
        starts0, swaps0 = session.engine_starts, session.swaps
        for i in engine_order(drafts, session.shares(tensor_parallel_size)):
            path, label = drafts[i], names[i]
            passes = draft_passes(temperature, len(prompts), seed)
            say(
                f"vLLM: {label}: {len(prompts)} runs x {max_new_tokens} tokens"
                + (", with the T->0 sampling control" if temperature > 0 else "")
                + (f", then per-user tokens/s at concurrency {','.join(map(str, concurrency))}" if tput else "")
            )
            run = session.engine(target, path, prompts, passes + tput, **kw)
            say(engine_line(run))
            version = run.vllm_version or version
            control = (
                sampling_control(run.passes[CONTROL_GREEDY], run.passes[CONTROL_EPS], pset, dtype)
                if temperature > 0
                else None
            )
            rates = engine_rates(run, concurrency, label, str(path)) if tput else None
            out[i] = DraftMeasurement(path, run.passes[MAIN], ready_seconds(run), control, rates)
            tick(Tick("vllm", sum(d is not None for d in out), runs, label))
        base = None
        if tput and baseline:
            say(
                f"vLLM: the target alone ({NO_SPEC}): per-user tokens/s at concurrency "
                f"{','.join(map(str, concurrency))}"
            )
            run = session.engine(target, None, prompts, tput, **kw)
            version = run.vllm_version or version
            base = engine_rates(run, concurrency, NO_SPEC, None)
            tick(Tick("vllm", runs, runs, NO_SPEC))
        starts, swaps = session.engine_starts - starts0, session.swaps - swaps0
    settings: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "max_model_len": mml,
        "max_num_seqs": seqs,
        "k": k,
        "temperature": 0.0,
        "enforce_eager": True,
        "tensor_parallel_size": tensor_parallel_size,
    }
    if speculative is not None:
        settings["speculative_config"] = speculative
    done = [d for d in out if d is not None]
    return Measurement(done, base, f"vllm {version}" if version else "vllm", settings, starts, swaps)


def throughput_report(m: Measurement, concurrency: Sequence[int]) -> ThroughputReport:
    """`smoke --engine vllm --concurrency`: the throughput table, the target alone as baseline."""
    assert m.baseline is not None
    return ThroughputReport(
        parse_concurrency(concurrency),
        m.baseline,
        [d.rates for d in m.drafts if d.rates is not None],
        engine_device(),
        m.version,
        m.engine_settings,
    )
