"""`upgrade --init calibrated`: fc_norm weights measured on the target instead of trained.

The zero-step member of the fine-tune family: the target runs over calibration prompts (rendered with
the serving chat template, as `finetune` renders them), each `fc_norm.{i}.weight` becomes the median
RMS of aux hidden state i over those tokens (`reference.calibrate` says why the median), and a
quarter of the prompts is held out to measure how close the result drafts to the EAGLE-3 input:
top-1 agreement of the first draft step, calibrated and identity (ones), on the held-out prompts.
The result is a `NormInit` that `upgrade.plan_upgrade` carries as the added tensors' data.

Lives here rather than in `upgrade/` because it runs the torch reference engine (`reference/`, a
later layer than `upgrade/`) on prompts rendered by `measure.prompts`; `upgrade.plan` stays pure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.cache import CaptureOptions
from eagle_convert.draft import Checkpoint, CheckpointRef, Target, canonical_map, local_checkpoint, open_checkpoint
from eagle_convert.errors import (
    CheckpointReadError,
    EngineError,
    UpgradeRefusedError,
    UsageError,
)
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.finetune.data import target_tokenizer
from eagle_convert.io import torch_dtype
from eagle_convert.jsonable import dump
from eagle_convert.measure import Prompt, prepare_prompts, prompt_items, resolve_chat_template
from eagle_convert.progress import OnTick, Tick, tick_or_nothing
from eagle_convert.upgrade import FLOAT_DTYPES, NormInit

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release

STATISTIC = "median over calibration tokens of each aux hidden state's RMS (eps included), broadcast"
HOLD_OUT_EVERY = 4  # every 4th prompt measures agreement, the rest calibrate


@dataclass
class Calibration:
    """What `calibrate_fc_norm` measured: one weight per aux state and how close it drafts."""

    values: list[float]  # fc_norm.{i}.weight value (broadcast over target_hidden_size)
    rms: list[dict[str, float]]  # per aux state: median, mean, p10, p90 of the per-token RMS
    aux_ids: list[int]
    target: str
    prompts: str  # label of the prompt source
    chat_template: str
    fit_prompts: int
    tokens: int  # calibration tokens
    held_out_prompts: int
    positions: int  # first-step positions compared
    agreement: float | None  # calibrated vs the EAGLE-3 draft, top-1 of the first draft step
    agreement_identity: float | None  # ones vs the EAGLE-3 draft
    device: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dump(self, statistic=STATISTIC)

    def norm_init(self) -> NormInit:
        """The values as the upgrade plan's fc_norm data, with the record kept in the provenance."""
        keys = "statistic values:6 aux_layer_ids target prompts chat_template fit_prompts tokens"
        record = dump(self, keys, statistic=STATISTIC, aux_layer_ids=self.aux_ids)
        if self.agreement is not None:
            agreement = {"calibrated": round(self.agreement, 4), "identity": round(self.agreement_identity or 0.0, 4)}
            record["first_step_top1_agreement_with_eagle3"] = agreement | dump(self, "held_out_prompts positions")
        return NormInit("calibrated", tuple((v,) for v in self.values), record)


