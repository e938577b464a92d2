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

from eagle_convert import __version__
from eagle_convert.errors import EagleConvertError, UsageError
from eagle_convert.finetune.plan import (
    FROZEN, LOSS_DECAY, STAGE_PARAMS, FinetuneEvent, FinetunePlan, FinetuneRefusedError, FinetuneResult,
    Progress, Stage, StageResult, plan_finetune,
)
from eagle_convert.smoke.prompts import Prompt
from eagle_convert.upgrade.plan import PROVENANCE_KEY

__all__ = ["finetune_draft", "provenance", "run_finetune"]

LOG = logging.getLogger(__name__)


def finetune_draft(draft: str | Path, target: str | Path, out: str | Path, *,
                   prompts: Sequence[Prompt] | str | Path | None = None, chat_template: str | None = None,
                   continuation_tokens: int = 64, stages: Sequence[str | Stage] | None = None,
                   ttt_steps: int = 3, seed: int = 0, force: bool = False,
                   progress: Progress | None = None, device: str | None = None) -> FinetuneResult:
    """Plan, then run: fine-tune `draft` against `target` into the new folder `out`."""
    plan = plan_finetune(draft, target, out, prompts=prompts, chat_template=chat_template,
                         continuation_tokens=continuation_tokens, stages=stages, ttt_steps=ttt_steps,
                         seed=seed, force=force)
    return run_finetune(plan, progress=progress, device=device)


def run_finetune(plan: FinetunePlan, *, progress: Progress | None = None, device: str | None = None) -> FinetuneResult:
    """Generate the data, evaluate, train every stage, evaluate again, write atomically.

    `device` ("cpu", "cuda", "cuda:1"; None: the first GPU torch sees, else the CPU) holds the
    target and the drafter; generation, evaluation and training run there. On the CPU the result
    is what it was before GPUs were supported, byte for byte (batches are built on the CPU and
    the batch order comes from a CPU generator either way)."""
    import torch

    say = progress or (lambda _e: None)
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(plan.seed)
        tgt, drafter, tokenizer = _load_pair(plan, device)
        seqs, gen_s = _generate(plan, tgt, tokenizer, say)
        before = _evaluate(plan, tgt, drafter, seqs, say)
        stages = [_train_stage(plan, s, i, tgt, drafter, seqs, say) for i, s in enumerate(plan.stages)]
        after = _evaluate(plan, tgt, drafter, seqs, say, features=before.features)
    result = FinetuneResult(plan.out, stages, before.step_acc, after.step_acc, before.loss, after.loss,
                            len(seqs), sum(map(len, seqs)), gen_s, 0.0)
    say(FinetuneEvent("write", f"writing {plan.out}"))
    _write(plan, drafter, provenance(plan, result))
    result.seconds = time.perf_counter() - t0
    say(FinetuneEvent("done", f"fine-tuned in {result.seconds:.0f}s"))
    return result


def provenance(plan: FinetunePlan, result: FinetuneResult) -> dict[str, Any]:
    """The `_eagle_convert` entry: what was trained, how, on what; the input's entry nests as `previous`."""
    prov: dict[str, Any] = {
        "tool": "eagle-convert", "version": __version__, "operation": "finetune (TTT)",
        "source": str(plan.draft), "source_variant": plan.variant, "target": str(plan.target),
        "stages": [{"name": s.name, "trainable": s.trainable, "steps": s.steps, "lr": s.lr, "l2sp": s.l2sp}
                   for s in result.stages],
        "frozen": list(FROZEN), "ttt_steps": plan.ttt_steps, "loss_decay": LOSS_DECAY,
        "batch_size": plan.batch_size, "seed": plan.seed,
        "data": {"prompts": plan.prompts_label, "count": len(plan.prompts), "sequences": result.sequences,
                 "tokens": result.tokens, "chat_template": plan.template_label,
                 "continuation": f"target greedy, {plan.continuation_tokens} tokens"},
        "step_acc_before": [round(a, 4) for a in result.step_acc_before],
        "step_acc_after": [round(a, 4) for a in result.step_acc_after],
    }
    if PROVENANCE_KEY in plan.config:
        prov["previous"] = plan.config[PROVENANCE_KEY]
    return prov


