"""Execute a `FinetunePlan`: the torch side of `finetune` (data, TTT stages, evaluation, write).

`finetune.plan` plans and refuses without torch; this module imports it (never the reverse) and
imports torch only inside its functions, so importing it stays cheap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert._version import __version__
from eagle_convert.cache import CaptureOptions
from eagle_convert.draft import CARD_FILE, PROVENANCE_KEY, model_card
from eagle_convert.errors import EagleConvertError, UsageError
from eagle_convert.finetune.options import FinetuneOptions, Stage
from eagle_convert.finetune.plan import (
    FROZEN,
    HOLD_OUT_EVERY,
    LOSS_DECAY,
    STAGE_PARAMS,
    FinetuneEvent,
    FinetunePlan,
    FinetuneRefusedError,
    FinetuneResult,
    Progress,
    StageResult,
    held_out_al,
    plan_finetune,
)
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
        before = _evaluate(plan, tgt, drafter, seqs, say)
        train, held = _split_held_out(seqs)
        keep, score, eal0 = _selection(plan, tgt, drafter, held, say)
        if plan.nproc > 1:
            stages = _train_parallel(plan, tgt, drafter, train, say, score, keep)
        else:
            stages = [
                _train_stage(plan, s, i, tgt, drafter, train, say, score, keep) for i, s in enumerate(plan.stages)
            ]
        best = None
        if keep is not None:
            keep.restore(drafter)  # the best scored step's weights, not the last step's
            best = {"stage": keep.where[0], "step": keep.where[1], "eal": round(keep.eal, 4)}
            say(
                FinetuneEvent(
                    "evaluate", f"keeping {best['stage']} step {best['step']} (held-out AL {held_out_al(keep.eal):.3f})"
                )
            )
        after = _evaluate(plan, tgt, drafter, seqs, say, features=before.features)
    result = FinetuneResult(
        plan.out,
        stages,
        before.step_acc,
        after.step_acc,
        before.loss,
        after.loss,
        len(seqs),
        sum(map(len, seqs)),
        gen_s,
        0.0,
        held_out=len(held),
        eal_before=eal0,
        best=best,
    )
    say(FinetuneEvent("write", f"writing {plan.out}"))
    _write(plan, drafter, provenance(plan, result))
    result.seconds = time.perf_counter() - t0
    say(FinetuneEvent("done", f"fine-tuned in {result.seconds:.0f}s"))
    return result


def provenance(plan: FinetunePlan, result: FinetuneResult) -> dict[str, Any]:
    """The `_eagle_convert` entry: what was trained, how, on what; the input's entry nests as `previous`."""
    prov: dict[str, Any] = {
        "tool": "eagle-convert",
        "version": __version__,
        "operation": "finetune (TTT)",
        "source": str(plan.draft),
        "source_variant": plan.variant,
        "target": str(plan.target),
        "stages": [
            {"name": s.name, "trainable": s.trainable, "steps": s.steps, "lr": s.lr, "l2sp": s.l2sp}
            for s in result.stages
        ],
        "frozen": list(FROZEN),
        "ttt_steps": plan.ttt_steps,
        "loss_decay": LOSS_DECAY,
        "batch_size": plan.batch_size,
        "seed": plan.seed,
        "data": {
            "prompts": plan.prompts_label,
            "count": len(plan.prompts),
            "sequences": result.sequences,
            "tokens": result.tokens,
            "chat_template": plan.template_label,
            "continuation": f"target greedy, {plan.continuation_tokens} tokens",
        },
        "step_acc_before": [round(a, 4) for a in result.step_acc_before],
        "step_acc_after": [round(a, 4) for a in result.step_acc_after],
        "max_len": plan.max_len,
        "selection": {
            "metric": "held-out expected acceptance length, sum_k prod_{i<=k} acc_i (speculators PR 741)",
            "held_out_sequences": result.held_out,
            "eal_before": None if result.eal_before is None else round(result.eal_before, 4),
            "kept": result.best,
        },
    }
    if PROVENANCE_KEY in plan.config:
        prov["previous"] = plan.config[PROVENANCE_KEY]
    return prov


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


@dataclass
class _Eval:
    loss: float
    step_acc: list[float]
    features: list[tuple[Any, ...]]


