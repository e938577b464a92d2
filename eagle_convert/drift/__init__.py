"""`drift`: attention drift of a draft as its chain deepens (sink share, fed-back RMS, acceptance by depth)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.drift.crosscheck import RMS_TOLERANCE, CrossCheck, CrossCheckRow
    from eagle_convert.drift.options import DriftOptions
    from eagle_convert.drift.plot import plot_drift, require_drift_plot
    from eagle_convert.drift.reader import read_drift_report
    from eagle_convert.drift.results import DepthRow, DraftDrift, DriftGroup, DriftReport
    from eagle_convert.drift.run import DRIFT_MODULES, run_drift
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "CrossCheck": "eagle_convert.drift.crosscheck",
            "CrossCheckRow": "eagle_convert.drift.crosscheck",
            "RMS_TOLERANCE": "eagle_convert.drift.crosscheck",
            "DriftOptions": "eagle_convert.drift.options",
            "plot_drift": "eagle_convert.drift.plot",
            "require_drift_plot": "eagle_convert.drift.plot",
            "read_drift_report": "eagle_convert.drift.reader",
            "DepthRow": "eagle_convert.drift.results",
            "DraftDrift": "eagle_convert.drift.results",
            "DriftGroup": "eagle_convert.drift.results",
            "DriftReport": "eagle_convert.drift.results",
            "DRIFT_MODULES": "eagle_convert.drift.run",
            "run_drift": "eagle_convert.drift.run",
        },
    )

__all__ = [
    "CrossCheck",
    "CrossCheckRow",
    "DepthRow",
    "DraftDrift",
    "DRIFT_MODULES",
    "DriftGroup",
    "DriftOptions",
    "DriftReport",
    "plot_drift",
    "read_drift_report",
    "require_drift_plot",
    "RMS_TOLERANCE",
    "run_drift",
]