def calibrate_fc_norm(
    draft: str | Path | CheckpointRef | Checkpoint,
    target: str | Path,
    *,
    aux_ids: Sequence[int],
    release: Release,
    prompts: Sequence[Prompt] | str | Path | None = None,
    chat_template: str | None = None,
    device: str | None = None,
    say: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    cache: str | Path | None = None,
    capture: CaptureOptions | None = None,
) -> Calibration:
    """Measure fc_norm weights for the EAGLE-3 `draft` on `target` (a local folder).

    Args:
        draft: the EAGLE-3 draft (path, reference or opened checkpoint).
        target: the target model folder.
        aux_ids: the ids the upgraded draft will use (the plan's).
        release: the vLLM release the plan is for (`UpgradePlan.release`): how the reference engine
            builds the draft.
        prompts: None (the built-in set), a `--prompts` value (suite name, JSONL file, prepared
            folder: `measure.resolve_suite`) or `Prompt`s; every 4th is held out for the
            agreement when there are at least 2.
        chat_template: a --chat-template value replacing the target's.
        device: None: the first GPU torch sees, else CPU.
        say: gets a line per phase.
        on_tick: a count of the prompts run in each phase.
        cache: a capture cache (`eagle-convert capture`) to read the aux states from instead of
            running the target: its sequences are the calibration data (`prompts` and
            `chat_template` are not used), every 4th held out as above; the target is not loaded.
        capture: first capture the rendered calibration prompts (no continuation) into `cache`
            with these settings (vLLM: the target tensor parallel if asked), then read them back.

    Returns:
        The measured weights (`norm_init()` for `plan_upgrade`) and the held-out agreement.

    Raises:
        MissingExtraError: torch is not installed.
        UsageError: no prompts, or a cache captured for another target or aux ids, or incomplete.
    """
    require("smoke", "upgrade --init calibrated", TORCH_MODULES)
    import torch

    from eagle_convert.reference import (
        TargetModel,
        aux_rms,
        draft_config_from_dict,
        drafter_with_fc_norm,
        fc_norm_values,
        first_position_agreement,
        load_drafter,
        quiet_loading,
    )

    say = say or (lambda _m: None)
    t0 = time.perf_counter()
    tdir = local_checkpoint(
        target, "target", "upgrade", fix="{init=calibrated} runs the target: pass its local folder", options=("init",)
    )
    ckpt = draft if isinstance(draft, Checkpoint) else open_checkpoint(draft, require_config=True)
    try:
        cfg = draft_config_from_dict(ckpt.config, release)
    except NotImplementedError as exc:
        raise UpgradeRefusedError(f"{ckpt.description}: the reference engine cannot build the draft ({exc})") from None
    tconf = Target.from_folder(tdir, str(target))
    if tconf.hidden_size != cfg.target_hidden_size:
        raise UpgradeRefusedError(
            f"target {target}: hidden size {tconf.hidden_size} != the draft's "
            f"target_hidden_size {cfg.target_hidden_size}: this draft was not trained for it"
        )
    if capture is not None:
        if cache is None:
            raise UsageError("{capture} needs the cache folder to capture into ({cache})", options=("capture", "cache"))
        _capture(ckpt, tdir, cache, prompts, chat_template, capture, release, say, on_tick)
    if cache is not None:
        tgt, seqs, label, template_label = _from_cache(cache, tdir, int(tconf.num_layers or 0), aux_ids, say)
    else:
        seqs, label, template_label = _rendered(tdir, target, tconf, prompts, chat_template, say)
        say(f"calibrate: loading {tdir.name}")
        try:
            with quiet_loading():
                tgt = TargetModel.from_pretrained(tdir, device=device)
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointReadError(f"target {target}: transformers cannot load it ({exc})".split("\n")[0]) from None
    is_held = [len(seqs) >= 2 and i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1 for i in range(len(seqs))]
    held = [s for s, h in zip(seqs, is_held) if h]
    fit = [s for s, h in zip(seqs, is_held) if not h]

    ids = sorted(set(aux_ids))
    if max(ids) > tgt.num_layers:
        raise UpgradeRefusedError(f"aux layer id {max(ids)} is beyond the target's {tgt.num_layers} layers")
    say(f"calibrate: aux hidden states of {len(fit)} prompts ({sum(map(len, fit))} tokens)")
    tick = tick_or_nothing(on_tick)
    rms = aux_rms(
        tgt,
        fit,
        ids,
        cfg.rms_norm_eps,
        each=lambda n: tick(Tick("aux_states", n, len(fit))),
    )
    # Rounded to the dtype the upgrade writes them in (fc.weight's), so the agreement is the output's.
    fc_dtype = next((ckpt.tensors[n].dtype for n, c in canonical_map(ckpt.tensors).items() if c == "fc.weight"), "F32")
    to = torch_dtype(fc_dtype) if fc_dtype in FLOAT_DTYPES else torch.float32
    values = [float(torch.tensor(v).to(to)) for v in fc_norm_values(rms)]
    stats = [
        {"median": v, "mean": float(col.mean()), "p10": float(col.quantile(0.1)), "p90": float(col.quantile(0.9))}
        for v, col in zip(values, rms.T)
    ]
    agreement = agreement_id = None
    positions = 0
    if held:
        say(f"calibrate: first-step agreement with the EAGLE-3 draft on {len(held)} held-out prompts")
        try:
            base = load_drafter(
                ckpt, release, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight, device=tgt.device
            )
        except (ValueError, KeyError, RuntimeError, NotImplementedError) as exc:
            raise EngineError(f"{ckpt.description}: the reference engine cannot load the draft ({exc})") from None
        cands = [drafter_with_fc_norm(base, [[v] for v in values]), drafter_with_fc_norm(base, [[1.0]] * len(values))]
        (agreement, agreement_id), positions = first_position_agreement(
            tgt, base, cands, held, ids, each=lambda n: tick(Tick("agreement", n, len(held)))
        )
    return Calibration(
        values=values,
        rms=stats,
        aux_ids=ids,
        target=str(target),
        prompts=label,
        chat_template=template_label,
        fit_prompts=len(fit),
        tokens=int(rms.shape[0]),
        held_out_prompts=len(held),
        positions=positions,
        agreement=agreement,
        agreement_identity=agreement_id,
        device=str(tgt.device),
        seconds=time.perf_counter() - t0,
    )


