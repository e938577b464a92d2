"""Measuring acceptance: `run_smoke` (the `smoke` command's one library call) and what check,
report and drift share with it: prompt sets, counters and results, the reference engine, vLLM pass
planning with the fewest engine starts, the controls and throughput; the plots and the plot style
every command's pictures share (`style.py`)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.measure.control import Comparison, SamplingControl, compare_outputs, repetition_loop
    from eagle_convert.measure.engines import draft_from_pass, run_reference
    from eagle_convert.measure.ksweep import KSweep, StepCosts, k_sweep
    from eagle_convert.measure.options import (
        ENGINES,
        Measure,
        MeasureOptions,
        default_engine,
        format_buckets,
    )
    from eagle_convert.measure.passes import (
        CONTROL_EPS,
        CONTROL_GREEDY,
        GREEDY,
        MAIN,
        MIXED,
        Engines,
        draft_passes,
        plan_check_passes,
    )
    from eagle_convert.measure.plot import (
        PLOT_MODULES,
        draft_names,
        plot_grouped_al,
        plot_positions,
        plot_smoke,
        require_plot,
    )
    from eagle_convert.measure.prepare import long_rows, prepare_smoke_prompts
    from eagle_convert.measure.prompts import (
        NATURAL,
        Prompt,
        PromptSet,
        builtin_prompts,
        filler_prefix,
        filler_text,
        load_prompts,
        parse_buckets,
        prepare_prompts,
        resolve_chat_template,
        select_prompts,
    )
    from eagle_convert.measure.provenance import Provenance
    from eagle_convert.measure.reader import read_drafts
    from eagle_convert.measure.results import (
        Counts,
        DraftResult,
        Group,
        SmokeReport,
        deltas,
        draft_labels,
        draft_results,
        smoke_settings,
    )
    from eagle_convert.measure.run import Measured, measure_drafts, with_vllm_costs
    from eagle_convert.measure.smoke import run_smoke
    from eagle_convert.measure.style import (
        bucket_label,
        draft_style,
        finish,
        model_name,
        position_axes,
        smoke_caption,
        stop_notes,
        value_label,
    )
    from eagle_convert.measure.suites import Suite, prompt_items, resolve_suite, select_suite
    from eagle_convert.measure.throughput import (
        NO_SPEC,
        EngineRates,
        LevelRate,
        ThroughputReport,
        parse_concurrency,
    )
    from eagle_convert.measure.vllm_measure import (
        engine_device,
        max_model_len_for,
        measure_vllm,
        sampling_control,
        target_dtype,
    )
else:
    __getattr__, __dir__ = attach(__name__, __file__)
