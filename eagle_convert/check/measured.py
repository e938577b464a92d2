"""The gate's checks on measured figures: acceptance floors, the baseline, output alarms, output
identity, sampling and drift. Pure functions like `checks.py` (static and feature checks): figures
and policy in, `CheckResult`s out.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.check.checks import CheckResult, fmt_figure, format_value
from eagle_convert.check.policy import Policy
from eagle_convert.measure import NATURAL, Comparison, SamplingControl, repetition_loop

# -------------------------------------------------------------------------------- acceptance


def bucket_label(bucket: int | None) -> str:
    return "natural" if bucket == NATURAL else "all" if bucket is None else str(bucket)


def _floors(spec: Any, names: list[str]) -> dict[str, float]:
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {str(k): float(v) for k, v in spec.items()}
    return {n: float(spec) for n in names}


def _category_and_bucket_groups(cand: Any) -> tuple[list, list]:
    """AL per category (over all buckets) and per bucket (over all categories). With one bucket,
    smoke's (category, bucket) rows are the per-category numbers and the total is the bucket's."""
    from eagle_convert.measure import Group

    ids = {g.bucket for g in cand.groups if g.bucket is not None}
    if len(ids) > 1:
        return (
            [g for g in cand.groups if g.category != "all" and g.bucket is None],
            [g for g in cand.groups if g.category == "all" and g.bucket is not None],
        )
    cats = [g for g in cand.groups if g.category != "all"]
    return cats, [Group("all", b, cand.total) for b in ids]


def position_shortfalls(rates: list[float], floors: list[float]) -> list[str]:
    """Each draft position whose acceptance rate is under its floor (or was not measured), as text."""
    return [
        f"position {i + 1}: {rates[i]:.3f} < {f_:.3f}"
        for i, f_ in enumerate(floors)
        if i >= len(rates) or rates[i] < f_
    ]


def acceptance_checks(cand: Any, policy: Policy) -> list[CheckResult]:
    """Floors on mean AL, per-position rates, per category and per context bucket."""
    out = []
    total = cand.total
    al = total.acceptance_length
    floor = policy.get("acceptance", "min_acceptance_length")
    out.append(
        CheckResult(
            "mean acceptance length",
            "acceptance",
            None if floor is None else al >= floor,
            al,
            None if floor is None else f">= {fmt_figure(floor)}",
            f"AL {fmt_figure(al)} over {total.requests} requests ({total.num_drafts} draft rounds)"
            + (
                ""
                if floor is None
                else f"; floor {fmt_figure(floor)}" + ("" if al >= floor else f": {fmt_figure(floor - al)} short")
            ),
        )
    )
    pos_floors = policy.get("acceptance", "min_per_position")
    if pos_floors:
        rates = total.per_position
        bad = position_shortfalls(rates, pos_floors)
        out.append(
            CheckResult(
                "per-position acceptance",
                "acceptance",
                not bad,
                " / ".join(f"{r:.3f}" for r in rates[: len(pos_floors)]),
                ">= " + " / ".join(fmt_figure(x) for x in pos_floors),
                "; ".join(bad) if bad else "every position meets its floor",
            )
        )
    cats, buckets = _category_and_bucket_groups(cand)
    for key, groups, label in (
        ("min_per_category", cats, lambda g: g.category),
        ("min_per_bucket", buckets, lambda g: bucket_label(g.bucket)),
    ):
        spec = policy.get("acceptance", key)
        if spec is None:
            continue
        names = [label(g) for g in groups]
        floors = _floors(spec, names)
        what = "category" if key == "min_per_category" else "bucket"
        if not cand.per_request:
            out.append(
                CheckResult(
                    f"AL per {what}",
                    "acceptance",
                    False,
                    None,
                    str(spec),
                    f"this vLLM gives no per-request counters, so {key} cannot be checked",
                )
            )
            continue
        missing = [n for n in floors if n not in names]
        for g in groups:
            if label(g) not in floors:
                continue
            v, fl = g.counts.acceptance_length, floors[label(g)]
            out.append(
                CheckResult(
                    f"AL {what} {label(g)}",
                    "acceptance",
                    v >= fl,
                    v,
                    f">= {fmt_figure(fl)}",
                    f"AL {fmt_figure(v)} over {g.counts.requests} requests"
                    + ("" if v >= fl else f"; {fmt_figure(fl - v)} below the floor"),
                )
            )
        for n in missing:
            out.append(
                CheckResult(
                    f"AL {what} {n}",
                    "acceptance",
                    False,
                    None,
                    f">= {fmt_figure(floors[n])}",
                    f"no measured {what} {n!r} (measured: {', '.join(names) or 'none'})",
                )
            )
    return out


def baseline_checks(cand: Any, base: Any, policy: Policy) -> list[CheckResult]:
    """The candidate against the production draft on the same prompts in the same engine build."""
    a, b = cand.total.acceptance_length, base.total.acceptance_length
    drop = b - a
    rel = drop / b if b else 0.0
    out = []
    absolute = policy.get("acceptance", "max_acceptance_length_drop")
    relative = policy.get("acceptance", "max_acceptance_length_drop_relative")
    msg = f"candidate AL {fmt_figure(a)} vs baseline {base.label} AL {fmt_figure(b)}: " + (
        f"drop {fmt_figure(drop)} ({rel:.1%})" if drop > 0 else f"gain {fmt_figure(-drop)} ({-rel:.1%})"
    )
    if absolute is None and relative is None:
        out.append(CheckResult("AL vs baseline", "baseline", None, drop, None, msg + " (no allowance in the policy)"))
    if absolute is not None:
        out.append(
            CheckResult("AL drop vs baseline", "baseline", drop <= absolute, drop, f"<= {fmt_figure(absolute)}", msg)
        )
    if relative is not None:
        out.append(
            CheckResult("relative AL drop vs baseline", "baseline", rel <= relative, rel, f"<= {relative:.1%}", msg)
        )
    return out


# ----------------------------------------------------------------------------------- alarms


def alarm_checks(cand: Any, outputs: list[list[int]], k: int, policy: Policy) -> list[CheckResult]:
    """Per-request alarms a mean hides: outputs ending in a repetition loop, AL implausibly high
    (every draft accepted: a loop or a copy task), AL about 1 (the draft proposes garbage)."""
    g = lambda key: policy.get("alarms", key)  # noqa: E731
    n = len(cand.requests)
    loops = []
    for r, toks in zip(cand.requests, outputs):
        loop = repetition_loop(toks, max_period=g("loop_max_period"), min_fraction=g("loop_min_fraction"))
        if loop:
            loops.append(f"{r.prompt_id} (period {loop.period}, last {loop.length} tokens)")
    high_at = g("implausible_acceptance_length") or float(k + 1)
    low_at = g("garbage_acceptance_length")
    per = [(r.prompt_id, r.counts.acceptance_length) for r in cand.requests if r.counts is not None]
    high = [f"{pid} (AL {fmt_figure(al)})" for pid, al in per if al >= high_at]
    low = [f"{pid} (AL {fmt_figure(al)})" for pid, al in per if al <= low_at]
    out = []
    for name, hits, limit, what, denom in (
        ("repetition loops", loops, g("max_loop_fraction"), "outputs end in a loop", n),
        (
            "implausibly high AL",
            high,
            g("max_implausible_fraction"),
            f"requests at AL >= {fmt_figure(high_at)}",
            len(per),
        ),
        ("AL about 1", low, g("max_garbage_fraction"), f"requests at AL <= {fmt_figure(low_at)}", len(per)),
    ):
        if not denom:
            out.append(CheckResult(name, "alarms", None, None, None, "no per-request counters from this engine"))
            continue
        frac = len(hits) / denom
        msg = f"{len(hits)} of {denom} {what}" + (f": {', '.join(hits[:4])}" if hits else "")
        out.append(
            CheckResult(
                name, "alarms", frac <= limit, frac, f"<= {limit:.0%} of requests", msg, details={"requests": hits}
            )
        )
    return out


# ------------------------------------------------------------------------ identity, sampling


def identity_check(name: str, cmp: Comparison, tolerance: str) -> CheckResult:
    """Speculation must not change the target's greedy tokens (near-ties excused: measure/control.py)."""
    bad, excused = cmp.failures, cmp.excused
    if bad:
        msg = f"{len(bad)} of {cmp.compared} prompts change: " + "; ".join(d.describe() for d in bad[:2])
    else:
        msg = f"{cmp.identical} of {cmp.compared} prompts identical token for token" + (
            f", {len(excused)} diverge at a near-tie ({excused[0].describe()})" if excused else ""
        )
    return CheckResult(
        name,
        "identity",
        not bad and cmp.compared > 0,
        f"{len(bad)} of {cmp.compared} differ",
        f"0 ({tolerance})",
        msg,
        details=cmp.to_dict(),
    )


