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

from eagle_convert.measure import format_buckets, prepare_smoke_prompts
from eagle_convert.report.cache import StageRecord
from eagle_convert.report.measure import engine_build, pending_variants, prompts_digest
from eagle_convert.report.stages import ReportOptions, command, smoke_prompts

if TYPE_CHECKING:
    from eagle_convert.report.runner import Runner, Variant

__all__ = ["SINK_TOKENS", "drift_command", "drift_variants"]

SINK_TOKENS = 4  # drift's --sink-tokens default: the report measures what `drift` shows by default


def drift_command(target: Path, drafts: Sequence[Path], opts: ReportOptions) -> str:
    """The `drift` command that measures `drafts` as the report did (same prompts, buckets, depth)."""
    args: list[str | Path] = ["drift", *drafts, "--target", target]
    if opts.prompts:  # a path as a path, a suite name as it is (drift reads what smoke reads)
        args += ["--prompts", Path(opts.prompts) if Path(opts.prompts).exists() else opts.prompts]
    for c in opts.categories:
        args += ["--category", c]
    if opts.limit:
        args += ["--limit", str(opts.limit)]
    args += [
        "--depth",
        str(opts.drift_depth),
        "--sink-tokens",
        str(SINK_TOKENS),
        "--max-new-tokens",
        str(opts.max_new_tokens),
        "--buckets",
        format_buckets(opts.buckets),
    ]
    if opts.chat_template:
        args += ["--chat-template", opts.chat_template]
    return command(*args, "--json")


def drift_variants(
    r: Runner,
    variants: Sequence[Variant],
    digests: dict[str, str],
    target: Path,
    d_target: str,
    opts: ReportOptions,
) -> dict[str, Any]:
    """Measure the drift of the variants whose inputs changed; return every variant's side by side.

    Returns:
        A `drift --json` dict (schemas/drift-report.schema.json), one draft per variant, in order.
    """
    from eagle_convert.drift import run_drift

    suite = smoke_prompts(opts)
    pset = prepare_smoke_prompts(
        target,
        suite,
        k=opts.drift_depth,
        max_new_tokens=opts.max_new_tokens,
        buckets=opts.buckets,
        chat_template=opts.chat_template,
    )
    options = {
        "depth": opts.drift_depth,
        "sink_tokens": SINK_TOKENS,
        "max_new_tokens": opts.max_new_tokens,
        "buckets": list(opts.buckets),
        "chat_template": opts.chat_template,
        "build": engine_build("reference"),
    }
    pdig = prompts_digest(pset)
    pending = pending_variants(r, "drift", variants, options, digests, d_target, pdig)
    if pending:
        r.say(f"report: drift of {', '.join(v.name for v, _ in pending)} (reference engine, depth {opts.drift_depth})")
        t0 = time.perf_counter()
        rep = run_drift(
            target,
            [v.path for v, _ in pending],
            prompts=suite,
            depth=opts.drift_depth,
            sink_tokens=SINK_TOKENS,
            max_new_tokens=opts.max_new_tokens,
            buckets=opts.buckets,
            chat_templates=[opts.chat_template],
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
