"""What `drift` measured: per draft, per chat template x context bucket, one row per draft depth,
the verdict and its thresholds, and the JSON shape (`schemas/drift-report.schema.json`).

A verdict reads the pooled rows (every template and bucket): a draft *drifts* when, as the chain
deepens, its attention share on the sink tokens falls below `SINK_FALL` times its depth-1 share,
or its fed-back hidden state's RMS grows past `RMS_GROWTH` times its depth-1 RMS (the two
symptoms EAGLE-3.1's `norm_output` and `fc_norm` exist to bound). Either limit is a ratio to
depth 1, so it holds for any hidden size; a draft whose depth-1 sink share is under `SINK_MIN`
has no sink to lose, and only its RMS decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.drift.crosscheck import CrossCheck
from eagle_convert.drift.recorder import AuxSums, DepthSums, DriftRecorder
from eagle_convert.errors import ConfigError
from eagle_convert.jsonable import Jsonable, dump, key

SINK_FALL = 0.5  # drifts when the sink share falls below half its depth-1 value
RMS_GROWTH = 2.0  # drifts when the fed-back RMS grows past twice its depth-1 value
SINK_MIN = 0.1  # below this depth-1 sink share, a fall of the sink share is noise, not drift
REPORT_VERSION = 1


@dataclass(frozen=True)
class DepthRow(Jsonable):
    """One draft depth: mean attention shares (over layers, heads and positions; `per_head`
    [layer][head] in the JSON), mean fed-back RMS and the conditional acceptance."""

    depth: int
    passes: int
    sink: float | None = field(metadata=key("sink_share"))
    context: float | None = field(metadata=key("context_share"))
    own: float | None = field(metadata=key("own_share"))
    fed_rms: float | None
    reached: int
    accepted: int
    per_head: dict[str, list[list[float]]] = field(default_factory=dict, repr=False)

    @property
    def acceptance(self) -> float | None:
        """P(draft at this depth accepted | drafts 1..depth-1 accepted), greedy."""
        return self.accepted / self.reached if self.reached else None

    def to_dict(self) -> dict[str, Any]:
        return dump(self, _DEPTH_KEYS, conditional_acceptance=self.acceptance)


_DEPTH_KEYS = "depth passes sink_share context_share own_share fed_rms reached accepted conditional_acceptance per_head"


@dataclass(frozen=True)
class AuxRow(Jsonable):
    """One aux chunk (target layer id): its mean per-token RMS as given and at the `fc` input."""

    chunk: int
    layer_id: int | None
    rms: float | None
    fc_input_rms: float | None


@dataclass(frozen=True)
class DriftGroup(Jsonable):
    """Rows of one chat template x context bucket (`None`: pooled over all of them)."""

    chat_template: str | None
    bucket: int | None
    prompts: int
    depths: list[DepthRow]
    aux: list[AuxRow]


@dataclass(frozen=True)
class Verdict(Jsonable):
    """`drifts` or `stable`, the one-line text and the figures it was decided on."""

    status: str
    text: str
    sink_first: float | None
    sink_min: float | None
    sink_min_depth: int | None
    rms_growth: float | None
    rms_growth_depth: int | None

    def to_dict(self) -> dict[str, Any]:
        return dump(self, thresholds={"sink_fall": SINK_FALL, "sink_min": SINK_MIN, "rms_growth": RMS_GROWTH})


@dataclass(frozen=True)
class DraftDrift(Jsonable):
    label: str
    path: str
    variant: str | None
    fc_norm: bool
    norm_output: bool
    groups: list[DriftGroup]
    overall: DriftGroup
    verdict: Verdict
    seconds: float
    cross_check: CrossCheck | None = None  # `--cross-check vllm`: the fed-back RMS by depth in vLLM

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "label path variant fc_norm norm_output verdict overall groups seconds cross_check")


@dataclass(frozen=True)
class DriftReport(Jsonable):
    target: str
    engine: str
    settings: dict[str, Any]
    drafts: list[DraftDrift]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"report_version": REPORT_VERSION, **dump(self)}


def read_drift_report(data: dict[str, Any], where: str = "drift report") -> DriftReport:
    """The `DriftReport` (per-head shares included) that `to_dict()` wrote `data`, a parsed `drift
    --json`, from, so a recorded measurement (report's drift panel and plot) is drawn by the same
    code as a fresh one; ConfigError naming `where` (a file, a report's stage) when a field is
    missing or has the wrong shape."""
    try:
        return DriftReport.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a drift report ({type(exc).__name__}: {exc})") from None


def _row(s: DepthSums) -> DepthRow:
    if not s.passes or s.sink is None or s.context is None or s.own is None:
        return DepthRow(s.depth, 0, None, None, None, None, s.reached, s.accepted)
    n = s.passes
    sink, ctx, own = s.sink / n, s.context / n, s.own / n
    per_head = {"sink": sink.tolist(), "context": ctx.tolist(), "own": own.tolist()}
    return DepthRow(
        s.depth,
        n,
        float(sink.mean()),
        float(ctx.mean()),
        float(own.mean()),
        s.fed_rms / n,
        s.reached,
        s.accepted,
        per_head,
    )


def _aux_rows(a: AuxSums, layer_ids: tuple[int, ...] | None) -> list[AuxRow]:
    ids = list(layer_ids or [])
    return [
        AuxRow(
            i,
            ids[i] if i < len(ids) else None,
            a.raw[i] / a.tokens if a.tokens else None,
            a.fc_input[i] / a.tokens if a.tokens and a.fc_input else None,
        )
        for i in range(len(a.raw))
    ]


def group_from(
    rec: DriftRecorder, template: str | None, bucket: int | None, prompts: int, layer_ids: tuple[int, ...] | None
) -> DriftGroup:
    """The rows of one recorder (one group's rounds)."""
    return DriftGroup(template, bucket, prompts, [_row(s) for s in rec.depths], _aux_rows(rec.aux, layer_ids))


def pooled(recs: list[DriftRecorder], depth: int, num_aux: int, sink_tokens: int) -> DriftRecorder:
    """One recorder holding the sums of all `recs` (the overall rows the verdict reads)."""
    out = DriftRecorder(depth, num_aux, sink_tokens)
    out.aux = AuxSums()
    for r in recs:
        for mine, theirs in zip(out.depths, r.depths):
            mine.merge(theirs)
        out.aux.merge(r.aux)
    return out


def verdict(rows: list[DepthRow]) -> Verdict:
    """`drifts` or `stable` from pooled depth rows (module docstring: SINK_FALL, RMS_GROWTH)."""
    seen = [r for r in rows if r.passes and r.sink is not None and r.fed_rms is not None]
    if not seen:
        return Verdict("unmeasured", "unmeasured: no draft pass recorded", None, None, None, None, None)
    first = seen[0]
    assert first.sink is not None and first.fed_rms is not None
    low = min(seen, key=lambda r: r.sink if r.sink is not None else 1.0)
    high = max(seen, key=lambda r: r.fed_rms or 0.0)
    growth = (high.fed_rms or 0.0) / first.fed_rms if first.fed_rms else None
    falls = low.sink is not None and first.sink >= SINK_MIN and low.sink < SINK_FALL * first.sink
    grows = growth is not None and growth > RMS_GROWTH
    last = seen[-1].depth
    sink_text = f"sink share falls from {first.sink:.2f} to {low.sink:.2f} by depth {low.depth}"
    rms_text = f"fed-back RMS grows {growth:.1f}x by depth {high.depth}" if growth is not None else ""
    if falls or grows:
        parts = ([sink_text] if falls else []) + ([rms_text] if grows else [])
        if not falls:
            parts.append(f"sink share {first.sink:.2f} -> {seen[-1].sink:.2f}")
        elif not grows and growth is not None:
            parts.append(f"fed-back RMS {growth:.2f}x")
        status, text = "drifts", "drifts: " + ", ".join(parts)
    else:
        ratio = f", fed-back RMS at most {growth:.2f}x" if growth is not None else ""
        status = "stable"
        text = f"stable over depths 1-{last}: sink share {first.sink:.2f} -> {seen[-1].sink:.2f}{ratio}"
    return Verdict(status, text, first.sink, low.sink, low.depth, growth, high.depth)
