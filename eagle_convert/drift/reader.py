"""`DriftReport` read back from its JSON (`drift --json`, report.json's `drift`), so what reads a
recorded measurement (report's drift panel and plot) draws it with the same code as a fresh one."""

from __future__ import annotations

from typing import Any

from eagle_convert.drift.crosscheck import CrossCheck, CrossCheckRow
from eagle_convert.drift.results import AuxRow, DepthRow, DraftDrift, DriftGroup, DriftReport, Verdict
from eagle_convert.errors import ConfigError

__all__ = ["read_drift_report"]


def _depth(d: dict[str, Any]) -> DepthRow:
    return DepthRow(
        d["depth"],
        d["passes"],
        d["sink_share"],
        d["context_share"],
        d["own_share"],
        d["fed_rms"],
        d["reached"],
        d["accepted"],
        d.get("per_head") or {},
    )


def _group(g: dict[str, Any]) -> DriftGroup:
    aux = [AuxRow(a["chunk"], a["layer_id"], a["rms"], a["fc_input_rms"]) for a in g["aux"]]
    return DriftGroup(g["chat_template"], g["bucket"], g["prompts"], [_depth(r) for r in g["depths"]], aux)


def _verdict(v: dict[str, Any]) -> Verdict:
    keys = ("status", "text", "sink_first", "sink_min", "sink_min_depth", "rms_growth", "rms_growth_depth")
    return Verdict(*(v[k] for k in keys))


def _cross(c: dict[str, Any] | None) -> CrossCheck | None:
    if c is None:
        return None
    rows = [
        CrossCheckRow(
            r["depth"], r["rounds"], r["reference_rms"], r["vllm_rms"], r["rel_diff"], r["max_round_rel_diff"]
        )
        for r in c["rows"]
    ]
    keys = ("prompts", "identical_prompts", "matched_rounds", "reference_rounds", "vllm_rounds", "seconds")
    return CrossCheck(c["label"], c["path"], c["engine"], c["tolerance"], rows, *(c[k] for k in keys))


def _draft(d: dict[str, Any]) -> DraftDrift:
    return DraftDrift(
        d["label"],
        d["path"],
        d["variant"],
        d["fc_norm"],
        d["norm_output"],
        [_group(g) for g in d["groups"]],
        _group(d["overall"]),
        _verdict(d["verdict"]),
        d["seconds"],
        _cross(d.get("cross_check")),
    )


def read_drift_report(data: dict[str, Any], where: str = "drift report") -> DriftReport:
    """The `DriftReport` that `to_dict()` wrote `data` from.

    Args:
        data: a parsed `drift --json` (schemas/drift-report.schema.json).
        where: names the data in the error (a file, a report's stage).

    Returns:
        The report, equal to the one written (per-head shares included).

    Raises:
        ConfigError: a field is missing or has the wrong shape.
    """
    try:
        drafts = [_draft(d) for d in data["drafts"]]
        return DriftReport(data["target"], data["engine"], dict(data["settings"]), drafts, data["seconds"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a drift report ({type(exc).__name__}: {exc})") from None
