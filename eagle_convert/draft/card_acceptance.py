"""The model card's measured acceptance: the rows, read from `smoke --json` (the shape `report` also
writes), and their Markdown table. Split from `card.py`, which renders the rest of the card."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AcceptanceRow:
    """One draft's measured acceptance: AL = 1 + accepted / drafts; position i = rounds whose first
    i+1 drafts were accepted / rounds (vLLM 0.32.0 `v1/spec_decode/metrics.py`)."""

    label: str
    acceptance_length: float
    per_position: Sequence[float]
    acceptance_rate: float | None = None
    requests: int | None = None
    this: bool = False  # the row of the draft the card describes
    k_sweep: Mapping[str, Any] | None = None  # smoke --json's `k_sweep` of this draft (every k <= K)


@dataclass(frozen=True)
class AcceptanceTable:
    rows: Sequence[AcceptanceRow]
    k: int
    engine: str  # "reference" | "vllm"
    prompts: str  # e.g. "15 prompts, chat template target"
    settings: str = ""  # e.g. "T=0, 64 new tokens"
    engine_version: str | None = None
    notes: Sequence[str] = field(default_factory=tuple)


def acceptance_lines(table: AcceptanceTable) -> list[str]:
    """The measured-acceptance table as Markdown, with the line saying how it was measured."""
    k = max([table.k, *(len(r.per_position) for r in table.rows)])
    head = ["draft", "AL", *(f"position {i + 1}" for i in range(k)), "acceptance rate"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.rows:
        pos = [f"{p:.3f}" for p in r.per_position] + ["—"] * (k - len(r.per_position))
        rate = "—" if r.acceptance_rate is None else f"{r.acceptance_rate:.3f}"
        label = f"**{r.label}** (this draft)" if r.this else r.label
        lines.append("| " + " | ".join([label, f"{r.acceptance_length:.3f}", *pos, rate]) + " |")
    version = f" ({table.engine_version})" if table.engine_version else ""
    where = f"{table.engine} engine{version}, k = {table.k}, {table.prompts}" + (
        f", {table.settings}" if table.settings else ""
    )
    lines += [
        "",
        (
            f"Measured with `eagle-convert smoke` ({where}). AL = 1 + accepted / draft rounds; position i = "
            "share of rounds whose first i drafts were all accepted (vLLM's definitions)."
        ),
    ]
    lines += [f"{n}" for n in table.notes]
    return lines


def sweep_label(r: AcceptanceRow) -> str:
    return f"**{r.label}** (this draft)" if r.this else r.label


def acceptance_from_smoke(data: dict[str, Any], *, this: str | Path | None = None) -> AcceptanceTable:
    """The acceptance table of a `smoke --json` document (`SmokeReport.to_dict()`); the draft whose
    path resolves to `this` is marked as the card's own."""
    settings = data.get("settings") or {}
    prompts = data.get("prompts") or {}
    mine = Path(this).resolve() if this is not None else None
    rows = []
    for d in data.get("drafts") or []:
        total = d.get("total") or {}
        path = d.get("path")
        rows.append(
            AcceptanceRow(
                label=str(d.get("label")),
                acceptance_length=float(total.get("acceptance_length", 1.0)),
                per_position=[float(p) for p in total.get("per_position") or []],
                acceptance_rate=total.get("acceptance_rate"),
                requests=total.get("requests"),
                this=mine is not None and path is not None and Path(path).resolve() == mine,
                k_sweep=d.get("k_sweep") or None,
            )
        )
    bits = [
        f"T={settings['temperature']}" if "temperature" in settings else "",
        f"{settings['max_new_tokens']} new tokens per prompt" if "max_new_tokens" in settings else "",
    ]
    return AcceptanceTable(
        rows=rows,
        k=int(settings.get("k") or max((len(r.per_position) for r in rows), default=0)),
        engine=str(data.get("engine") or "?"),
        engine_version=data.get("engine_version"),
        prompts=f"{prompts.get('count', '?')} prompts, chat template {prompts.get('chat_template', '?')}",
        settings=", ".join(b for b in bits if b),
    )
