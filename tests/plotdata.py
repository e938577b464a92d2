"""Measurements shaped like `make demo`'s report (four variants whose numbers nearly coincide, two
context buckets, one category per long-context bucket), for the picture tests: the crowded case is
where labels collide and lines hide each other. Built from the result classes directly, no engine."""

from __future__ import annotations

from eagle_convert.drift.results import DepthRow, DraftDrift, DriftGroup, DriftReport, verdict
from eagle_convert.measure.prompts import NATURAL, PreparedPrompt, PromptSet
from eagle_convert.measure.results import Counts, DraftResult, RequestResult, SmokeReport, deltas

K = 3
LABELS = ("eagle3", "eagle31-identity", "eagle31-calibrated", "eagle31-finetuned")
# (category, bucket) of each prompt: 2 built-in prompts per category, 2 long-context ones at ~1k tokens.
PROMPTS = [(c, NATURAL) for c in ("coding", "chat", "math", "summarization") for _ in range(2)] + [
    ("long-code", 1000),
    ("long-prose", 1000),
]
# Accepted drafts per position and round (out of 10 rounds per request), per variant: eagle3 and the
# identity upgrade accept the same, so their lines and labels meet.
ACCEPTED = {
    "eagle3": [9, 8, 7],
    "eagle31-identity": [9, 8, 7],
    "eagle31-calibrated": [9, 8, 6],
    "eagle31-finetuned": [10, 9, 8],
}


def _counts(accepted: list[int], prompt_tokens: int) -> Counts:
    return Counts(
        requests=1,
        prompt_tokens=prompt_tokens,
        generated_tokens=32,
        num_drafts=10,
        num_draft_tokens=10 * K,
        num_accepted=sum(accepted),
        accepted_per_pos=list(accepted),
        target_forwards=11,
        seconds=1.0,
    )


def smoke_report(*, throughput: bool = False) -> SmokeReport:
    """A four-variant report with per-request counters (categories x 2 buckets)."""
    from eagle_convert.measure.results import _group

    prepared = [
        PreparedPrompt(f"p{i}", cat, bucket, [1] * (1000 if bucket else 40)) for i, (cat, bucket) in enumerate(PROMPTS)
    ]
    pset = PromptSet(prepared, [], "target", suite="builtin+long-context:1k")
    categories = list(dict.fromkeys(c for c, _ in PROMPTS))
    buckets = sorted({b for _, b in PROMPTS})
    drafts = []
    for j, label in enumerate(LABELS):
        reqs = []
        for i, p in enumerate(prepared):
            acc = [max(0, a - (i + j) % 3) for a in ACCEPTED[label]]
            reqs.append(RequestResult(p.id, p.category, p.bucket, _counts(acc, p.num_tokens)))
        total = Counts(accepted_per_pos=[])
        for r in reqs:
            assert r.counts is not None
            total.add(r.counts)
        variant = "EAGLE-3" if label == "eagle3" else "EAGLE-3.1"
        groups = _group(reqs, categories, buckets)
        drafts.append(DraftResult(label, f"/demo-out/report/{label}", variant, total, groups, reqs, True))
    settings = {"k": K, "max_new_tokens": 32, "temperature": 0.0, "seed": 0, "tensor_parallel_size": 1}
    settings["buckets"] = buckets
    rep = SmokeReport("/work/demo-out/trained/target", "reference", "torch 2.8.0 on cpu", settings, pset, drafts, [])
    rep.deltas = deltas(drafts)
    if throughput:
        from eagle_convert.measure.throughput import NO_SPEC, EngineRates, LevelRate, ThroughputReport

        def rates(label: str, path: str | None, tps: list[float]) -> EngineRates:
            return EngineRates(label, path, [LevelRate(c, 4, r, r, r, 0.01, None) for c, r in zip((1, 4), tps)])

        rep.throughput = ThroughputReport(
            [1, 4],
            rates(NO_SPEC, None, [20.0, 12.0]),
            [rates(lb, f"/m/{lb}", [30.0 + j, 15.0 + j / 10]) for j, lb in enumerate(LABELS)],
            "cpu",
            "vllm 0.32.0",
        )
    return rep


def _rows(sink: list[float], rms: list[float], reached: list[int], accepted: list[int]) -> list[DepthRow]:
    return [
        DepthRow(d + 1, 20, s, 0.9 - s, 0.1, r, n, a)
        for d, (s, r, n, a) in enumerate(zip(sink, rms, reached, accepted))
    ]


def drift_report() -> DriftReport:
    """Four variants to depth 6: sink shares of a few hundredths that fall with depth, the two 3.1
    upgrades nearly identical, and conditional acceptance that stops where no round got deeper."""
    depth = 6
    series = {
        # sink share falls 0.031 -> 0.018: on a 0-1 axis every line is flat at the bottom
        "eagle3": ([0.031, 0.027, 0.024, 0.021, 0.019, 0.018], [1.0, 1.3, 1.7, 2.1, 2.4, 2.6], [40, 30, 20, 10, 4, 0]),
        "eagle31-identity": (
            [0.030, 0.029, 0.028, 0.028, 0.027, 0.027],
            [1.0, 1.02, 1.03, 1.03, 1.04, 1.04],
            [40, 28, 16, 6, 0, 0],
        ),
        "eagle31-calibrated": (
            [0.030, 0.029, 0.028, 0.028, 0.027, 0.027],
            [1.0, 1.02, 1.03, 1.04, 1.04, 1.05],
            [40, 29, 17, 7, 0, 0],
        ),
        "eagle31-finetuned": (
            [0.033, 0.032, 0.031, 0.031, 0.030, 0.030],
            [1.0, 1.01, 1.02, 1.02, 1.03, 1.03],
            [40, 34, 26, 18, 9, 3],
        ),
    }
    drafts = []
    for label, (sink, rms, reached) in series.items():
        accepted = [*reached[1:], reached[-1] // 2]
        groups = []
        for bucket in (NATURAL, 1000):
            rows = _rows(sink, rms, reached, accepted)
            groups.append(DriftGroup(None, bucket, 8 if bucket == NATURAL else 2, rows, []))
        overall = DriftGroup(None, None, 10, _rows(sink, rms, reached, accepted), [])
        fc = label != "eagle3"
        variant = "EAGLE-3" if label == "eagle3" else "EAGLE-3.1"
        drafts.append(DraftDrift(label, f"/m/{label}", variant, fc, fc, groups, overall, verdict(overall.depths), 1.0))
    settings = {
        "depth": depth,
        "sink_tokens": 4,
        "max_new_tokens": 32,
        "buckets": [NATURAL, 1000],
        "chat_templates": [None],
        "temperature": 0.0,
        "skipped": 0,
        "cross_check": None,
    }
    return DriftReport("/work/demo-out/trained/target", "reference (torch 2.8.0 on cpu)", settings, drafts, 10.0)
