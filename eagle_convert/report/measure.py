"""`report`'s measuring stages: every variant on the same tokenized prompts with one engine.

One stage per variant (`smoke:NAME`), keyed by the variant's content hash, the target's, the
token ids of every prompt x bucket and the engine build, so a resumed report measures only the
variants that changed; those run together, in one reference-engine pass (one target load) or
in one vLLM worker (one engine per draft structure, the EAGLE-3.1 variants swapped into one,
plus `smoke:no-speculation`, the target alone, when per-user tokens/s are measured). Each record
holds a one-draft `SmokeReport.to_dict()`, the shape `smoke --json` prints; the report's
`acceptance` block is all of them, read back by `measure/reader.py` and joined with the first (the
input EAGLE-3 draft) as baseline.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.measure import (
    NO_SPEC,
    DraftResult,
    EngineRates,
    Measure,
    PromptSet,
    SmokeReport,
    ThroughputReport,
    deltas,
    k_sweep,
    measure_drafts,
    prepare_smoke_prompts,
    read_drafts,
    with_vllm_costs,
)
from eagle_convert.progress import OnTick
from eagle_convert.report.cache import StageRecord
from eagle_convert.report.stages import ReportOptions, smoke_command

if TYPE_CHECKING:
    from eagle_convert.report.runner import Runner, Variant
    from eagle_convert.vllm_model import Release

BASELINE_STAGE = "smoke:no-speculation"


def engine_build(engine: str) -> str:
    """The engine build the measurements depend on (part of every measuring stage's key)."""
    if engine == "vllm":
        from eagle_convert.vllm_model import vllm_version

        return f"vllm {vllm_version()}"
    import torch

    return f"torch {torch.__version__}"


def prompts_digest(pset: PromptSet) -> str:
    """A digest of the tokenized prompts: part of every measuring stage's key."""
    rows = [[p.id, p.category, p.bucket, p.token_ids] for p in pset.prompts]
    return hashlib.sha256(json.dumps([pset.chat_template, rows]).encode()).hexdigest()


def _single(
    target: Path,
    engine: str,
    version: str | None,
    settings: dict[str, Any],
    pset: PromptSet,
    d: DraftResult,
    seconds: float,
) -> dict[str, Any]:
    return SmokeReport(str(target), engine, version, settings, pset, [d], [], seconds).to_dict()


def _measure(
    pending: Sequence[tuple[Variant, str]],
    target: Path,
    m: Measure,
    release: Release,
    pset: PromptSet,
    baseline: bool,
    say: Any,
    on_tick: OnTick | None = None,
) -> tuple[list[tuple[dict[str, Any], float]], dict[str, Any] | None]:
    """The pending variants on one engine (and, vLLM with `baseline`, the target alone): each
    variant's record result and seconds, and the target alone's record result."""
    t0 = time.perf_counter()
    measured = measure_drafts(
        target,
        [v.path for v, _ in pending],
        pset,
        m,
        release,
        labels=[v.name for v, _ in pending],
        baseline=baseline,
        say=say,
        on_tick=on_tick,
        k_sweep=True,
    )
    vm = measured.vllm
    settings = m.settings(pset.chat_template)
    if vm is None:  # the reference engine runs on one device
        ref: list[tuple[dict[str, Any], float]] = []
        for d in measured.drafts:
            seconds = (d.total.seconds or 0.0) + (d.load_seconds or 0.0)
            acc = _single(target, "reference", measured.version, settings, pset, d, seconds)
            ref.append(({"acceptance": acc, "rates": None}, seconds))
        return ref, None
    from eagle_convert.measure import engine_device

    per = (time.perf_counter() - t0) / max(len(pending) + int(baseline), 1)  # of the whole measuring run
    out: list[tuple[dict[str, Any], float]] = [
        (
            {
                "acceptance": _single(target, "vllm", vm.version, settings, pset, d, per),
                "rates": dm.rates.to_dict() if dm.rates else None,
                "engine_starts": vm.engine_starts,
                "draft_swaps": vm.draft_swaps,
            },
            per,
        )
        for d, dm in zip(measured.drafts, vm.drafts)
    ]
    base = None
    if vm.baseline is not None:
        base = {
            "rates": vm.baseline.to_dict(),
            "engine_version": vm.version,
            "device": engine_device(),
            "settings": vm.engine_settings,
        }
    return out, base


def pending_variants(
    r: Runner,
    stage: str,
    variants: Sequence[Variant],
    options: dict[str, Any],
    digests: dict[str, str],
    d_target: str,
    pdig: str,
) -> list[tuple[Variant, str]]:
    """The variants whose `stage:NAME` record is stale, with their new keys; the fresh ones are
    recorded as skipped. The key covers the options, the variant's draft, the target and the prompts."""
    pending: list[tuple[Variant, str]] = []
    for v in variants:
        inputs = {"draft": digests[v.name], "target": d_target, "prompts": pdig}
        key, rec = r.cached(f"{stage}:{v.name}", options, inputs)
        if rec is not None:
            r.done(rec, "skipped")
        else:
            pending.append((v, key))
    return pending


def measure_variants(
    r: Runner,
    variants: Sequence[Variant],
    digests: dict[str, str],
    target: Path,
    d_target: str,
    opts: ReportOptions,
    m: Measure,
    release: Release,
) -> SmokeReport:
    """Measure the variants whose inputs changed with `m` (`opts.measure` resolved) and the vLLM
    `release` the report is for; return every variant's acceptance side by side."""
    t0 = time.perf_counter()
    pset = prepare_smoke_prompts(
        target, m.suite, k=m.k, max_new_tokens=m.max_new_tokens, buckets=m.buckets, chat_template=m.chat_template
    )
    options = {  # the stage key: these names and this order since the first reports
        "engine": m.engine,
        "k": m.k,
        "max_new_tokens": m.max_new_tokens,
        "temperature": m.temperature,
        "seed": m.seed,
        "buckets": list(m.buckets),
        "chat_template": m.chat_template,
        "tensor_parallel_size": m.tensor_parallel_size,
        "categories": list(opts.measure.categories),
        "limit": opts.measure.limit,
        "build": engine_build(m.engine),
        "concurrency": list(m.concurrency),
    }
    if m.served is not None:  # absent otherwise: the stage keys of reports without it stay
        options["speculative_config"] = m.served
    asked = replace(opts.measure, engine=m.engine, concurrency=m.concurrency)  # what commands.sh writes
    pdig = prompts_digest(pset)
    pending = pending_variants(r, "smoke", variants, options, digests, d_target, pdig)
    base_key = base_rec = None
    if m.engine == "vllm" and m.concurrency:
        base_key, base_rec = r.cached(BASELINE_STAGE, options, {"target": d_target, "prompts": pdig})
        if base_rec is not None:
            r.done(base_rec, "skipped")
    need_base = base_key is not None and base_rec is None
    if pending or need_base:
        r.say(f"report: measuring {', '.join(v.name for v, _ in pending) or 'the target alone'} ({m.engine} engine)")
        results, base = _measure(pending, target, m, release, pset, need_base, r.say, r.on_tick)
        for (v, key), (result, seconds) in zip(pending, results):
            r.done(
                StageRecord(f"smoke:{v.name}", key, result, {}, seconds, smoke_command(target, [v.path], asked)),
                "ran",
            )
        if need_base and base is not None:
            assert base_key is not None
            drafts = [v.path for v, _ in pending] or [variants[0].path]  # smoke needs a draft; any will do
            r.done(StageRecord(BASELINE_STAGE, base_key, base, {}, 0.0, smoke_command(target, drafts, asked)), "ran")
    return _combine(r, variants, target, m, pset, time.perf_counter() - t0)


def _combine(
    r: Runner,
    variants: Sequence[Variant],
    target: Path,
    m: Measure,
    pset: PromptSet,
    seconds: float,
) -> SmokeReport:
    drafts, versions = [], []
    for v in variants:
        acc = r.records[f"smoke:{v.name}"].result["acceptance"]
        [d] = read_drafts(acc, f"stage smoke:{v.name}")
        d.label, d.path = v.name, str(v.path)  # where it is now (a report folder may have moved)
        drafts.append(d)
        versions.append(acc.get("engine_version"))
    settings = r.records[f"smoke:{variants[0].name}"].result["acceptance"]["settings"]
    tput = None
    base = r.records.get(BASELINE_STAGE)
    if base is not None:
        rates = [EngineRates.from_dict(r.records[f"smoke:{v.name}"].result["rates"]) for v in variants]
        tput = ThroughputReport(
            list(m.concurrency),
            EngineRates.from_dict(base.result["rates"]),
            rates,
            base.result["device"],
            base.result["engine_version"],
            base.result["settings"],
        )
        assert tput.baseline.label == NO_SPEC
    for d in drafts:  # a stage recorded before the k sweep: AL per k from its counters, no step costs
        if d.k_sweep is None and d.total.accepted_per_pos:
            d.k_sweep = k_sweep(d.total)
    if tput is not None and 1 in tput.concurrency:
        with_vllm_costs(drafts, tput, len(drafts[0].total.accepted_per_pos) or m.k)
    version = versions[0] if len(set(versions)) == 1 else " / ".join(dict.fromkeys(str(x) for x in versions))
    return SmokeReport(str(target), m.engine, version, settings, pset, drafts, deltas(drafts), seconds, tput)
