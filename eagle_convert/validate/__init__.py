"""Findings against vLLM's loader rules: static rule families, the deep scan, the report."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.validate.engines import engine_findings
    from eagle_convert.validate.entry import run_validate
    from eagle_convert.validate.findings import Finding, code_table
    from eagle_convert.validate.forengine import validate_for
    from eagle_convert.validate.matrix import AS_TRAINED, FAILS, VERDICTS, Matrix, compatibility_matrix, serving_summary
    from eagle_convert.validate.options import (
        ValidateOptions,
        serve_config_option,
        serve_for_option,
        speculative_config_option,
        vllm_version_option,
    )
    from eagle_convert.validate.rules import run_static
    from eagle_convert.validate.rules.context import build_context
    from eagle_convert.validate.rules.engine import feature_findings, from_engine
    from eagle_convert.validate.run import ValidationReport, validate_checkpoint
else:
    __getattr__, __dir__ = attach(__name__, __file__)
