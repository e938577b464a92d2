"""`drift`: attention drift of a draft as its chain deepens (sink share, fed-back RMS, acceptance by depth)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.drift.crosscheck import RMS_TOLERANCE, CrossCheck, CrossCheckRow
    from eagle_convert.drift.options import DriftOptions
    from eagle_convert.drift.plot import plot_drift, require_drift_plot
    from eagle_convert.drift.results import DepthRow, DraftDrift, DriftGroup, DriftReport, read_drift_report
    from eagle_convert.drift.run import run_drift
else:
    __getattr__, __dir__ = attach(__name__, __file__)
