"""The TTT stages of a fine-tune: each stage's trainer arguments, trained in this process or over
`nproc` ranks, every scored step offered to the best-step selection on the held-out sequences."""

from __future__ import annotations

from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.finetune.options import Stage
from eagle_convert.finetune.plan import (
    FROZEN,
    LOSS_DECAY,
    STAGE_PARAMS,
    FinetuneEvent,
    FinetunePlan,
    FinetuneRefusedError,
    Progress,
    StageResult,
    held_out_al,
)


def start_selection(
    plan: FinetunePlan, tgt: Any, drafter: Any, held: list[list[int]], say: Progress
) -> tuple[Any, Any, float | None]:
    """(KeepBest holding the input's weights, the held-out evaluator, the input's EAL); all None
    without held-out data."""
    from eagle_convert.reference import KeepBest, expected_acceptance_length, heldout_accuracy

    if not held:
        return None, None, None
    score = heldout_accuracy(
        tgt,
        drafter,
        held,
        aux_ids=plan.aux_ids,
        ttt_steps=plan.ttt_steps,
        loss_decay=LOSS_DECAY,
        batch_size=plan.batch_size,
        max_len=plan.max_len,
    )
    keep = KeepBest()
    eal = expected_acceptance_length(score(drafter))
    keep.offer(eal, ("start", 0), drafter)
    say(FinetuneEvent("evaluate", f"held-out AL of the input {held_out_al(eal):.3f} ({len(held)} sequences)", eal=eal))
    return keep, score, eal


def train_parallel(
    plan: FinetunePlan, tgt: Any, drafter: Any, train: list[list[int]], say: Progress, score: Any, keep: Any
) -> list[StageResult]:
    """The stages over `plan.nproc` processes (`finetune/distributed.py`), this one rank 0, every
    rank training from the capture cache (`--cache`; without one, the training sequences captured
    here first by the loaded target)."""
    from contextlib import nullcontext

    from eagle_convert.cache import CachedTarget
    from eagle_convert.finetune.distributed import job_for, launch, send, temporary_capture

    if len(train) < plan.nproc:
        raise UsageError(
            f"{{nproc={plan.nproc}}}: only {len(train)} training sequences; pass a smaller {{nproc}}",
            options=("nproc",),
        )
    kwargs = [_stage_kwargs(plan, s, i, drafter) for i, s in enumerate(plan.stages)]
    ctx = (
        nullcontext(plan.cache)
        if plan.cache is not None
        else temporary_capture(plan.target, plan.draft, train, plan.out, tgt, plan.release, say)
    )
    with ctx as folder:
        source = tgt if plan.cache is not None else CachedTarget(folder, device=tgt.device)
        with launch(plan.nproc, tgt.device) as ranks:
            send(ranks, job_for(folder, drafter, train, kwargs))
            return [
                train_stage(plan, s, i, source, drafter, train, say, score, keep, parallel=ranks)
                for i, s in enumerate(plan.stages)
            ]


def _stage_kwargs(plan: FinetunePlan, stage: Stage, index: int, drafter: Any) -> dict[str, Any]:
    """`train_draft`'s arguments for a stage, but the target, drafter, data and callbacks: what
    every rank of a data-parallel run passes alike."""
    from eagle_convert.reference import trainable_names

    pats = STAGE_PARAMS[stage.name]
    try:
        names = [n for n in trainable_names(drafter, pats or "all") if n not in FROZEN]
    except ValueError:
        names = []
    if not names:
        raise FinetuneRefusedError(f"stage {stage.name}: the draft has no parameter matching {pats}")
    return {
        "aux_ids": plan.aux_ids,
        "ttt_steps": plan.ttt_steps,
        "steps": stage.steps,
        "lr": stage.lr,
        "seed": plan.seed + index,
        "trainable": names,
        "l2sp": stage.l2sp,
        "log_every": max(1, stage.steps // 50),
        "batch_size": plan.batch_size,
        "loss_decay": LOSS_DECAY,
        "eval_every": plan.eval_every,
        "max_len": plan.max_len,
    }


def train_stage(
    plan: FinetunePlan,
    stage: Stage,
    index: int,
    tgt: Any,
    drafter: Any,
    seqs: list[list[int]],
    say: Progress,
    score: Any = None,
    keep: Any = None,
    parallel: Any = None,
) -> StageResult:
    from eagle_convert.reference import StepInfo, train_draft

    kwargs = _stage_kwargs(plan, stage, index, drafter)
    names = kwargs["trainable"]
    say(
        FinetuneEvent(
            "stage",
            f"stage {stage.name}: {stage.steps} steps, lr {stage.lr:g}, {len(names)} tensors",
            stage=stage.name,
            total=stage.steps,
        )
    )

    def on_step(info: StepInfo) -> None:
        eal = "" if info.eal is None else f" AL {held_out_al(info.eal):.3f}" + (" (best)" if info.best else "")
        say(
            FinetuneEvent(
                "step",
                f"{stage.name}: step {info.step}/{info.steps} loss {info.loss:.3f}{eal}",
                stage=stage.name,
                step=info.step,
                total=info.steps,
                loss=info.loss,
                eal=info.eal,
                best=info.best,
            )
        )

    res = train_draft(
        tgt,
        drafter,
        seqs,
        on_step=on_step,
        evaluate=score,
        keep=keep,
        label=stage.name,
        parallel=parallel,
        # from a cache, or on a rank: each batch read from the cache's shards, not all kept
        cache_target=plan.cache is None and parallel is None,
        **kwargs,
    )
    return StageResult(
        stage.name,
        stage.steps,
        stage.lr,
        stage.l2sp,
        names,
        res.losses,
        res.seconds,
        eal=res.eal_history,
        best_step=res.best_step,
    )
