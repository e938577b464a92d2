"""Every draft on the same tokenized prompts with one engine, to one `DraftResult` each: what
`smoke` and `report` measure with.

The reference engine (`measure/engines.py`: the target loaded once) or vLLM
(`measure/vllm_measure.py`: all drafts in one worker, drafts of one structure swapped into one
engine, the target alone for per-user tokens/s); the vLLM passes become counters through vLLM's
per-request histograms and carry their sampling control.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.measure.engines import draft_from_pass, run_reference
from eagle_convert.measure.ksweep import StepCosts
from eagle_convert.measure.ksweep import k_sweep as sweep_of
from eagle_convert.measure.options import Measure
from eagle_convert.measure.prompts import PromptSet
from eagle_convert.measure.results import DraftResult, draft_labels, draft_results
from eagle_convert.progress import OnTick

if TYPE_CHECKING:
    from eagle_convert.measure.vllm_measure import Measurement
    from eagle_convert.vllm_model import Release


@dataclass
class Measured:
    """Each draft's result (in the order given) and how the engine ran."""

    drafts: list[DraftResult]
    version: str  # the engine's version line
    vllm: Measurement | None = None  # vLLM only: engine starts, swaps, settings, the target alone's rates


def measure_drafts(
    target: Path,
    drafts: Sequence[Path],
    pset: PromptSet,
    m: Measure,
    release: Release,
    *,
    say: Callable[[str], None],
    labels: Sequence[str] | None = None,
    on_tick: OnTick | None = None,
    device: str | None = None,
    baseline: bool = True,
    k_sweep: bool = False,
) -> Measured:
    """Measure every draft on `pset` with `m.engine`.

    Args:
        target: the local target folder.
        drafts: local draft folders.
        pset: the prepared (tokenized) prompts.
        m: the resolved settings (`MeasureOptions.resolve`): `temperature` above 0 also runs vLLM's
            sampling control; `concurrency` (vLLM only) the levels of per-user tokens/s with each
            draft; `serve` the speculative config every vLLM engine runs with.
        release: the vLLM release the command's entry resolved: how the reference engine reads each
            draft, and each result's variant.
        say: receives one line per draft (and engine) started.
        labels: the drafts' labels (None: their folder names, `name#i` where two share one).
        on_tick: a count per prompt (reference) or engine run (vLLM).
        device: the reference engine's device (None: "cuda" when torch sees a GPU).
        baseline: vLLM with `concurrency`: also the target alone.
        k_sweep: each draft's `k_sweep` (every k <= `k` from this run, `measure/ksweep.py`); on the
            reference engine with timed step costs, on vLLM without (`with_vllm_costs` adds them
            from the concurrency-1 rates).

    Returns:
        The drafts' results, the engine's version line and (vLLM) the measurement behind them.

    Raises:
        EngineError: an engine cannot load or run a draft.
    """
    k, max_new_tokens, temperature, seed = m.k, m.max_new_tokens, m.temperature, m.seed
    names = list(labels) if labels is not None else draft_labels(list(drafts))
    if m.engine == "reference":
        costs: list[StepCosts] | None = [] if k_sweep else None
        raw, version = run_reference(
            target,
            list(drafts),
            pset,
            release,
            k=k,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            say=say,
            device=device,
            on_tick=on_tick,
            step_costs=costs,
        )
        ref = draft_results(list(drafts), raw, pset, release, labels=names)
        for d, c in zip(ref, costs or []):
            d.k_sweep = sweep_of(d.total, c)
        return Measured(ref, version)
    from eagle_convert.measure.vllm_measure import measure_vllm

    vm = measure_vllm(
        target,
        drafts,
        pset,
        k=k,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        tensor_parallel_size=m.tensor_parallel_size,
        concurrency=m.concurrency,
        labels=names,
        baseline=baseline,
        say=say,
        serve=m.serve,
        on_tick=on_tick,
    )
    results = []
    for dm, label in zip(vm.drafts, names):
        d = draft_from_pass(dm.path, dm.main, pset, k, label, release, dm.start_seconds)
        d.sampling_control = dm.control
        d.k_sweep = sweep_of(d.total) if k_sweep else None
        results.append(d)
    return Measured(results, vm.version, vm)


def with_vllm_costs(drafts: Sequence[DraftResult], throughput: Any, k: int) -> None:
    """Each vLLM draft's k sweep again, with the step costs of its concurrency-1 rates and the
    target alone's (`ThroughputReport`); drafts without a sweep are left as they are."""
    from eagle_convert.measure.ksweep import costs_from_throughput

    for d in drafts:
        if d.k_sweep is not None:
            d.k_sweep = sweep_of(d.total, costs_from_throughput(throughput, d.label, k))
