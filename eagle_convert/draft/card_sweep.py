"""The k sweep as Markdown, for the model card and `report`'s page: each draft's AL at every
k <= K from one run at K (each round's accepted count capped at k) and, where the step costs
were measured, the expected speedup per k and the recommended k.

Rendered from the `k_sweep` object `smoke --json` writes per draft (`measure/ksweep.py` makes it),
so the card needs nothing above this layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NOTE = (
    "One run at k = {k}; AL at a smaller k caps each round's accepted count at that k. A run at that k "
    "would have other round boundaries (each round starting where the previous one ended), so the "
    "estimate can differ from it slightly (measured within 0.1 AL, mostly low, on the project's trained "
    "test pair). Expected speedup = AL(k) x t_target / (t_target + k x (t_draft + t_verify_extra)), "
    "step costs measured in the same run ({source})."
)


def _speed(x: Any) -> str:
    return "—" if x is None else f"×{float(x):.2f}"


def k_sweep_lines(sweeps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """A table with one row per (label, `k_sweep` dict): AL at each k, the expected speedup at
    each k where measured, and the recommended k; then the estimator note. [] without sweeps."""
    if not sweeps:
        return []
    k_max = max(int(s["k_max"]) for _, s in sweeps)
    head = ["draft", *(f"k = {k}" for k in range(1, k_max + 1)), "recommended k"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sources = []
    for label, s in sweeps:
        rows = {int(r["k"]): r for r in s["rows"]}
        cells = []
        for k in range(1, k_max + 1):
            r = rows.get(k)
            if r is None:
                cells.append("—")
                continue
            speed = "" if r.get("expected_speedup") is None else f" ({_speed(r['expected_speedup'])})"
            cells.append(f"{float(r['acceptance_length']):.2f}{speed}")
        rk = s.get("recommended_k")
        rec = "— (no step costs)" if rk is None else f"**{rk}** ({_speed(s.get('recommended_speedup'))})"
        if rk is not None and s.get("at_edge"):
            rec += ", the largest measured"
        lines.append("| " + " | ".join([label, *cells, rec]) + " |")
        costs = s.get("step_costs")
        if costs and costs.get("source"):
            sources.append(str(costs["source"]))
    k_run = ", ".join(dict.fromkeys(str(s["k_max"]) for _, s in sweeps))
    source = "; ".join(dict.fromkeys(sources)) or "not measured: AL per k only"
    return [
        *lines,
        "",
        "Cells: AL (expected speedup over the target alone). " + NOTE.format(k=k_run, source=source),
    ]