def sampling_check(control: SamplingControl) -> CheckResult:
    """With speculation, T = eps must give the greedy result (the target's distribution is kept)."""
    msg = control.summary()
    if not control.passed:
        msg += ". The engine's speculative sampler does not keep the target's distribution"
        msg += f". Cause: {control.cause}" if control.cause else "; no known cause in this vLLM's source"
    w = control.with_speculation
    return CheckResult(
        "T->0 converges to greedy",
        "sampling",
        control.passed,
        f"{len(w.failures)} of {w.compared} differ",
        f"0 at T={control.temperature:g}",
        msg,
        details=control.to_dict(),
    )


def drift_checks(verdict: Any, policy: Policy) -> list[CheckResult]:
    """[drift] max_rms_growth and min_sink_share against drift's verdict figures (`drift.results.Verdict`)."""
    out = []
    growth, ceiling = verdict.rms_growth, policy.get("drift", "max_rms_growth")
    if ceiling is not None:
        ok = growth is not None and growth <= ceiling
        where = f" (depth {verdict.rms_growth_depth})" if growth is not None else ""
        msg = f"fed-back RMS grows {format_value(growth)}x{where}" + ("" if ok else f" > {ceiling}")
        out.append(CheckResult("drift: fed-back RMS growth", "drift", ok, growth, f"<= {ceiling}", msg))
    sink, floor = verdict.sink_min, policy.get("drift", "min_sink_share")
    if floor is not None:
        ok = sink is not None and sink >= floor
        where = f" (depth {verdict.sink_min_depth})" if sink is not None else ""
        msg = f"lowest sink share {format_value(sink)}{where}" + ("" if ok else f" < {floor}")
        out.append(CheckResult("drift: sink share", "drift", ok, sink, f">= {floor}", msg))
    return out
