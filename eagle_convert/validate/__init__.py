"""Findings against vLLM's loader rules: static rule families, the deep scan, the report."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
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
    from eagle_convert.validate.rules.target import open_target
    from eagle_convert.validate.run import ValidationReport, validate_checkpoint
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "Finding": "eagle_convert.validate.findings",
            "code_table": "eagle_convert.validate.findings",
            "AS_TRAINED": "eagle_convert.validate.matrix",
            "FAILS": "eagle_convert.validate.matrix",
            "Matrix": "eagle_convert.validate.matrix",
            "VERDICTS": "eagle_convert.validate.matrix",
            "compatibility_matrix": "eagle_convert.validate.matrix",
            "serving_summary": "eagle_convert.validate.matrix",
            "run_static": "eagle_convert.validate.rules",
            "build_context": "eagle_convert.validate.rules.context",
            "feature_findings": "eagle_convert.validate.rules.engine",
            "from_engine": "eagle_convert.validate.rules.engine",
            "open_target": "eagle_convert.validate.rules.target",
            "ValidationReport": "eagle_convert.validate.run",
            "validate_checkpoint": "eagle_convert.validate.run",
            "validate_for": "eagle_convert.validate.forengine",
            "engine_findings": "eagle_convert.validate.engines",
            "run_validate": "eagle_convert.validate.entry",
            "ValidateOptions": "eagle_convert.validate.options",
            "serve_config_option": "eagle_convert.validate.options",
            "serve_for_option": "eagle_convert.validate.options",
            "speculative_config_option": "eagle_convert.validate.options",
            "vllm_version_option": "eagle_convert.validate.options",
        },
    )

__all__ = [
    "AS_TRAINED",
    "build_context",
    "code_table",
    "compatibility_matrix",
    "engine_findings",
    "FAILS",
    "feature_findings",
    "Finding",
    "from_engine",
    "Matrix",
    "open_target",
    "run_static",
    "run_validate",
    "serve_config_option",
    "serve_for_option",
    "serving_summary",
    "speculative_config_option",
    "validate_checkpoint",
    "validate_for",
    "ValidateOptions",
    "ValidationReport",
    "VERDICTS",
    "vllm_version_option",
]
