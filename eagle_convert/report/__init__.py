"""`report`: inspect, upgrade (identity and calibrated), fine-tune, validate and measure one draft, side by side."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.report.run import ReportResult, run_report
    from eagle_convert.report.stages import ReportOptions
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "ReportResult": "eagle_convert.report.run",
            "run_report": "eagle_convert.report.run",
            "ReportOptions": "eagle_convert.report.stages",
        },
    )

__all__ = [
    "ReportOptions",
    "ReportResult",
    "run_report",
]