def _rendered(
    tdir: Path,
    target: str | Path,
    tconf: Target,
    prompts: Sequence[Prompt] | str | Path | None,
    chat_template: str | None,
    say: Callable[[str], None],
) -> tuple[list[list[int]], str, str]:
    """The calibration prompts rendered with the serving template: (token ids, prompts label, template label)."""
    items, label = prompt_items(prompts, option="--calibration-prompts", say=say)
    if not items:
        raise UsageError("no calibration prompts")
    template, template_label = resolve_chat_template(chat_template)
    tokenizer = target_tokenizer(
        tdir, target, hint="{init=calibrated} needs the target's tokenizer files beside its config", options=("init",)
    )
    pset = prepare_prompts(
        items,
        tokenizer,
        chat_template=template,
        template_label=template_label,
        max_prompt_tokens=tconf.max_position_embeddings,
    )
    seqs = [p.token_ids for p in pset.prompts]
    if not seqs:
        raise UsageError("no calibration prompt fits the target's context")
    return seqs, label, template_label


class _CachedAux:
    """What `reference.calibrate` asks of a target (``forward(ids, aux_ids=).aux``, ``device``,
    ``embed_weight``, ``lm_head_weight``, ``num_layers``), answered from a capture cache."""

    def __init__(self, cache: Any, tdir: Path, num_layers: int) -> None:
        from eagle_convert.cache import target_head_weights

        self.cache = cache
        self.device = cache.device
        self.num_layers = num_layers
        self.embed_weight, self.lm_head_weight = target_head_weights(tdir)

    def forward(self, input_ids: Any, *, aux_ids: Sequence[int]) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(aux=self.cache.load(input_ids[0].tolist())["aux"][None].to(self.device))


def _from_cache(
    cache: str | Path, tdir: Path, num_layers: int, aux_ids: Sequence[int], say: Callable[[str], None]
) -> tuple[Any, list[list[int]], str, str]:
    """(the cache standing in for the target, its sequences, prompts label, template label)."""
    from eagle_convert.cache import CachedTarget, check_cache

    man = check_cache(cache, target=tdir, aux_ids=aux_ids)  # aux states only: any draft vocabulary
    source = CachedTarget(cache)
    seqs = source.sequences()
    first = man.provenance.get("0", {}) if isinstance(man.provenance, dict) else {}
    say(f"calibrate: aux hidden states from the cache {cache} ({len(seqs)} sequences)")
    return _CachedAux(source, tdir, num_layers), seqs, f"cache {cache}", str(first.get("chat_template", "cache"))


def _capture(
    ckpt: Checkpoint,
    tdir: Path,
    cache: str | Path,
    prompts: Sequence[Prompt] | str | Path | None,
    chat_template: str | None,
    capture: CaptureOptions,
    release: Release,
    say: Callable[[str], None],
    on_tick: OnTick | None,
) -> None:
    """The calibration prompts, rendered as `_rendered` renders them, captured into `cache`."""
    from eagle_convert.finetune.capture import capture_training_data
    from eagle_convert.finetune.options import FinetuneOptions

    root = getattr(ckpt.source, "root", None)
    beside = ckpt.has_config and Path(ckpt.config_name).parent == Path(ckpt.prefix)  # config.json by the weights
    if root is None or not beside:
        raise UsageError(
            f"{ckpt.description}: {{capture}} needs the draft in a local folder with its config.json",
            options=("capture",),
        )
    given = None if prompts is None or not isinstance(prompts, (str, Path)) else str(prompts)
    data = FinetuneOptions(prompts=given, chat_template=chat_template)
    capture_training_data(
        Path(root) / ckpt.prefix,
        tdir,
        cache,
        data,
        capture,
        prompts=None if given is not None or prompts is None else list(prompts),  # type: ignore[arg-type]
        continuation_tokens=0,  # the prompts alone: calibration reads the aux states of the prompt tokens
        say=say,
        on_tick=on_tick,
        release=release,
    )
