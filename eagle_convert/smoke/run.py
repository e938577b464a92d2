"""`smoke`: acceptance length and per-position acceptance of EAGLE-3 drafts against a target.

Pure orchestration that returns data: prompts are rendered and tokenized once (`measure/prompts.py`),
each draft decodes them with the reference engine (torch, `reference/`) or vLLM (drafts of one
structure share an engine start; both through `measure/run.py`), and the counters are summed per
draft x category x context bucket into the data model of `measure/results.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eagle_convert.draft import local_checkpoint
from eagle_convert.errors import UsageError
from eagle_convert.extras import require
from eagle_convert.measure import (
    ENGINES,
    SMOKE_MODULES,
    MeasureOptions,
    Prompt,
    SmokeReport,
    Suite,
    deltas,
    measure_drafts,
    prepare_smoke_prompts,
    resolve_suite,
    select_suite,
    smoke_settings,
    with_vllm_costs,
)
from eagle_convert.progress import OnTick

__all__ = ["resolve_serve_config", "run_smoke"]


# ------------------------------------------------------------------------------- helpers


# Keys the reference engine follows (it always drafts as method eagle3, at num_speculative_tokens).
REFERENCE_KEYS = ("method", "model", "num_speculative_tokens")


def resolve_serve_config(value: str | dict[str, Any] | None, k: int | None, engine: str) -> tuple[Any, int]:
    """The parsed --speculative-config (None without one) and the k to measure with, as smoke
    and report's measuring stages read them.

    Args:
        value: the --speculative-config value (JSON text, a JSON file, or the object); None: none.
        k: the k asked for (None: the config's, else 3).
        engine: "reference" or "vllm".

    Returns:
        (the `vllm_model.ServeConfig` or None, the k every engine drafts with).

    Raises:
        UsageError: the installed vLLM refuses it, its k contradicts `k`, or the reference engine
            cannot follow one of its keys.
    """
    if value is None:
        return None, 3 if k is None else k
    from eagle_convert.vllm_model import installed_status, parse_serve_config

    serve = parse_serve_config(value, installed_status().rules)
    assert serve is not None  # a value was given
    if k is not None and serve.k is not None and serve.k != k:
        raise UsageError(
            f"{{k={k}}} but {{speculative_config}} num_speculative_tokens is {serve.k}",
            hint="give k once",
            options=("k", "speculative_config"),
        )
    if engine == "reference":
        other = [key for key in serve.data if key not in REFERENCE_KEYS]
        method = serve.method
        if other or method not in (None, "eagle3"):
            what = other[0] if other else f"method {method!r}"
            raise UsageError(
                f"{{speculative_config}}: the reference engine drafts as method eagle3 at num_speculative_tokens "
                f"only; {what} needs {{engine=vllm}}",
                options=("speculative_config", "engine"),
            )
    return serve, serve.k if serve.k is not None else (3 if k is None else k)


# ---------------------------------------------------------------------------------- main


def run_smoke(
    target: str | Path,
    drafts: Sequence[str | Path],
    opts: MeasureOptions | None = None,
    *,
    prompts: Sequence[Prompt] | Suite | None = None,
    progress: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    device: str | None = None,
    k_sweep: bool = False,
) -> SmokeReport:
    """Measure every draft on the same tokenized prompts; the first draft is the baseline of the differences.

    Args:
        target: the target model folder.
        drafts: the drafts to measure, baseline first.
        opts: the measurement settings (default `MeasureOptions()`): the engine ("auto" picks
            `default_engine()`), k (None: the speculative config's, else 3), max_new_tokens,
            temperature, seed, buckets, chat_template, tensor_parallel_size, concurrency (vLLM
            only: per-user tokens/s with each draft and without speculation) and
            speculative_config (read as the installed vLLM reads it: what every vLLM engine runs
            with; its num_speculative_tokens is k).
        prompts: the prompts, or a `Suite` (`measure.resolve_suite`: a `--prompts` value, with
            its long-context prompts cut for this target); None: `opts.prompts`, `opts.categories`
            and `opts.limit` (`measure.select_suite`).
        progress: receives one line per draft started.
        on_tick: a count per prompt (reference) or engine run (vLLM).
        device: places the reference engine ("cpu", "cuda", ...; None: "cuda" when torch sees a
            GPU, else "cpu").
        k_sweep: also each draft's AL and expected speedup at every k <= `k` from this one run, and
            the recommended k (`measure/ksweep.py`): step costs timed on the reference engine, or
            from the per-user rates at concurrency 1 on vLLM (added to `concurrency`).

    Returns:
        The acceptance counters per draft, group and request, with the differences.

    Raises:
        MissingExtraError: the engine's extra (torch, or vLLM) is not installed.
        UsageError: bad settings (an unknown engine, a speculative config whose k differs from `k`,
            no prompt that fits the buckets).
        CheckpointNotFoundError: a target or draft without config.json.
    """
    opts = opts or MeasureOptions()
    t0 = time.perf_counter()
    require("smoke", "smoke", SMOKE_MODULES)  # before default_engine(), which imports torch
    engine = opts.resolved_engine()
    serve, k = resolve_serve_config(opts.speculative_config, opts.k, engine)
    max_new_tokens, temperature, tensor_parallel_size = opts.max_new_tokens, opts.temperature, opts.tensor_parallel_size
    concurrency = opts.concurrency
    for bad, message in (
        (not drafts, "give at least one draft"),
        (engine not in ENGINES, f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})"),
        (k < 1, "--num-speculative-tokens must be at least 1"),
        (max_new_tokens < 1, "--max-new-tokens must be at least 1"),
        (temperature < 0, "--temperature must be >= 0"),
        (tensor_parallel_size < 1, "--tensor-parallel-size must be at least 1"),
        (engine == "reference" and tensor_parallel_size != 1, "--tensor-parallel-size applies to --engine vllm only"),
        (engine == "vllm" and device is not None, "a device applies to --engine reference only"),
        (bool(concurrency) and engine != "vllm", "--concurrency measures per-user tokens/s with --engine vllm only"),
    ):
        if bad:
            raise UsageError(message)
    if engine == "vllm":
        require("vllm", "smoke --engine vllm")
    tdir = local_checkpoint(target, "target", "smoke")
    dpaths = [local_checkpoint(d, "draft", "smoke") for d in drafts]

    if k_sweep and engine == "vllm" and 1 not in concurrency:  # the step costs come from c = 1
        concurrency = tuple(sorted({1, *concurrency}))
    if prompts is None and (opts.prompts is not None or opts.categories or opts.limit is not None):
        prompts = select_suite(resolve_suite(opts.prompts), opts.categories, opts.limit)
    pset = prepare_smoke_prompts(
        tdir, prompts, k=k, max_new_tokens=max_new_tokens, buckets=opts.buckets, chat_template=opts.chat_template
    )
    label = pset.chat_template

    say = progress or (lambda _msg: None)
    run = replace(opts, engine=engine, k=k, concurrency=concurrency)
    measured = measure_drafts(
        tdir, dpaths, pset, run, say=say, on_tick=on_tick, device=device, serve=serve, k_sweep=k_sweep
    )
    results, version = measured.drafts, measured.version
    throughput = None
    if measured.vllm is not None and concurrency:
        from eagle_convert.measure import throughput_report

        throughput = throughput_report(measured.vllm, concurrency)
        if k_sweep:
            with_vllm_costs(results, throughput, k)
    settings = smoke_settings(
        k=k,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=opts.seed,
        buckets=opts.buckets,
        chat_template=label,
        tensor_parallel_size=tensor_parallel_size,
        speculative_config=None if serve is None or not serve.given else serve.data,
    )
    return SmokeReport(
        str(tdir), engine, version, settings, pset, results, deltas(results), time.perf_counter() - t0, throughput
    )
