"""Execute a `FinetunePlan`: the torch side of `finetune` (data, evaluation, then the TTT stages
(`stages.py`) and the write (`write.py`)).

`finetune.plan` plans and refuses without torch; this module imports it (never the reverse) and
imports torch only inside its functions, so importing it stays cheap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eagle_convert.cache import CaptureOptions
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.finetune.plan import (
    HOLD_OUT_EVERY,
    LOSS_DECAY,
    FinetuneEvent,
    FinetunePlan,
    FinetuneRefusedError,
    FinetuneResult,
    Progress,
    held_out_al,
    plan_finetune,
)
from eagle_convert.finetune.stages import start_selection, train_parallel, train_stage
from eagle_convert.finetune.write import provenance, write_finetuned
from eagle_convert.measure import Prompt

LOG = logging.getLogger(__name__)


def finetune_draft(
    draft: str | Path,
    target: str | Path,
    out: str | Path,
    opts: FinetuneOptions | None = None,
    *,
    prompts: Sequence[Prompt] | None = None,
    force: bool = False,
    progress: Progress | None = None,
    device: str | None = None,
) -> FinetuneResult:
    """Plan, then run: fine-tune `draft` against `target` into the new folder `out`.

    Args:
        draft: the draft to fine-tune.
        target: the target model folder.
        out: the new output folder.
        opts: the fine-tune's settings (default `FinetuneOptions()`), as for `plan_finetune`.
        prompts: as for `plan_finetune`.
        force: replace an existing `out`.
        progress: receives each phase and step.
        device: as for `run_finetune`.

    Returns:
        The result of `run_finetune`.

    Raises:
        FinetuneRefusedError: as for `plan_finetune` and `run_finetune`.
        UsageError: as for `plan_finetune`.
        OutputError: as for `run_finetune`.
    """
    plan = plan_finetune(draft, target, out, opts, prompts=prompts, force=force)
    return run_finetune(plan, progress=progress, device=device)


def run_finetune(plan: FinetunePlan, *, progress: Progress | None = None, device: str | None = None) -> FinetuneResult:
    """Generate the data, evaluate, train every stage, evaluate again, write atomically.

    On the CPU the result is what it was before GPUs were supported, byte for byte (batches are
    built on the CPU and the batch order comes from a CPU generator either way).

    Args:
        plan: the plan `plan_finetune` made.
        progress: receives each phase and step.
        device: holds the target and the drafter; generation, evaluation and training run there
            ("cpu", "cuda", "cuda:1"; None: the first GPU torch sees, else the CPU).

    Returns:
        The written folder, accuracy and loss before and after, the held-out EAL of the input and of
        the weights written, timings.

    Raises:
        FinetuneRefusedError: the reference engine cannot load the draft, or a stage matches no parameter.
        OutputError: `out` exists without `force`, or cannot be written.
    """
    import torch

    say = progress or (lambda _e: None)
    t0 = time.perf_counter()
    if plan.capture is not None and plan.cache is not None:  # plan_finetune sets both
        _capture(plan, plan.cache, plan.capture, say)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(plan.seed)
        tgt, drafter, tokenizer = _load_pair(plan, device)
        seqs, gen_s = _generate(plan, tgt, tokenizer, say)
        evaluate = _evaluator(plan, tgt, drafter, seqs, say)
        before = evaluate(drafter)
        train, held = _split_held_out(seqs)
        keep, score, eal0 = start_selection(plan, tgt, drafter, held, say)
        if plan.nproc > 1:
            stages = train_parallel(plan, tgt, drafter, train, say, score, keep)
        else:
            stages = [train_stage(plan, s, i, tgt, drafter, train, say, score, keep) for i, s in enumerate(plan.stages)]
        best = None
        if keep is not None:
            keep.restore(drafter)  # the best scored step's weights, not the last step's
            best = {"stage": keep.where[0], "step": keep.where[1], "eal": round(keep.eal, 4)}
            say(
                FinetuneEvent(
                    "evaluate", f"keeping {best['stage']} step {best['step']} (held-out AL {held_out_al(keep.eal):.3f})"
                )
            )
        say(FinetuneEvent("evaluate", "evaluating after training"))
        drafter.eval()
        after = evaluate(drafter)
    result = FinetuneResult(
        plan.out,
        stages,
        before[1],
        after[1],
        before[0],
        after[0],
        len(seqs),
        sum(map(len, seqs)),
        gen_s,
        0.0,
        held_out=len(held),
        eal_before=eal0,
        best=best,
    )
    say(FinetuneEvent("write", f"writing {plan.out}"))
    write_finetuned(plan, drafter, provenance(plan, result))
    result.seconds = time.perf_counter() - t0
    say(FinetuneEvent("done", f"fine-tuned in {result.seconds:.0f}s"))
    return result


# ------------------------------------------------------------------------------- helpers


def _capture(plan: FinetunePlan, cache: Path, capture: CaptureOptions, say: Progress) -> None:
    """`--capture`: the training data made and cached into `cache` (resuming it; `--force` starts a
    cache of other data over), then checked like a given `--cache`."""
    from eagle_convert.cache import check_cache
    from eagle_convert.finetune.capture import capture_training_data

    label = plan.template_label
    template = None if label == "target" else plan.chat_template if label == "inline" else label
    data = FinetuneOptions(
        chat_template=template, continuation_tokens=plan.continuation_tokens, ttt_steps=plan.ttt_steps
    )
    say(FinetuneEvent("capture", f"capturing the training data with {capture.engine} into {cache}"))
    res = capture_training_data(
        plan.draft,
        plan.target,
        cache,
        data,
        capture,
        prompts=plan.prompts,
        force=plan.force,
        say=lambda m: say(FinetuneEvent("capture", m)),
        on_tick=lambda t: say(FinetuneEvent("capture", t.task, progress=t)),
        release=plan.release,
    )
    say(
        FinetuneEvent(
            "capture",
            f"captured {res.tokens} tokens in {res.seconds:.1f}s ({res.tokens_per_s:.0f} tokens/s), "
            f"{len(res.manifest.shards) - len(res.captured)} shards kept from an earlier run",
        )
    )
    check_cache(cache, draft=plan.draft, target=plan.target, aux_ids=plan.aux_ids, release=plan.release)


def _load_pair(plan: FinetunePlan, device: str | None) -> tuple[Any, Any, Any]:
    """(the target, or the cache standing in for it; the drafter; the tokenizer, None from a cache)."""
    from eagle_convert.reference import TargetModel, load_drafter, quiet_loading

    if plan.cache is not None:  # the target is not loaded: its embedding and head come from its files
        import torch

        from eagle_convert.cache import CachedTarget, target_head_weights

        source: Any = CachedTarget(plan.cache, device=device or ("cuda" if torch.cuda.is_available() else "cpu"))
        embed, head = target_head_weights(plan.target)
        tokenizer = None
    else:
        from transformers import AutoTokenizer

        with quiet_loading():
            source = TargetModel.from_pretrained(plan.target, device=device)  # None: GPU if torch sees one
        embed, head = source.embed_weight, source.lm_head_weight
        tokenizer = AutoTokenizer.from_pretrained(str(plan.target))
    try:
        drafter = load_drafter(plan.draft, plan.release, target_embed=embed, target_lm_head=head, device=source.device)
    except (ValueError, KeyError, RuntimeError) as exc:
        raise FinetuneRefusedError(f"{plan.draft}: the reference engine cannot load the draft ({exc})") from None
    return source, drafter, tokenizer


def _generate(plan: FinetunePlan, tgt: Any, tokenizer: Any, say: Progress) -> tuple[list[list[int]], float]:
    """The target's greedy continuation of every rendered prompt (the serving template); with a
    cache (`plan.cache`), the sequences it holds (captured from the same data), nothing generated."""
    from eagle_convert.finetune.data import greedy_continuations, pad_token, render_training_prompts

    t0 = time.perf_counter()
    if plan.cache is not None:
        return tgt.sequences(), 0.0
    rendered = render_training_prompts(
        plan.prompts,
        tokenizer,
        chat_template=plan.chat_template,
        template_label=plan.template_label,
        prompts_label=plan.prompts_label,
        context=getattr(tgt.model.config, "max_position_embeddings", None),
        continuation_tokens=plan.continuation_tokens,
        ttt_steps=plan.ttt_steps,
    )
    n = len(rendered.token_ids)

    def each(done: int) -> None:
        say(FinetuneEvent("generate", f"target continuation {done}/{n}", step=done, total=n))

    seqs = greedy_continuations(tgt, rendered.token_ids, plan.continuation_tokens, pad_token(tokenizer), each)
    return seqs, time.perf_counter() - t0


def _evaluator(plan: FinetunePlan, tgt: Any, drafter: Any, seqs: list[list[int]], say: Progress) -> Any:
    """Teacher-forced TTT loss and per-step accuracy over all data (token-weighted over batches),
    before training; the returned evaluator keeps the target features for the evaluation after."""
    from eagle_convert.reference import teacher_forced

    say(FinetuneEvent("evaluate", "evaluating before training"))
    score = teacher_forced(
        tgt,
        drafter,
        seqs,
        aux_ids=plan.aux_ids,
        ttt_steps=plan.ttt_steps,
        loss_decay=LOSS_DECAY,
        batch_size=plan.batch_size,
    )
    drafter.eval()
    return score


def _split_held_out(seqs: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """(train, held out): every `HOLD_OUT_EVERY`-th sequence scores the steps (the last one when
    there are fewer); a single sequence is not split (no selection then)."""
    if len(seqs) < 2:
        return seqs, []
    held_idx = {i for i in range(len(seqs)) if i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1} or {len(seqs) - 1}
    return ([s for i, s in enumerate(seqs) if i not in held_idx], [s for i, s in enumerate(seqs) if i in held_idx])
