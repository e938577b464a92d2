"""`report`: inspect, upgrade (identity and calibrated), fine-tune, validate and measure one draft, side by side."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.report.run import ReportResult, run_report
    from eagle_convert.report.stages import ReportOptions
else:
    __getattr__, __dir__ = attach(__name__, __file__)
