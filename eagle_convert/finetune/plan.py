"""`finetune`: the short TTT fine-tune that makes an upgraded EAGLE-3.1 draft useful again.

`upgrade` inserts identity `fc_norm` weights and flips `norm_output`; both change the draft's
function (an RMSNorm with weight 1 still rescales each aux state to unit RMS: vLLM 0.32.0 `llama_eagle3.py`,
`Eagle3LlamaForCausalLM.combine_hidden_states`), so acceptance drops until the draft is trained with the
new flags. This module runs a two-stage recipe on top of `reference/train.py`:

* data: the target's own greedy continuations of rendered prompts (the built-in set by default),
  with the chat template used for serving, so nothing is downloaded;
* stage A (`fc_norm`): only `fc_norm.*` and `fc` train, at a large lr, everything else frozen;
* stage B (`all`): every draft weight but the shared embedding and the reduced `lm_head`, at a
  small lr with an L2-SP pull toward the weights the stage starts from (the input's, for every
  tensor stage A did not touch);
* TTT depth 3 (arXiv 2605.09992: EAGLE-3.1 generalises from short TTT depths);
* every 5th sequence is held out: each step is scored by expected acceptance length on it
  (EAL = Σ_k Π_{i≤k} acc_i, speculators PR 741) and the best step's weights are written, not the
  last step's; the start counts too, so a fine-tune that only hurts writes the input back;
* each training sample is the last `max_len` positions of a sequence (the target still sees the
  whole sequence): the built-in prompts are long, and cost grows with length.

`plan_finetune` checks everything that can be checked before the expensive part (paths, config,
target match), without torch; `finetune.run` (`run_finetune`, `finetune_draft`) generates, trains
and writes atomically. The dependency goes one way: run imports plan, never the reverse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.cache import CaptureOptions, check_cache
from eagle_convert.draft import Target, local_checkpoint
from eagle_convert.errors import EagleConvertError, UsageError
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.finetune.options import DEFAULT_MAX_LEN, FinetuneOptions, Stage
from eagle_convert.io import check_output_dir
from eagle_convert.jsonable import Jsonable, dump, key
from eagle_convert.measure import Prompt, prompt_items, resolve_chat_template
from eagle_convert.progress import Tick

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release

LOG = logging.getLogger(__name__)


class FinetuneRefusedError(EagleConvertError):
    """The draft cannot be fine-tuned here (engine cannot load it, target does not match)."""


# Stage name -> fnmatch patterns over canonical names; None: every trainable draft weight.
STAGE_PARAMS: dict[str, list[str] | None] = {"fc_norm": ["fc_norm.*", "fc.weight"], "all": None}
# Frozen in every stage: the target-shared embedding and the reduced head copied from it.
FROZEN = ("embed_tokens.weight", "lm_head.weight")
HOLD_OUT_EVERY = 5  # every 5th sequence scores the steps (EAL) instead of training
BATCH_SIZE = 8
LOSS_DECAY = 0.8
# The `smoke` extra's modules a fine-tune imports (target, drafter and trainer are torch; the tokenizer).


def held_out_al(eal: float) -> float:
    """The acceptance length a held-out EAL predicts: AL = 1 + EAL (EAL counts the accepted drafts
    per round; AL adds the target's own token, as smoke, check and report measure it).

    People read AL everywhere; EAL appears only in `--json`, the provenance and the library.
    """
    return 1.0 + eal


@dataclass
class FinetuneEvent:
    """One progress report: `kind` is capture | generate | features | stage | step | evaluate | write
    | done. A step carries its loss and, when it was scored, its held-out EAL (`best`: kept so far);
    a capture event its count (`progress`: continuations, then shards with tokens/s)."""

    kind: str
    message: str
    stage: str | None = None
    step: int = 0
    total: int = 0
    loss: float | None = None
    eal: float | None = None
    best: bool = False
    progress: Tick | None = None

    def tick(self, best_eal: float | None = None) -> Tick | None:
        """The event as a progress count (target continuations, a stage's steps with loss and
        held-out AL, `best_eal` the best so far), None for a one-line event (stage, evaluate, write)."""
        if self.kind == "capture":
            return self.progress
        if self.kind == "generate":
            return Tick("continuations", self.step, self.total)
        if self.kind != "step":
            return None
        info = f"loss {self.loss:.3f}" if self.loss is not None else ""
        if self.eal is not None:
            info += f" AL {held_out_al(self.eal):.3f}"
        if best_eal is not None:
            info += f" (best {held_out_al(best_eal):.3f})"
        return Tick("finetune", self.step, self.total, info.strip(), detail=self.stage or "")


Progress = Callable[[FinetuneEvent], None]


@dataclass
class FinetunePlan:
    """A checked fine-tune, not yet run: paths, the config, prompts and every stage's settings."""

    draft: Path
    target: Path
    out: Path
    config: dict[str, Any]  # the input's config.json, written back with provenance
    variant: str
    aux_ids: list[int] = field(metadata=key("aux_layer_ids"))
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
    release: Release = field(repr=False)  # resolved by plan_finetune, the entry: how the draft is read
    batch_size: int = BATCH_SIZE
    max_len: int | None = DEFAULT_MAX_LEN
    eval_every: int = 1
    # train from this capture cache (the target is not loaded); capture into it first with `capture`'s settings
    cache: Path | None = field(default=None, metadata=key(omit_none=True))
    capture: CaptureOptions | None = field(default=None, metadata=key(omit_none=True))
    nproc: int = 1  # data-parallel training processes (finetune/distributed.py)
    notices: list[str] = field(default_factory=list)  # the prompt suite's refusal lines (SPEED-Bench placeholders)

    def to_dict(self) -> dict[str, Any]:
        shown = {"prompts": self.prompts_label, "num_prompts": len(self.prompts), "chat_template": self.template_label}
        return dump(self, _PLAN_KEYS, **shown, hold_out_every=HOLD_OUT_EVERY)


_PLAN_KEYS = (
    "draft target out variant aux_layer_ids dtype stages prompts num_prompts chat_template continuation_tokens "
    "ttt_steps batch_size seed max_len eval_every nproc hold_out_every cache capture"
)


@dataclass
class StageResult(Jsonable):
    name: str
    steps: int
    lr: float
    l2sp: float
    trainable: list[str]
    losses: list[float] = field(metadata=key(ndigits=4))
    seconds: float = field(metadata=key(ndigits=2))
    # (step, held-out EAL); step 0: the start
    eal: list[tuple[int, float]] = field(default_factory=list, metadata=key(ndigits=4))
    best_step: int | None = None  # this stage's step whose weights were written (None: another stage's)


@dataclass
class FinetuneResult:
    """A finished fine-tune: the written folder, each stage's outcome, accuracy and loss before and after, held-out EAL."""

    out: Path
    stages: list[StageResult]
    # teacher-forced argmax agreement per TTT step, all data
    step_acc_before: list[float] = field(metadata=key(ndigits=4))
    step_acc_after: list[float] = field(metadata=key(ndigits=4))
    loss_before: float = field(metadata=key(ndigits=4))
    loss_after: float = field(metadata=key(ndigits=4))
    sequences: int
    tokens: int
    generate_seconds: float = field(metadata=key(ndigits=2))
    seconds: float = field(metadata=key(ndigits=2))
    held_out: int = 0  # sequences that scored the steps
    eal_before: float | None = field(default=None, metadata=key(ndigits=4))  # held-out EAL of the input
    best: dict[str, Any] | None = None  # {"stage", "step", "eal"} of the weights written ("start": the input's)

    @property
    def losses(self) -> dict[str, list[float]]:
        return {s.name: s.losses for s in self.stages}

    def to_dict(self) -> dict[str, Any]:
        return dump(self, _RESULT_KEYS)


_RESULT_KEYS = (
    "out seconds generate_seconds sequences tokens loss_before loss_after step_acc_before step_acc_after held_out "
    "eal_before best stages"
)


# ------------------------------------------------------------------------------- planning


def default_cache_dir(out: str | Path) -> Path:
    """Where `finetune --capture` caches without `--cache`: ``OUT.cache`` beside the output (kept,
    so a killed run resumes and a later `finetune --cache` reuses it)."""
    p = Path(out).expanduser().resolve()
    return p.with_name(p.name + ".cache")


def _stages(stages: Sequence[Stage]) -> list[Stage]:
    out = []
    for stage in stages:
        if stage.name not in STAGE_PARAMS:
            raise UsageError(f"unknown fine-tune stage {stage.name!r} (choose from {', '.join(STAGE_PARAMS)})")
        if stage.steps < 0 or stage.lr <= 0 or stage.l2sp < 0:
            raise UsageError(f"stage {stage.name}: steps must be >= 0, lr > 0 and l2sp >= 0")
        if stage.steps:
            out.append(stage)
    if not out:
        raise UsageError("every stage has 0 steps: nothing to train")
    return out


def plan_finetune(
    draft: str | Path,
    target: str | Path,
    out: str | Path,
    opts: FinetuneOptions | None = None,
    *,
    prompts: Sequence[Prompt] | None = None,
    force: bool = False,
    batch_size: int = BATCH_SIZE,
    cache: str | Path | None = None,
    capture: CaptureOptions | None = None,
) -> FinetunePlan:
    """Check paths, the draft's config and its match with the target; no torch work yet.

    Args:
        draft: the draft to fine-tune (usually an upgraded EAGLE-3.1 draft).
        target: the target model folder.
        out: the new output folder.
        opts: the data, stages, TTT depth and seed (default `FinetuneOptions()`); its `prompts` is
            a `--prompts` value (suite name, JSONL file, prepared folder; None: the built-in set).
        prompts: `Prompt`s to train on instead of `opts.prompts`.
        force: replace an existing `out`.
        batch_size: sequences per step.
        cache: train from this capture cache (`eagle-convert capture`): its sequences, its target
            features; the target is not loaded. With `capture`, the folder to capture into first
            (default `OUT.cache`).
        capture: capture the training data first with these settings, then train from the cache.

    Returns:
        The plan `run_finetune` executes.

    Raises:
        CheckpointNotFoundError: a draft or target without config.json.
        UsageError: bad settings (a value out of range, every stage at 0 steps, no prompts), or a
            cache captured for another target, aux layer ids or vocabulary, or incomplete.
        FinetuneRefusedError: a draft or target it cannot fine-tune (a config the reference engine
            cannot read, aux ids outside the target's layers, ...).
    """
    o = opts or FinetuneOptions()
    continuation_tokens, ttt_steps, max_len, eval_every = o.continuation_tokens, o.ttt_steps, o.train_len, o.eval_every
    require("smoke", "finetune", TORCH_MODULES)  # the pair check below builds the torch reference drafter
    if max_len is not None and max_len < ttt_steps + 2:
        raise UsageError(f"{{max_len}} must be at least {ttt_steps + 2} (TTT depth + 2)", options=("max_len",))
    if not 1 <= o.nproc <= batch_size:
        raise UsageError(
            f"{{nproc={o.nproc}}}: must be between 1 and {batch_size}, the sequences per batch "
            "(each process trains on its part)",
            options=("nproc",),
        )
    plan_stages = _stages(o.stages())
    dpath = local_checkpoint(draft, "draft", "finetune")  # DRAFT first: a swapped pair names the first argument
    tpath = local_checkpoint(target, "target", "finetune")
    final = check_output_dir(out, {"input draft": dpath, "target": tpath}, force=force)
    if cache is not None and capture is None and (prompts is not None or o.prompts is not None):
        raise UsageError(
            "{train_prompts} with {cache}: the cache holds the training data; drop one of them",
            options=("train_prompts", "cache"),
        )
    notices: list[str] = []
    items, label = prompt_items(
        prompts if prompts is not None else o.prompts, option="--train-prompts", say=notices.append
    )
    if not items:
        raise UsageError("no prompts to generate training data from")
    cache_dir = None if cache is None and capture is None else Path(cache or default_cache_dir(final)).expanduser()
    template, template_label = resolve_chat_template(o.chat_template)

    from eagle_convert.draft import describe, open_checkpoint

    ckpt = open_checkpoint(dpath)  # the reader every command uses: shards, .bin, NeMo sub-folders
    from eagle_convert.vllm_model import default_release

    release = default_release()  # finetune's entry: the installed release, passed down in the plan
    info = describe(ckpt, release, read_vocab=False)
    config = ckpt.config
    aux_ids = _check_pair(dpath, config, Target.from_folder(tpath, str(target)), release)
    if cache_dir is not None and capture is None:
        check_cache(cache_dir, draft=dpath, target=tpath, aux_ids=aux_ids, release=release)
        label = f"cache {cache_dir}"
    floats = {k: v for k, v in info.dtypes.items() if k in ("F32", "BF16", "F16")}
    dtype = max(floats, key=floats.__getitem__) if floats else "BF16"
    return FinetunePlan(
        dpath,
        tpath,
        final,
        config,
        info.variant,
        aux_ids,
        dtype,
        info.has_embed,
        plan_stages,
        items,
        label,
        template,
        template_label,
        continuation_tokens,
        ttt_steps,
        o.seed,
        force,
        release,
        batch_size,
        max_len,
        eval_every,
        None if cache_dir is None else cache_dir.resolve(),
        capture,
        o.nproc,
        notices,
    )


def _check_pair(dpath: Path, config: dict[str, Any], tgt: Target, release: Release) -> list[int]:
    """The reference engine must be able to build the draft, and the target must fit it."""
    from eagle_convert.reference import draft_config_from_dict
    from eagle_convert.vllm_model import default_aux_ids

    try:
        cfg = draft_config_from_dict(config, release)
    except NotImplementedError as exc:
        raise FinetuneRefusedError(
            f"{dpath}: cannot be fine-tuned: the reference engine cannot build it ({exc})"
        ) from None
    except (KeyError, ValueError, TypeError) as exc:
        raise FinetuneRefusedError(f"{dpath}: the reference engine cannot read config.json ({exc})") from None
    t_hidden, t_vocab, t_layers = tgt.hidden_size, tgt.vocab_size, tgt.num_layers
    if t_hidden != cfg.target_hidden_size:
        raise FinetuneRefusedError(
            f"target hidden size {t_hidden} != the draft's target_hidden_size "
            f"{cfg.target_hidden_size}: this draft was not trained for this target"
        )
    if t_vocab != cfg.vocab_size:
        raise FinetuneRefusedError(
            f"target vocab_size {t_vocab} != the draft's vocab_size {cfg.vocab_size}: "
            "this draft was not trained for this target"
        )
    if t_layers is None:
        raise FinetuneRefusedError("the target's config.json has no integer num_hidden_layers")
    ids = list(cfg.aux_layer_ids or default_aux_ids(t_layers))
    if any(i < 0 or i > t_layers for i in ids):
        raise FinetuneRefusedError(f"draft aux layer ids {ids} lie outside the target's 0..{t_layers} layers")
    if not cfg.use_aux_hidden_state:
        raise FinetuneRefusedError(f"{dpath}: use_aux_hidden_state is false: the draft has no fc to fine-tune")
    return ids
