"""`validate --for ENGINE`: one engine release's report, and the rows `--for all` adds to the matrix.

The draft is opened, classified and read as the newest known vLLM release reads it once (the draft as
trained, `run.static_report`); each engine release then costs only its reading of config.json
(`engines.engine_findings`), so a matrix row of SGLang or TensorRT-LLM is cheaper than a vLLM row.
"""

from __future__ import annotations

import time
from pathlib import Path

from eagle_convert.draft import CheckpointRef
from eagle_convert.engines import EngineStatus, GivenServe, read_serve_file, serve_command
from eagle_convert.validate.engine_serve import given_findings, serve_draft
from eagle_convert.validate.engine_weights import draft_weights
from eagle_convert.validate.engines import engine_findings, shared_findings, version_findings
from eagle_convert.validate.run import OpenedDraft, ValidationReport, open_draft, static_report
from eagle_convert.vllm_model import NEWEST_RELEASE, VllmVersionStatus


def reference_report(opened: OpenedDraft, serving_context: int | None = None) -> ValidationReport:
    """The newest known vLLM release's static report: the draft as trained, which engines are compared with."""
    status = VllmVersionStatus(None, NEWEST_RELEASE, "the draft as trained")
    return static_report(opened, status, serving_context=serving_context)


def engine_report(
    opened: OpenedDraft, status: EngineStatus, reference: ValidationReport, given: GivenServe | None = None
) -> ValidationReport:
    """`status`'s engine release (not vLLM) against `reference` (`reference_report` of the same draft);
    `given`: the deployment's own serve config for that engine, checked against its serve command."""
    t0 = time.perf_counter()
    report = ValidationReport(
        reference.source,
        shared_findings(reference.findings),
        [f for f in reference.families_run if f in ("files", "shapes", "producer")] + ["config", "vocab", "engine"],
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

        found = engine_findings(
            opened.ckpt.config,
            ctx.view,
            status.rules,
            target=tgt,
            tensors=tensors,
            aux_weights=weights_aux_count(ctx),
            weights=draft_weights(ctx, reference.findings),
        )
        draft = serve_draft(opened, ctx.view)
        if draft is not None:
            report.serve_commands = [serve_command(draft, status.engine, status.release)]
            if given is not None:
                extra, settled = given_findings(given, draft, status.rules, found)
                found = [f for f in found if f not in settled] + extra
                report.families_run.append("serve")
        report.add(found)
    report.serve_config = given
    report.add(version_findings(status))
    report.timings["engine_rules"] = time.perf_counter() - t0
    return report


def validate_for(
    ref: str | Path | CheckpointRef,
    status: EngineStatus,
    *,
    target: str | Path | None = None,
    serving_context: int | None = None,
    serve_config: str | None = None,
) -> ValidationReport:
    """The static verdict of a draft for one engine release other than vLLM (`validate --for sglang`).

    `serve_config`: a file holding the deployment's SGLang launch command (or its --config YAML) or
    TensorRT-LLM LLM API options YAML, checked against the command that serves the draft as trained.

    Raises:
        UsageError: a `serve_config` that cannot be read as that engine's (`engines.read_serve_file`).
    """
    given = read_serve_file(serve_config, status.engine) if serve_config is not None else None
    t0 = time.perf_counter()
    opened = open_draft(ref, target=target)
    report = engine_report(opened, status, reference_report(opened, serving_context), given)
    report.seconds = time.perf_counter() - t0
    return report