def _evaluate(
    plan: FinetunePlan,
    tgt: Any,
    drafter: Any,
    seqs: list[list[int]],
    say: Progress,
    features: list[tuple[Any, ...]] | None = None,
) -> _Eval:
    """Teacher-forced TTT loss and per-step accuracy over all data (token-weighted over batches);
    the target features are computed once and reused for the after-training evaluation."""
    import torch

    from eagle_convert.reference import ttt_loss

    say(FinetuneEvent("evaluate", "evaluating " + ("before" if features is None else "after") + " training"))
    rows = drafter.draft_to_target
    in_draft = torch.zeros(tgt.vocab_size, dtype=torch.bool, device=tgt.device)
    in_draft[rows] = True
    feats: list[tuple[Any, ...]] = features if features is not None else []
    loss, accs, weight = 0.0, [0.0] * plan.ttt_steps, 0
    drafter.eval()
    with torch.no_grad():
        for b, start in enumerate(range(0, len(seqs), plan.batch_size)):
            batch = seqs[start : start + plan.batch_size]
            lens = torch.tensor([len(s) for s in batch])
            ids = torch.zeros(len(batch), int(lens.max()), dtype=torch.long)
            for i, s in enumerate(batch):
                ids[i, : len(s)] = torch.tensor(s)
            ids, lens = ids.to(tgt.device), lens.to(tgt.device)
            if features is None and plan.cache is not None:  # the cache answers what the target would
                feats.append(tgt.features(ids, lens, plan.aux_ids, rows, in_draft))
            elif features is None:
                out = tgt.forward(ids, aux_ids=plan.aux_ids)
                feats.append((out.aux.float(), out.logits[..., rows], in_draft[out.logits.argmax(-1)]))
            aux, tlogits, in_vocab = feats[b]
            lb, ab = ttt_loss(
                drafter, ids, lens, aux, tlogits, ttt_steps=plan.ttt_steps, loss_decay=LOSS_DECAY, in_vocab=in_vocab
            )
            n = int(lens.sum())
            loss += float(lb) * n
            accs = [a + x * n for a, x in zip(accs, ab)]
            weight += n
    return _Eval(loss / weight, [a / weight for a in accs], feats)


def _split_held_out(seqs: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """(train, held out): every `HOLD_OUT_EVERY`-th sequence scores the steps (the last one when
    there are fewer); a single sequence is not split (no selection then)."""
    if len(seqs) < 2:
        return seqs, []
    held_idx = {i for i in range(len(seqs)) if i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1} or {len(seqs) - 1}
    return ([s for i, s in enumerate(seqs) if i not in held_idx], [s for i, s in enumerate(seqs) if i in held_idx])


def _selection(
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


def _train_parallel(
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
                _train_stage(plan, s, i, source, drafter, train, say, score, keep, parallel=ranks)
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


def _train_stage(
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


def _write(plan: FinetunePlan, drafter: Any, prov: dict[str, Any]) -> None:
    """vLLM layout via `write_draft`, inside an atomic output dir; the written draft must reload."""
    import torch

    from eagle_convert.errors import OutputError
    from eagle_convert.io import OutputExistsError, atomic_output_dir, torch_dtype
    from eagle_convert.reference import load_drafter, write_draft
    from eagle_convert.validate import serving_summary

    dtype = torch_dtype(plan.dtype)  # F32, BF16 or F16 (plan.py)
    config = {**plan.config, PROVENANCE_KEY: prov}
    try:
        with atomic_output_dir(plan.out, force=plan.force) as tmp:
            write_draft(drafter, config, tmp, include_embed=plan.include_embed, dtype=dtype)
            card = model_card(
                config,
                model_ref=str(plan.out),
                target=str(plan.target),
                dtype=plan.dtype,
                serving=serving_summary(tmp),  # the matrix of the draft just written
            )
            (tmp / CARD_FILE).write_text(card, encoding="utf-8")
            back = load_drafter(
                tmp,
                plan.release,
                target_embed=drafter.embed_tokens.weight,
                target_lm_head=drafter.lm_head.weight,
                device=drafter.embed_tokens.weight.device,
            ).state_dict()
            for name, t in drafter.state_dict().items():
                want = t.to(dtype).to(back[name].dtype) if t.is_floating_point() else t
                if not torch.equal(back[name], want):
                    raise EagleConvertError(f"{plan.out}: written tensor {name} does not read back")
    except OutputExistsError as exc:
        raise OutputError(
            f"{plan.out}: output already exists", hint="pass {force} to replace it", options=("force",), file=plan.out
        ) from exc
    except EagleConvertError:
        raise
    except OSError as exc:
        raise OutputError(
            f"{exc.filename or plan.out}: cannot write the output ({exc.strerror or exc})",
            hint="check free space and permissions",
        ) from exc
