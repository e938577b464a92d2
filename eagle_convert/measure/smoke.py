"""`smoke`: acceptance length and per-position acceptance of EAGLE-3 drafts against a target.

Pure orchestration that returns data: prompts are rendered and tokenized once (`measure/prompts.py`),
each draft decodes them with the reference engine (torch, `reference/`) or vLLM (drafts of one
structure share an engine start; both through `measure/run.py`), and the counters are summed per
draft x category x context bucket into the data model of `measure/results.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from eagle_convert.draft import local_checkpoint
from eagle_convert.errors import UsageError
from eagle_convert.measure.options import Measure, MeasureOptions
from eagle_convert.measure.prepare import prepare_smoke_prompts
from eagle_convert.measure.prompts import Prompt
from eagle_convert.measure.results import SmokeReport, deltas
from eagle_convert.measure.run import measure_drafts, with_vllm_costs
from eagle_convert.measure.suites import Suite
from eagle_convert.progress import OnTick
from eagle_convert.vllm_model import Release, default_release


def run_smoke(
    target: str | Path,
    drafts: Sequence[str | Path],
    opts: MeasureOptions | Measure | None = None,
    *,
    prompts: Sequence[Prompt] | Suite | None = None,
    progress: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    device: str | None = None,
    k_sweep: bool = False,
    release: Release | None = None,
) -> SmokeReport:
    """Measure every draft on the same tokenized prompts; the first draft is the baseline of the differences.

    Args:
        target: the target model folder.
        drafts: the drafts to measure, baseline first.
        opts: the measurement settings (default `MeasureOptions()`), resolved here
            (`MeasureOptions.resolve`: engine, k, speculative config, concurrency, suite) unless
            given as a `Measure` already.
        prompts: the prompts, or a `Suite`, instead of the options' suite.
        progress: receives one line per draft started.
        on_tick: a count per prompt (reference) or engine run (vLLM).
        device: places the reference engine ("cpu", "cuda", ...; None: "cuda" when torch sees a
            GPU, else "cpu").
        k_sweep: also each draft's AL and expected speedup at every k <= `k` from this one run, and
            the recommended k (`measure/ksweep.py`): step costs timed on the reference engine, or
            from the per-user rates at concurrency 1 on vLLM (added to `concurrency`).
        release: the release the engines follow (None: resolved here, at smoke's entry; the CLI passes
            the one it resolved `opts` with).

    Returns:
        The acceptance counters per draft, group and request, with the differences.

    Raises:
        MissingExtraError: the engine's extra (torch, or vLLM) is not installed.
        UsageError: bad settings (`MeasureOptions.resolve`), a tensor parallel size or a device
            for the other engine, no prompt that fits the buckets.
        CheckpointNotFoundError: a target or draft without config.json.
    """
    t0 = time.perf_counter()
    rel = default_release() if release is None else release  # smoke's entry: the installed vLLM's, else the newest
    opts = opts or MeasureOptions()
    m = opts if isinstance(opts, Measure) else opts.resolve("smoke", rel, k_sweep=k_sweep)
    for bad, message, names in (
        (not drafts, "give at least one draft", ()),
        (
            m.engine == "reference" and m.tensor_parallel_size != 1,
            "{tensor_parallel_size} applies to {engine=vllm} only",
            ("tensor_parallel_size", "engine"),
        ),
        (m.engine == "vllm" and device is not None, "a device applies to {engine=reference} only", ("engine",)),
    ):
        if bad:
            raise UsageError(message, options=names)
    tdir = local_checkpoint(target, "target", "smoke")
    dpaths = [local_checkpoint(d, "draft", "smoke") for d in drafts]
    pset = prepare_smoke_prompts(
        tdir,
        m.suite if prompts is None else prompts,
        k=m.k,
        max_new_tokens=m.max_new_tokens,
        buckets=m.buckets,
        chat_template=m.chat_template,
    )
    measured = measure_drafts(
        tdir,
        dpaths,
        pset,
        m,
        rel,
        say=progress or (lambda _msg: None),
        on_tick=on_tick,
        device=device,
        k_sweep=k_sweep,
    )
    results, throughput = measured.drafts, None
    if measured.vllm is not None and m.concurrency:
        from eagle_convert.measure.vllm_measure import throughput_report

        throughput = throughput_report(measured.vllm, m.concurrency)
        if k_sweep:
            with_vllm_costs(results, throughput, m.k)
    return SmokeReport(
        str(tdir),
        m.engine,
        measured.version,
        m.settings(pset.chat_template),
        pset,
        results,
        deltas(results),
        time.perf_counter() - t0,
        throughput,
    )
