"""`finetune`: the short TTT fine-tune that makes an upgraded EAGLE-3.1 draft useful again.

`upgrade` inserts identity `fc_norm` weights and flips `norm_output`; both change the draft's
function (checkpoint-formats.md §2.3), so acceptance drops until the draft is trained with the
new flags. This module runs the recipe of §2.4/§4 on top of `reference/train.py`:

* data: the target's own greedy continuations of rendered prompts (the built-in set by default),
  with the chat template used for serving, so nothing is downloaded;
* stage A (`fc_norm`): only `fc_norm.*` and `fc` train, at a large lr, everything else frozen;
* stage B (`all`): every draft weight but the shared embedding and the reduced `lm_head`, at a
  small lr with an L2-SP pull toward the weights the stage starts from (the input's, for every
  tensor stage A did not touch);
* TTT depth 3 (the paper: EAGLE-3.1 generalises from short TTT depths).

`plan_finetune` checks everything that can be checked before the expensive part (paths, config,
target match); `run_finetune` generates, trains and writes atomically. Torch is imported lazily.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import CheckpointNotFoundError, EagleConvertError, UsageError
from .plan import PROVENANCE_KEY
from .prompts import Prompt, builtin_prompts, load_prompts, resolve_chat_template

__all__ = ["DEFAULT_STAGES", "STAGE_PARAMS", "FinetuneEvent", "FinetunePlan", "FinetuneRefusedError",
           "FinetuneResult", "Stage", "StageResult", "finetune", "plan_finetune", "run_finetune"]

LOG = logging.getLogger(__name__)


class FinetuneRefusedError(EagleConvertError):
    """The draft cannot be fine-tuned here (engine cannot load it, target does not match)."""


@dataclass(frozen=True)
class Stage:
    """One training stage: which parameters (`STAGE_PARAMS[name]`), how long, how fast."""

    name: str
    steps: int
    lr: float
    l2sp: float = 0.0


# Stage name -> fnmatch patterns over canonical names; None: every trainable draft weight.
STAGE_PARAMS: dict[str, list[str] | None] = {"fc_norm": ["fc_norm.*", "fc.weight"], "all": None}
# Frozen in every stage (§4): the target-shared embedding and the reduced head copied from it.
FROZEN = ("embed_tokens.weight", "lm_head.weight")
DEFAULT_STAGES = (Stage("fc_norm", steps=60, lr=1e-3), Stage("all", steps=60, lr=1e-4, l2sp=1e-3))
BATCH_SIZE = 8
LOSS_DECAY = 0.8


@dataclass
class FinetuneEvent:
    """One progress report: `kind` is generate | features | stage | step | evaluate | write | done."""

    kind: str
    message: str
    stage: str | None = None
    step: int = 0
    total: int = 0
    loss: float | None = None


Progress = Callable[[FinetuneEvent], None]


@dataclass
class FinetunePlan:
    draft: Path
    target: Path
    out: Path
    config: dict[str, Any]  # the input's config.json, written back with provenance
    variant: str
    aux_ids: list[int]
    dtype: str  # safetensors dtype of the input's weights (F32, BF16, F16)
    include_embed: bool
    stages: list[Stage]
    prompts: list[Prompt]
    prompts_label: str
    chat_template: str | None
    template_label: str
    continuation_tokens: int
    ttt_steps: int
    seed: int
    force: bool
    batch_size: int = BATCH_SIZE

    def to_dict(self) -> dict[str, Any]:
        return {"draft": str(self.draft), "target": str(self.target), "out": str(self.out),
                "variant": self.variant, "aux_layer_ids": self.aux_ids, "dtype": self.dtype,
                "stages": [asdict(s) for s in self.stages], "prompts": self.prompts_label,
                "num_prompts": len(self.prompts), "chat_template": self.template_label,
                "continuation_tokens": self.continuation_tokens, "ttt_steps": self.ttt_steps,
                "batch_size": self.batch_size, "seed": self.seed}


@dataclass
class StageResult:
    name: str
    steps: int
    lr: float
    l2sp: float
    trainable: list[str]
    losses: list[float]
    seconds: float


@dataclass
class FinetuneResult:
    out: Path
    stages: list[StageResult]
    step_acc_before: list[float]  # teacher-forced argmax agreement per TTT step, all data
    step_acc_after: list[float]
    loss_before: float
    loss_after: float
    sequences: int
    tokens: int
    generate_seconds: float
    seconds: float

    @property
    def losses(self) -> dict[str, list[float]]:
        return {s.name: s.losses for s in self.stages}

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "seconds": round(self.seconds, 2),
                "generate_seconds": round(self.generate_seconds, 2), "sequences": self.sequences,
                "tokens": self.tokens, "loss_before": round(self.loss_before, 4),
                "loss_after": round(self.loss_after, 4),
                "step_acc_before": [round(a, 4) for a in self.step_acc_before],
                "step_acc_after": [round(a, 4) for a in self.step_acc_after],
                "stages": [{**asdict(s), "losses": [round(x, 4) for x in s.losses],
                            "seconds": round(s.seconds, 2)} for s in self.stages]}


# ------------------------------------------------------------------------------- planning


def _folder(path: str | Path, what: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CheckpointNotFoundError(f"{what} {path}: no such folder (finetune needs a local checkpoint folder)")
    if not (p / "config.json").is_file():
        raise CheckpointNotFoundError(f"{what} {path}: no config.json")
    return p.resolve()


def _check_out(out: str | Path, inputs: dict[str, Path], force: bool) -> Path:
    """Refuse an output that is, is inside, or contains an input, or exists without `force`."""
    from .errors import OutputError

    final = Path(out).expanduser().absolute()
    resolved = final.resolve()
    for what, root in inputs.items():
        if resolved == root or root in resolved.parents:
            raise OutputError(f"{out}: output is the {what} {root} or inside it",
                              hint="choose an output folder outside the input")
        if resolved in root.parents:
            raise OutputError(f"{out}: output contains the {what} {root}",
                              hint="choose an output folder outside the input")
    if final.exists() and not final.is_dir():
        raise OutputError(f"{out}: exists and is not a folder", hint="choose another output path")
    if final.exists() and any(final.iterdir()) and not force:
        raise OutputError(f"{out}: output already exists", hint="pass --force to replace it")
    return final


def _stages(stages: Sequence[str | Stage] | None) -> list[Stage]:
    defaults = {s.name: s for s in DEFAULT_STAGES}
    out = []
    for s in DEFAULT_STAGES if stages is None else stages:
        stage = s if isinstance(s, Stage) else defaults.get(s)
        if stage is None or stage.name not in STAGE_PARAMS:
            name = s.name if isinstance(s, Stage) else s
            raise UsageError(f"unknown fine-tune stage {name!r} (choose from {', '.join(STAGE_PARAMS)})")
        if stage.steps < 0 or stage.lr <= 0 or stage.l2sp < 0:
            raise UsageError(f"stage {stage.name}: steps must be >= 0, lr > 0 and l2sp >= 0")
        if stage.steps:
            out.append(stage)
    if not out:
        raise UsageError("every stage has 0 steps: nothing to train")
    return out


def plan_finetune(draft: str | Path, target: str | Path, out: str | Path, *,
                  prompts: Sequence[Prompt] | str | Path | None = None, chat_template: str | None = None,
                  continuation_tokens: int = 64, stages: Sequence[str | Stage] | None = None,
                  ttt_steps: int = 3, seed: int = 0, force: bool = False,
                  batch_size: int = BATCH_SIZE) -> FinetunePlan:
    """Check paths, the draft's config and its match with the target; no torch work yet.

    `prompts`: None (built-in set), a list of `Prompt`s, or a JSONL path (`load_prompts`).
    `stages`: names (defaults of `DEFAULT_STAGES`) or `Stage`s; 0-step stages are dropped.
    """
    if continuation_tokens < 1:
        raise UsageError("--continuation-tokens must be at least 1")
    if ttt_steps < 1:
        raise UsageError("--ttt-steps must be at least 1")
    plan_stages = _stages(stages)
    dpath, tpath = _folder(draft, "draft"), _folder(target, "target")
    final = _check_out(out, {"input draft": dpath, "target": tpath}, force)
    if prompts is None:
        items, label = builtin_prompts(), "built-in"
    elif isinstance(prompts, (str, Path)):
        items, label = load_prompts(prompts), str(prompts)
    else:
        items, label = list(prompts), "custom"
    if not items:
        raise UsageError("no prompts to generate training data from")
    template, template_label = resolve_chat_template(chat_template)

    from .checkpoint import open_checkpoint
    from .describe import describe

    info = describe(open_checkpoint(dpath), read_vocab=False)
    config = json.loads((dpath / "config.json").read_text())
    aux_ids = _check_pair(dpath, config, json.loads((tpath / "config.json").read_text()))
    floats = {k: v for k, v in info.dtypes.items() if k in ("F32", "BF16", "F16")}
    dtype = max(floats, key=floats.__getitem__) if floats else "BF16"
    return FinetunePlan(dpath, tpath, final, config, info.variant, aux_ids, dtype, info.has_embed,
                        plan_stages, items, label, template, template_label, continuation_tokens,
                        ttt_steps, seed, force, batch_size)


def _check_pair(dpath: Path, config: dict[str, Any], tcfg: dict[str, Any]) -> list[int]:
    """The reference engine must be able to build the draft, and the target must fit it."""
    from .reference.drafter import draft_config_from_dict
    from .reference.target import default_aux_ids

    try:
        cfg = draft_config_from_dict(config)
    except NotImplementedError as exc:
        what = "MLA drafts" if "MLA" in str(exc) else str(exc)
        raise FinetuneRefusedError(f"{dpath}: {what} cannot be fine-tuned: the reference engine "
                                   "has no implementation for them") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise FinetuneRefusedError(f"{dpath}: the reference engine cannot read config.json ({exc})") from None
    tcfg = tcfg.get("text_config", tcfg)
    t_hidden, t_vocab, t_layers = (tcfg.get(k) for k in ("hidden_size", "vocab_size", "num_hidden_layers"))
    if t_hidden != cfg.target_hidden_size:
        raise FinetuneRefusedError(f"target hidden size {t_hidden} != the draft's target_hidden_size "
                                   f"{cfg.target_hidden_size}: this draft was not trained for this target")
    if t_vocab != cfg.vocab_size:
        raise FinetuneRefusedError(f"target vocab_size {t_vocab} != the draft's vocab_size {cfg.vocab_size}: "
                                   "this draft was not trained for this target")
    ids = list(cfg.aux_layer_ids or default_aux_ids(int(t_layers)))
    if any(i < 0 or i > int(t_layers) for i in ids):
        raise FinetuneRefusedError(f"draft aux layer ids {ids} lie outside the target's 0..{t_layers} layers")
    if not cfg.use_aux_hidden_state:
        raise FinetuneRefusedError(f"{dpath}: use_aux_hidden_state is false: the draft has no fc to fine-tune")
    return ids


# -------------------------------------------------------------------------------- running


def finetune(draft: str | Path, target: str | Path, out: str | Path, *,
             prompts: Sequence[Prompt] | str | Path | None = None, chat_template: str | None = None,
             continuation_tokens: int = 64, stages: Sequence[str | Stage] | None = None,
             ttt_steps: int = 3, seed: int = 0, force: bool = False,
             progress: Progress | None = None) -> FinetuneResult:
    """Plan, then run: fine-tune `draft` against `target` into the new folder `out`."""
    plan = plan_finetune(draft, target, out, prompts=prompts, chat_template=chat_template,
                         continuation_tokens=continuation_tokens, stages=stages, ttt_steps=ttt_steps,
                         seed=seed, force=force)
    return run_finetune(plan, progress=progress)


def run_finetune(plan: FinetunePlan, *, progress: Progress | None = None) -> FinetuneResult:
    """Generate the data, evaluate, train every stage, evaluate again, write atomically."""
    import torch

    say = progress or (lambda _e: None)
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(plan.seed)
        tgt, drafter, tokenizer = _load_pair(plan)
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


def _load_pair(plan: FinetunePlan) -> tuple[Any, Any, Any]:
    from transformers import AutoTokenizer

    from .reference.data import load_drafter
    from .reference.target import TargetModel

    # The TTT trainer runs on CPU; pin both models there even where a GPU is visible.
    tgt = TargetModel.from_pretrained(plan.target, device="cpu")
    try:
        drafter = load_drafter(plan.draft, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight,
                               device="cpu")
    except (ValueError, KeyError, RuntimeError) as exc:
        raise FinetuneRefusedError(f"{plan.draft}: the reference engine cannot load the draft ({exc})") from None
    return tgt, drafter, AutoTokenizer.from_pretrained(str(plan.target))


def _generate(plan: FinetunePlan, tgt: Any, tokenizer: Any, say: Progress) -> tuple[list[list[int]], float]:
    """The target's greedy continuation of every rendered prompt (the serving template)."""
    from .prompts import prepare_prompts
    from .reference.loop import greedy_generate

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

    from .reference.train import ttt_loss

    say(FinetuneEvent("evaluate", "evaluating " + ("before" if features is None else "after") + " training"))
    rows = drafter.draft_to_target
    in_draft = torch.zeros(tgt.vocab_size, dtype=torch.bool)
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
    from .reference.train import train_draft, trainable_names

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
    """vLLM layout via `save_draft`, inside an atomic output dir; the written draft must reload."""
    import torch

    from .atomic import OutputExistsError, atomic_output_dir, cleanup_stale_temps
    from .errors import OutputError
    from .reference.data import load_drafter
    from .reference.train import save_draft

    dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[plan.dtype]
    config = {**plan.config, PROVENANCE_KEY: prov}
    cleanup_stale_temps(plan.out)
    try:
        with atomic_output_dir(plan.out, force=plan.force) as tmp:
            staged = save_draft(drafter, config, tmp / "draft", include_embed=plan.include_embed, dtype=dtype)
            for f in staged.iterdir():
                f.rename(tmp / f.name)
            staged.rmdir()
            back = load_drafter(tmp, target_embed=drafter.embed_tokens.weight,
                                target_lm_head=drafter.lm_head.weight).state_dict()
            for name, t in drafter.state_dict().items():
                want = t.to(dtype).to(back[name].dtype) if t.is_floating_point() else t
                if not torch.equal(back[name], want):
                    raise EagleConvertError(f"{plan.out}: written tensor {name} does not read back")
    except OutputExistsError as exc:
        raise OutputError(f"{plan.out}: output already exists", hint="pass --force to replace it") from exc
    except OSError as exc:
        raise OutputError(f"{exc.filename or plan.out}: cannot write the output ({exc.strerror or exc})",
                          hint="check free space and permissions") from exc
