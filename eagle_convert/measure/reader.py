"""Read `smoke --json` back: one reader for smoke's output and for `report.json`'s `acceptance`.

`SmokeReport.to_dict()` is the one acceptance shape the project writes (smoke --json, the report's
`acceptance` block, the report's cached per-variant smoke stages). `read_drafts` turns its `drafts`
list back into `DraftResult`s with the same counters, so AL, rates and per-position acceptance
are recomputed by `vllm_model/acceptance.py` rather than trusted from the rounded numbers, and
`check_smoke_dict` checks the whole shape with one-line errors that name the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eagle_convert.errors import ConfigError
from eagle_convert.measure.control import Comparison, Divergence, SamplingControl
from eagle_convert.measure.ksweep import KSweep, StepCosts, k_sweep
from eagle_convert.measure.results import Counts, DraftResult, Group, RequestResult

_TOP = ("target", "engine", "engine_version", "settings", "prompts", "drafts", "deltas")
_COUNTERS = (
    "requests",
    "prompt_tokens",
    "generated_tokens",
    "num_drafts",
    "num_draft_tokens",
    "num_accepted",
    "target_forwards",
)
_DRAFT = ("label", "path", "variant", "per_request", "total", "groups", "requests")
# Derived values written next to the counters; checked against them (to 4 decimals, as written).
_DERIVED = ("acceptance_length", "acceptance_rate")


def _need(d: Any, keys: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    if missing:
        raise ConfigError(f"{where}: missing field {missing[0]!r} (not the shape `eagle-convert smoke --json` writes)")
    return d


def counts_from_dict(d: Any, where: str = "counts") -> Counts:
    """A `Counts` from `Counts.to_dict()`; its AL and rate must agree with its counters."""
    d = _need(d, (*_COUNTERS, "accepted_per_pos", *_DERIVED), where)
    try:
        c = Counts(
            **{k: int(d[k]) for k in _COUNTERS},
            accepted_per_pos=[int(x) for x in d["accepted_per_pos"]],
            seconds=None if d.get("seconds") is None else float(d["seconds"]),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: a counter is not a number ({exc})") from None
    for name in _DERIVED:
        if abs(float(d[name]) - getattr(c, name)) > 1e-3:  # written rounded to 4 decimals
            raise ConfigError(f"{where}: {name} {d[name]} disagrees with the counters ({getattr(c, name):.4f})")
    return c


def _control(d: Any, where: str) -> SamplingControl | None:
    if d is None:
        return None
    d = _need(d, ("temperature", "with_speculation"), where)

    def comparison(c: Any, w: str) -> Comparison | None:
        if c is None:
            return None
        c = _need(c, ("compared", "identical", "divergences"), w)
        fields = ("prompt", "position", "expected", "got", "margin", "tolerance", "runner_up", "excused")
        divs = [Divergence(**{f: _need(x, fields, f"{w}.divergences")[f] for f in fields}) for x in c["divergences"]]
        return Comparison(int(c["compared"]), int(c["identical"]), divs)

    with_spec = comparison(d["with_speculation"], f"{where}.with_speculation")
    assert with_spec is not None
    return SamplingControl(
        float(d["temperature"]),
        with_spec,
        comparison(d.get("without_speculation"), f"{where}.without_speculation"),
        d.get("cause"),
    )


def read_drafts(data: Any, where: str = "smoke report") -> list[DraftResult]:
    """The `drafts` of a smoke --json object (or of report.json's `acceptance`) as `DraftResult`s."""
    data = check_smoke_dict(data, where)
    out = []
    for i, d in enumerate(data["drafts"]):
        w = f"{where}: drafts[{i}]"
        d = _need(d, _DRAFT, w)
        groups = []
        for j, g in enumerate(d["groups"]):
            g = _need(g, ("category", "bucket"), f"{w}.groups[{j}]")
            bucket = None if g["bucket"] is None else int(g["bucket"])
            groups.append(Group(str(g["category"]), bucket, counts_from_dict(g, f"{w}.groups[{j}]")))
        reqs = []
        for j, r in enumerate(d["requests"]):
            r = _need(r, ("id", "category", "bucket"), f"{w}.requests[{j}]")
            counts = counts_from_dict(r, f"{w}.requests[{j}]") if "num_drafts" in r else None
            reqs.append(RequestResult(str(r["id"]), str(r["category"]), int(r["bucket"]), counts))
        total = counts_from_dict(d["total"], f"{w}.total")
        out.append(
            DraftResult(
                str(d["label"]),
                str(d["path"]),
                d["variant"],
                total,
                groups,
                reqs,
                bool(d["per_request"]),
                d.get("load_seconds"),
                _control(d.get("sampling_control"), f"{w}.sampling_control"),
                _sweep(d.get("k_sweep"), total, f"{w}.k_sweep"),
            )
        )
    return out


def _sweep(d: Any, total: Counts, where: str) -> KSweep | None:
    """The k sweep again from the total's counters and the written step costs (not the rounded rows)."""
    if d is None:
        return None
    d = _need(d, ("k_max", "step_costs"), where)
    if int(d["k_max"]) != len(total.accepted_per_pos):
        raise ConfigError(
            f"{where}: k_max {d['k_max']} disagrees with the total's {len(total.accepted_per_pos)} positions"
        )
    costs = d["step_costs"]
    try:
        return k_sweep(
            total, StepCosts.from_dict(_need(costs, ("draft_s", "target_s"), f"{where}.step_costs")) if costs else None
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def check_smoke_dict(data: Any, where: str = "smoke report") -> Mapping[str, Any]:
    """`data` if it has the shape `SmokeReport.to_dict()` writes, else ConfigError naming the field."""
    data = _need(data, _TOP, where)
    _need(data["settings"], ("k", "max_new_tokens", "temperature", "seed", "buckets"), f"{where}: settings")
    _need(data["prompts"], ("count", "items"), f"{where}: prompts")
    if not isinstance(data["drafts"], list) or not data["drafts"]:
        raise ConfigError(f"{where}: drafts must be a non-empty list")
    labels = [_need(d, ("label",), f"{where}: drafts[{i}]")["label"] for i, d in enumerate(data["drafts"])]
    for i, x in enumerate(data["deltas"]):
        x = _need(x, ("draft", "baseline", "acceptance_length"), f"{where}: deltas[{i}]")
        if x["draft"] not in labels or x["baseline"] not in labels:
            raise ConfigError(f"{where}: deltas[{i}] names a draft that is not in drafts")
    return data