# ------------------------------------------------------------------------------- helpers


def _load_pair(plan: FinetunePlan, device: str | None) -> tuple[Any, Any, Any]:
    from transformers import AutoTokenizer

    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.target import TargetModel

    tgt = TargetModel.from_pretrained(plan.target, device=device)  # None: GPU if torch sees one
    try:
        drafter = load_drafter(plan.draft, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight,
                               device=tgt.device)
    except (ValueError, KeyError, RuntimeError) as exc:
        raise FinetuneRefusedError(f"{plan.draft}: the reference engine cannot load the draft ({exc})") from None
    return tgt, drafter, AutoTokenizer.from_pretrained(str(plan.target))


def _generate(plan: FinetunePlan, tgt: Any, tokenizer: Any, say: Progress) -> tuple[list[list[int]], float]:
    """The target's greedy continuation of every rendered prompt (the serving template)."""
    from eagle_convert.smoke.prompts import prepare_prompts
    from eagle_convert.reference.loop import greedy_generate

    t0 = time.perf_counter()
    ctx = getattr(tgt.model.config, "max_position_embeddings", None)
    room = None if ctx is None else int(ctx) - plan.continuation_tokens - plan.ttt_steps - 1
    pset = prepare_prompts(plan.prompts, tokenizer, chat_template=plan.chat_template,
                           template_label=plan.template_label, max_prompt_tokens=room)
    if not pset.prompts:
        raise UsageError("no prompt fits the target's context with --continuation-tokens")
    seqs = []
    for i, p in enumerate(pset.prompts):
        say(FinetuneEvent("generate", f"target continuation {i + 1}/{len(pset.prompts)}",
                          step=i + 1, total=len(pset.prompts)))
        seqs.append(p.token_ids + greedy_generate(tgt, p.token_ids, plan.continuation_tokens))
    return seqs, time.perf_counter() - t0


@dataclass
class _Eval:
    loss: float
    step_acc: list[float]
    features: list[tuple[Any, ...]]


def _evaluate(plan: FinetunePlan, tgt: Any, drafter: Any, seqs: list[list[int]], say: Progress,
              features: list[tuple[Any, ...]] | None = None) -> _Eval:
    """Teacher-forced TTT loss and per-step accuracy over all data (token-weighted over batches);
    the target features are computed once and reused for the after-training evaluation."""
    import torch

    from eagle_convert.reference.train import ttt_loss

    say(FinetuneEvent("evaluate", "evaluating " + ("before" if features is None else "after") + " training"))
    rows = drafter.draft_to_target
    in_draft = torch.zeros(tgt.vocab_size, dtype=torch.bool, device=tgt.device)
    in_draft[rows] = True
    feats: list[tuple[Any, ...]] = features if features is not None else []
    loss, accs, weight = 0.0, [0.0] * plan.ttt_steps, 0
    drafter.eval()
    with torch.no_grad():
        for b, start in enumerate(range(0, len(seqs), plan.batch_size)):
            batch = seqs[start: start + plan.batch_size]
            lens = torch.tensor([len(s) for s in batch])
            ids = torch.zeros(len(batch), int(lens.max()), dtype=torch.long)
            for i, s in enumerate(batch):
                ids[i, : len(s)] = torch.tensor(s)
            ids, lens = ids.to(tgt.device), lens.to(tgt.device)
            if features is None:
                out = tgt.forward(ids, aux_ids=plan.aux_ids)
                feats.append((out.aux.float(), out.logits[..., rows], in_draft[out.logits.argmax(-1)]))
            aux, tlogits, in_vocab = feats[b]
            lb, ab = ttt_loss(drafter, ids, lens, aux, tlogits, ttt_steps=plan.ttt_steps,
                              loss_decay=LOSS_DECAY, in_vocab=in_vocab)
            n = int(lens.sum())
            loss += float(lb) * n
            accs = [a + x * n for a, x in zip(accs, ab)]
            weight += n
    return _Eval(loss / weight, [a / weight for a in accs], feats)


