"""`DriftReport` read back from its JSON (`drift --json`, report.json's `drift`), so what reads a
recorded measurement (report's drift panel and plot) draws it with the same code as a fresh one.
The reading is derived from the results' declaration (`jsonable.load`), so it cannot drift from
`to_dict`."""

from __future__ import annotations

from typing import Any

from eagle_convert.drift.results import DriftReport
from eagle_convert.errors import ConfigError


def read_drift_report(data: dict[str, Any], where: str = "drift report") -> DriftReport:
    """The `DriftReport` (per-head shares included) that `to_dict()` wrote `data`, a parsed `drift
    --json`, from; ConfigError naming `where` (a file, a report's stage) when a field is missing or
    has the wrong shape."""
    try:
        return DriftReport.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a drift report ({type(exc).__name__}: {exc})") from None
