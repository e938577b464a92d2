"""`report`'s drift stages: attention drift by draft depth of every variant, beside its acceptance.

One stage per variant (`drift:NAME`), keyed like `smoke:NAME` (the variant's content hash, the
target's, the token ids of every prompt x bucket as drift prepares them, the drift settings and
the torch build), so a resumed report re-measures only the variants that changed; those run in
one `run_drift` call (one reference target load), whatever engine the acceptance was measured
with: drift reads the draft layer's attention and fed-back state, which only the reference
engine exposes. Each record holds a one-draft `DriftReport.to_dict()`, the shape `drift --json`
prints; the report's `drift` block is all of them in variant order, labelled by variant name.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.measure import prepare_smoke_prompts
from eagle_convert.optionspec import to_argv
from eagle_convert.report.cache import StageRecord
from eagle_convert.report.measure import engine_build, pending_variants, prompts_digest
from eagle_convert.report.stages import ReportOptions, command

if TYPE_CHECKING:
    from eagle_convert.measure import Suite
    from eagle_convert.report.runner import Runner, Variant


def drift_command(target: Path, drafts: Sequence[Path], opts: ReportOptions) -> str:
    """The `drift` command that measures `drafts` as the report did (same prompts, buckets, depth)."""
    return command("drift", *drafts, "--target", target, *to_argv(opts.drift_options()), "--json")


def drift_variants(
    r: Runner,
    variants: Sequence[Variant],
    digests: dict[str, str],
    target: Path,
    d_target: str,
    opts: ReportOptions,
    suite: Suite,
) -> dict[str, Any]:
    """Measure the drift of the variants whose inputs changed; return every variant's side by side.

    Returns:
        A `drift --json` dict (schemas/drift-report.schema.json), one draft per variant, in order.
    """
    from eagle_convert.drift import run_drift

    d = opts.drift_options()
    template = opts.measure.chat_template
    pset = prepare_smoke_prompts(
        target, suite, k=d.depth, max_new_tokens=d.max_new_tokens, buckets=d.buckets, chat_template=template
    )
    options = {
        "depth": d.depth,
        "sink_tokens": d.sink_tokens,
        "max_new_tokens": d.max_new_tokens,
        "buckets": list(d.buckets),
        "chat_template": template,
        "build": engine_build("reference"),
    }
    pdig = prompts_digest(pset)
    pending = pending_variants(r, "drift", variants, options, digests, d_target, pdig)
    if pending:
        r.say(f"report: drift of {', '.join(v.name for v, _ in pending)} (reference engine, depth {d.depth})")
        t0 = time.perf_counter()
        rep = run_drift(
            target,
            [v.path for v, _ in pending],
            d,
            prompts=suite,
            labels=[v.name for v, _ in pending],
            progress=r.say,
            on_tick=r.on_tick,
        )
        share = (time.perf_counter() - t0 - sum(d.seconds for d in rep.drafts)) / len(pending)  # the target load
        whole = rep.to_dict()
        for (v, key), d in zip(pending, whole["drafts"]):
            one = {**whole, "drafts": [d], "seconds": d["seconds"] + share}
            cmd = drift_command(target, [v.path], opts)
            r.done(StageRecord(f"drift:{v.name}", key, one, {}, one["seconds"], cmd), "ran")
    return _combine(r, variants)


def _combine(r: Runner, variants: Sequence[Variant]) -> dict[str, Any]:
    """The variants' records as one `drift --json` dict (the first record's settings and engine)."""
    records = [r.records[f"drift:{v.name}"].result for v in variants]
    drafts = []
    for v, rec in zip(variants, records):
        d = dict(rec["drafts"][0])
        d["label"], d["path"] = v.name, str(v.path)  # where it is now (a report folder may have moved)
        drafts.append(d)
    engines = list(dict.fromkeys(rec["engine"] for rec in records))
    return {
        **records[0],
        "engine": " / ".join(engines),
        "drafts": drafts,
        "seconds": sum(rec["seconds"] for rec in records),
    }
