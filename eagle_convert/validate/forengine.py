"""`validate --for ENGINE`: one engine release's report, and the rows `--for all` adds to the matrix.

The draft is opened, classified and read as the newest known vLLM release reads it once (the draft as
trained, `run.static_report`); each engine release then costs only its reading of config.json
(`engines.engine_findings`), so a matrix row of SGLang or TensorRT-LLM is cheaper than a vLLM row.
"""

from __future__ import annotations

import time
from pathlib import Path

from eagle_convert.draft import CheckpointRef
from eagle_convert.engines import EngineStatus
from eagle_convert.validate.engines import engine_findings, shared_findings, version_findings
from eagle_convert.validate.run import OpenedDraft, ValidationReport, open_draft, static_report
from eagle_convert.vllm_model import NEWEST_RELEASE, VllmVersionStatus


def reference_report(opened: OpenedDraft, serving_context: int | None = None) -> ValidationReport:
    """The newest known vLLM release's static report: the draft as trained, which engines are compared with."""
    status = VllmVersionStatus(None, NEWEST_RELEASE, "the draft as trained")
    return static_report(opened, status, serving_context=serving_context)


def engine_report(opened: OpenedDraft, status: EngineStatus, reference: ValidationReport) -> ValidationReport:
    """`status`'s engine release (not vLLM) against `reference` (`reference_report` of the same draft)."""
    t0 = time.perf_counter()
    report = ValidationReport(
        reference.source,
        shared_findings(reference.findings),
        [f for f in reference.families_run if f in ("files", "shapes")] + ["config", "vocab", "engine"],
        is_hub=reference.is_hub,
        info=reference.info,
        target=reference.target,
        serving=status,
        timings=dict(reference.timings),
    )
    ctx = opened.last_context
    if opened.classified is not None and ctx is not None:
        tensors = frozenset(opened.ckpt.tensors)
        tgt = opened.target.target if opened.target is not None else None
        from eagle_convert.validate.rules.shapes import weights_aux_count

        report.add(
            engine_findings(
                opened.ckpt.config,
                ctx.view,
                status.rules,
                target=tgt,
                tensors=tensors,
                aux_weights=weights_aux_count(ctx),
            )
        )
    report.add(version_findings(status))
    report.timings["engine_rules"] = time.perf_counter() - t0
    return report


def validate_for(
    ref: str | Path | CheckpointRef,
    status: EngineStatus,
    *,
    target: str | Path | None = None,
    serving_context: int | None = None,
) -> ValidationReport:
    """The static verdict of a draft for one engine release other than vLLM (`validate --for sglang`)."""
    t0 = time.perf_counter()
    opened = open_draft(ref, target=target)
    report = engine_report(opened, status, reference_report(opened, serving_context))
    report.seconds = time.perf_counter() - t0
    return report


__all__ = ["engine_report", "reference_report", "validate_for"]
