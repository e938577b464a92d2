"""The two smoke engines behind one shape (`EngineOut`: per draft the request results, totals and
load seconds): the torch reference engine (`reference/`) and vLLM (`measure/vllm_measure.py`), whose
passes become counters through vLLM's per-request histograms (`counts_from_pass`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.errors import EngineError
from eagle_convert.measure.ksweep import StepCosts
from eagle_convert.measure.prompts import PromptSet
from eagle_convert.measure.results import (
    Counts,
    DraftResult,
    EngineOut,
    RequestResult,
    counts_from_histogram,
    draft_results,
)
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release


def run_reference(
    target: Path,
    drafts: list[Path],
    prompts: PromptSet,
    release: Release,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    say: Callable[[str], None],
    device: str | None = None,
    on_tick: OnTick | None = None,
    step_costs: list[StepCosts] | None = None,
) -> tuple[EngineOut, str]:
    """Every draft on every prompt with the torch reference engine (the target loaded once), with
    counters per request (each drafter built as vLLM `release` reads it); returns them and the
    engine's version line. `on_tick` counts the prompts of each draft (with its AL so far). A
    `step_costs` list receives each draft's timed draft / target / verification steps
    (`measure/stepcost.py`) after its prompts, for the k sweep."""
    import torch

    from eagle_convert.measure.stepcost import time_reference_steps
    from eagle_convert.reference import TargetModel, load_drafter, quiet_loading, speculative_generate
    from eagle_convert.vllm_model import default_aux_ids

    with quiet_loading():
        tgt = TargetModel.from_pretrained(target, device=device)  # device None: GPU if torch sees one
    results: EngineOut = []
    tick = tick_or_nothing(on_tick)
    for path in drafts:
        say(f"smoke: {path.name}: {len(prompts.prompts)} runs x {max_new_tokens} tokens (reference engine)")
        t0 = time.perf_counter()
        try:
            drafter = load_drafter(
                path, release, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight, device=tgt.device
            )
        except (ValueError, KeyError, RuntimeError) as exc:
            raise EngineError(f"reference engine cannot load draft {path}: {exc}") from None
        cfg = getattr(drafter, "cfg", None)
        aux = tuple(getattr(cfg, "aux_layer_ids", None) or default_aux_ids(tgt.num_layers))
        load_s = time.perf_counter() - t0
        # Warm-up (lazy torch init, first-call allocations) so the first prompt's tokens/s is not skewed.
        first = prompts.prompts[0].token_ids
        speculative_generate(
            tgt, drafter, first[:32], k=k, max_new_tokens=2, temperature=temperature, seed=seed, aux_ids=aux
        )
        reqs, total = [], Counts(accepted_per_pos=[0] * k)
        n = len(prompts.prompts)
        tick(Tick("measure", 0, n, detail=path.name))
        for p in prompts.prompts:
            try:
                r = speculative_generate(
                    tgt,
                    drafter,
                    p.token_ids,
                    k=k,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    seed=seed,
                    aux_ids=aux,
                )
            except (ValueError, RuntimeError, IndexError) as exc:  # shape mismatches with the target
                raise EngineError(f"reference engine failed on draft {path}, prompt {p.id!r}: {exc}") from None
            c = Counts(
                requests=1,
                prompt_tokens=p.num_tokens,
                generated_tokens=len(r.tokens),
                num_drafts=r.num_drafts,
                num_draft_tokens=r.num_draft_tokens,
                num_accepted=r.num_accepted,
                accepted_per_pos=list(r.accepted_per_pos),
                target_forwards=r.target_forwards,
                seconds=r.seconds,
            )
            total.add(c)
            reqs.append(RequestResult(p.id, p.category, p.bucket, c))
            tick(Tick("measure", len(reqs), n, f"AL {total.acceptance_length:.2f}", detail=path.name))
        results.append((reqs, total, load_s))
        if step_costs is not None:
            step_costs.append(time_reference_steps(tgt, drafter, first, k=k, aux_ids=aux))
    return results, f"torch {torch.__version__} on {tgt.device.type}"


def counts_from_pass(pr: Any, pset: PromptSet, k: int) -> tuple[list[RequestResult], Counts]:
    """Engine totals and per-request counters (vLLM's per-request histograms) of one vLLM pass
    (`vllm.engine_run.PassResult`)."""
    prompts = [pset.prompts[i] for i in pr.prompts]
    total = Counts(
        requests=len(pr.outputs),
        prompt_tokens=sum(p.num_tokens for p in prompts),
        generated_tokens=sum(len(o) for o in pr.outputs),
        num_drafts=pr.num_drafts,
        num_draft_tokens=pr.num_draft_tokens,
        num_accepted=pr.num_accepted,
        accepted_per_pos=list(pr.accepted_per_pos) or [0] * k,
        target_forwards=pr.num_drafts + len(pr.outputs),
        seconds=pr.seconds,
    )
    reqs = []
    for i, p in enumerate(prompts):
        m = pr.per_request[i] if pr.per_request and i < len(pr.per_request) else None
        c = None
        if m:
            c = counts_from_histogram(
                m.get("acceptance_histogram", m.get("histogram")), m.get("num_draft_tokens", 0), k=k
            )
            c.prompt_tokens, c.generated_tokens = p.num_tokens, len(pr.outputs[i])
        reqs.append(RequestResult(p.id, p.category, p.bucket, c))
    return reqs, total


def draft_from_pass(
    path: Path, pr: Any, pset: PromptSet, k: int, label: str, release: Release, start_seconds: float | None = None
) -> DraftResult:
    """One draft's result from its vLLM measuring pass (`vllm.engine_run.PassResult`); `release`: the
    vLLM release its variant is described for; `start_seconds`: until its engine could draft (None
    where not measured)."""
    [d] = draft_results([path], [(*counts_from_pass(pr, pset, k), start_seconds)], pset, release, labels=[label])
    return d