class _StepLog(logging.Handler):
    """Turns train_draft's periodic `step N loss L acc [...]` log records into progress events."""

    def __init__(self, stage: str, total: int, say: Progress) -> None:
        super().__init__(logging.INFO)
        self.stage, self.total, self.say = stage, total, say

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if str(record.msg).startswith("step") and len(args) >= 2:
            step, loss = int(args[0]), float(args[1])
            self.say(FinetuneEvent("step", f"{self.stage}: step {step}/{self.total} loss {loss:.3f}",
                                   stage=self.stage, step=step, total=self.total, loss=loss))


def _train_stage(plan: FinetunePlan, stage: Stage, index: int, tgt: Any, drafter: Any,
                 seqs: list[list[int]], say: Progress) -> StageResult:
    from eagle_convert.reference.train import train_draft, trainable_names

    pats = STAGE_PARAMS[stage.name]
    try:
        names = [n for n in trainable_names(drafter, pats or "all") if n not in FROZEN]
    except ValueError:
        names = []
    if not names:
        raise FinetuneRefusedError(f"stage {stage.name}: the draft has no parameter matching {pats}")
    say(FinetuneEvent("stage", f"stage {stage.name}: {stage.steps} steps, lr {stage.lr:g}, "
                      f"{len(names)} tensors", stage=stage.name, total=stage.steps))
    logger = logging.getLogger("eagle_convert.reference.train")
    handler, level = _StepLog(stage.name, stage.steps, say), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        res = train_draft(tgt, drafter, seqs, aux_ids=plan.aux_ids, ttt_steps=plan.ttt_steps,
                          steps=stage.steps, lr=stage.lr, seed=plan.seed + index, trainable=names,
                          l2sp=stage.l2sp, log_every=max(1, stage.steps // 50),
                          batch_size=plan.batch_size, loss_decay=LOSS_DECAY)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return StageResult(stage.name, stage.steps, stage.lr, stage.l2sp, names, res.losses, res.seconds)


def _write(plan: FinetunePlan, drafter: Any, prov: dict[str, Any]) -> None:
    """vLLM layout via `write_draft`, inside an atomic output dir; the written draft must reload."""
    import torch

    from eagle_convert.io.atomic import OutputExistsError, atomic_output_dir, cleanup_stale_temps
    from eagle_convert.errors import OutputError
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.train import write_draft

    dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[plan.dtype]
    config = {**plan.config, PROVENANCE_KEY: prov}
    cleanup_stale_temps(plan.out)
    try:
        with atomic_output_dir(plan.out, force=plan.force) as tmp:
            write_draft(drafter, config, tmp, include_embed=plan.include_embed, dtype=dtype)
            back = load_drafter(tmp, target_embed=drafter.embed_tokens.weight, target_lm_head=drafter.lm_head.weight,
                                device=drafter.embed_tokens.weight.device).state_dict()

            for name, t in drafter.state_dict().items():
                want = t.to(dtype).to(back[name].dtype) if t.is_floating_point() else t
                if not torch.equal(back[name], want):
                    raise EagleConvertError(f"{plan.out}: written tensor {name} does not read back")
    except OutputExistsError as exc:
        raise OutputError(f"{plan.out}: output already exists", hint="pass --force to replace it") from exc
    except OSError as exc:
        raise OutputError(f"{exc.filename or plan.out}: cannot write the output ({exc.strerror or exc})",
                          hint="check free space and permissions") from exc
