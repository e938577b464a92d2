"""The gate's serve stage: the draft as deployed, measured on a running server against floors.

The policy's `[serve]` table (or `check DRAFT --server URL`) names the server with the draft and,
for speedups, the same target served alone; `served.run_served` measures both (smoke --server's
library call) on the table's prompts at each concurrency level, and the checks here hold the
figures to `min_acceptance_length`, `min_per_position` and `min_speedup` (a number for every
level, or a table per level). A server that cannot be measured is a failed check with its one
line, not a crash.

Whether the served draft is the draft being checked: a server does not say which draft it loaded
(vLLM 0.32's `/v1/models` names the target, `/metrics` the model and k; the speculative config
is only in the dev-mode `/server_info`, read where the server exposes it: its draft path against
the draft's name). So the identity check confirms what can be confirmed: the served k (one per-position counter per draft position) against the k checked, the served
model against `--target`, AL plausible for k (above 1 and at most k + 1), and, where the
acceptance stage measured this draft on the same prompts and settings, the served AL against it;
its message says what could not be confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.check.checks import CheckResult, fmt_figure
from eagle_convert.check.measured import position_shortfalls
from eagle_convert.check.policy import Policy

STAGE = "serve"
AL_MATCH_REL = 0.05  # the served AL against the acceptance stage's, same prompts and settings (greedy)
IMPLAUSIBLE_AL = 1.02  # at or below: the server accepts nearly nothing (another draft, or none fitting)


@dataclass(frozen=True)
class ServeTarget:
    """Where the serve stage measures: the policy's [serve] table, overridden by `check --server`."""

    server: str | None
    baseline_server: str | None = None
    api_key: str | None = None


def measure_served(where: ServeTarget, policy: Policy) -> Any:
    """`run_served` with the [serve] table's prompts and settings (a `served.ServedReport`)."""
    from eagle_convert.measure import MeasureOptions, resolve_suite, select_suite
    from eagle_convert.served import ServerOptions, run_served

    suite = select_suite(
        resolve_suite(policy.prompts("serve")),
        tuple(policy.get("serve", "categories") or ()),
        policy.get("serve", "limit"),
    )
    opts = MeasureOptions(
        max_new_tokens=int(policy.get("serve", "max_new_tokens")),
        temperature=float(policy.get("serve", "temperature")),
        concurrency=tuple(int(c) for c in policy.get("serve", "concurrency")),
    )
    sopts = ServerOptions(
        api_key=where.api_key,
        request_timeout=float(policy.get("serve", "request_timeout")),
        max_failed=float(policy.get("serve", "max_failed")),
        exclusive=bool(policy.get("serve", "exclusive")),
    )
    assert where.server is not None  # serve_target_from gives a ServeTarget only with a server
    return run_served(
        [where.server],
        opts,
        sopts,
        labels=["served"],
        baseline=where.baseline_server,
        prompts=suite.prompts,
        suite=suite.label,
    )


def identity_check(
    server: Any,
    *,
    k: int | None,
    target: str | None,
    candidate_al: float | None,
    same_settings: bool,
    draft: str | None = None,
) -> CheckResult:
    """What confirms that the server runs the draft being checked (module docstring)."""
    problems, confirmed = [], []
    served = (server.speculative or {}).get("model")
    if isinstance(served, str) and draft is not None:
        name = Path(draft.split("@")[0]).name
        if Path(served).name == name or served.rstrip("/").endswith(draft.rstrip("/")):
            confirmed.append(f"its speculative config loads {served}")
        else:
            problems.append(f"its speculative config loads {served}, not {draft}")
    if k is not None and server.k != k:
        problems.append(f"it drafts k={server.k} tokens, the check's k is {k}")
    elif k is not None:
        confirmed.append(f"k={k}")
    first = next((lv for lv in server.levels if lv.acceptance_length is not None), None)
    if first is not None:
        al = first.acceptance_length
        if al <= IMPLAUSIBLE_AL:
            problems.append(f"AL {fmt_figure(al)} at concurrency {first.concurrency}: it accepts almost nothing")
        else:
            confirmed.append(f"AL {fmt_figure(al)} plausible for k={server.k}")
        if candidate_al is not None and same_settings:
            if abs(al - candidate_al) > AL_MATCH_REL * candidate_al:
                problems.append(
                    f"AL {fmt_figure(al)} differs from the acceptance stage's {fmt_figure(candidate_al)} on the same prompts "
                    f"by more than {AL_MATCH_REL:.0%}"
                )
            else:
                confirmed.append(f"AL within {AL_MATCH_REL:.0%} of the acceptance stage's {fmt_figure(candidate_al)}")
    root = server.model.root or server.model.id
    if target is not None:
        if Path(root).name == Path(str(target)).name or root == str(target):
            confirmed.append(f"serves the target {Path(root).name}")
        else:
            confirmed.append(f"serves {root} (not confirmed to be --target {target})")
    message = "; ".join(problems) if problems else "confirmed: " + ", ".join(confirmed)
    if not isinstance(served, str):
        message += (
            f". Not confirmable: which draft the server at {server.url} loaded (vLLM exposes its speculative "
            "config only in dev mode, /server_info)"
        )
    server.identity.append(message)
    return CheckResult("served draft", STAGE, not problems, server.k, None, message, details={"model": server.model.id})


def serve_checks(report: Any, policy: Policy) -> list[CheckResult]:
    """Per level: AL, per-position and speedup against the [serve] floors (None floor: reported only)."""
    out = []
    [server] = report.servers
    al_floor = policy.get("serve", "min_acceptance_length")
    pos_floors = policy.get("serve", "min_per_position")
    speed_spec = policy.get("serve", "min_speedup")
    for lv in server.levels:
        c = lv.concurrency
        if lv.no_figure is not None:
            out.append(CheckResult(f"served AL (c={c})", STAGE, False, None, None, f"no figure: {lv.no_figure}"))
            continue
        al = lv.acceptance_length
        ok = None if al_floor is None else al >= al_floor
        msg = f"AL {fmt_figure(al)} from the server's counters over {len(lv.outcomes)} requests ({lv.delta.drafts} rounds)"
        if al_floor is not None:
            msg += f"; floor {fmt_figure(al_floor)}" + ("" if ok else f": {fmt_figure(al_floor - al)} short")
        details = {"notes": lv.notes} if lv.notes else {}
        threshold = None if al_floor is None else f">= {fmt_figure(al_floor)}"
        out.append(CheckResult(f"served AL (c={c})", STAGE, ok, al, threshold, msg, details=details))
        if pos_floors:
            rates = lv.per_position or []
            bad = position_shortfalls(rates, pos_floors)
            out.append(
                CheckResult(
                    f"served per-position (c={c})",
                    STAGE,
                    not bad,
                    " / ".join(f"{r:.3f}" for r in rates[: len(pos_floors)]),
                    ">= " + " / ".join(fmt_figure(x) for x in pos_floors),
                    "; ".join(bad) if bad else "every position meets its floor",
                )
            )
        floor = speed_spec if speed_spec is None or isinstance(speed_spec, (int, float)) else speed_spec.get(str(c))
        if report.baseline is None:
            if floor is not None:
                msg = "min_speedup needs a baseline server ([serve] baseline_server or --baseline-server)"
                out.append(CheckResult(f"served speedup (c={c})", STAGE, False, None, f">= {fmt_figure(floor)}", msg))
            continue
        x = lv.speedup
        base = report.baseline.level(c)
        if x is None:
            why = base.no_figure if base is not None and base.no_figure else "no per-user rate"
            out.append(CheckResult(f"served speedup (c={c})", STAGE, False, None, None, f"no figure: {why}"))
            continue
        ok = None if floor is None else x >= floor
        src = lv.speedup_source or "stream"
        basis = "the engines' decode times" if src == "engine" else "streamed token times"
        msg = (
            f"{fmt_figure(lv.rate_from(src) or 0)} tok/s per user against {fmt_figure(base.rate_from(src) or 0)} without "
            f"speculation ({basis})"
            if base is not None
            else ""
        )
        if floor is not None:
            msg += f"; floor ×{fmt_figure(floor)}" + ("" if ok else f": ×{fmt_figure(floor - x)} short")
        threshold = None if floor is None else f">= {fmt_figure(floor)}"
        out.append(CheckResult(f"served speedup (c={c})", STAGE, ok, x, threshold, msg))
    return out


def serve_target_from(policy: Policy, given: ServeTarget | None) -> ServeTarget | None:
    """`given` (check --server) over the policy's [serve] server / baseline_server; the API key
    from `given`, else the environment variable [serve] api_key_env names."""
    import os

    server = (given.server if given else None) or policy.get("serve", "server")
    if server is None:
        return None
    baseline = (given.baseline_server if given else None) or policy.get("serve", "baseline_server")
    key = (given.api_key if given else None) or os.environ.get(str(policy.get("serve", "api_key_env"))) or None
    return ServeTarget(server, baseline, key)


def serve_stage(s: Any, where: ServeTarget) -> list[CheckResult]:
    """The stage: measure the server, then identity and floors; a server error is one failed check."""
    from eagle_convert.served import ServerError

    try:
        report = measure_served(where, s.policy)
    except ServerError as exc:
        return [CheckResult("served deployment", STAGE, False, None, None, str(exc))]
    [server] = report.servers
    k = s.serve.k if s.serve is not None and s.serve.k is not None else None
    if k is None and s.policy.has("acceptance"):
        k = int(s.policy.get("acceptance", "num_speculative_tokens"))
    candidate_al = s.candidate.total.acceptance_length if s.candidate is not None else None
    s.settings["serve"] = {"server": server.url, "baseline_server": where.baseline_server, **report.settings}
    out = [
        identity_check(
            server, k=k, target=s.target, candidate_al=candidate_al, same_settings=_same(s.policy), draft=s.draft
        )
    ]
    return out + serve_checks(report, s.policy)


def _same(policy: Policy) -> bool:
    """Whether [serve] measures what [acceptance] measured: the same prompts and settings, greedy, natural."""
    if not policy.has("acceptance"):
        return False
    keys = ("prompts", "categories", "limit", "max_new_tokens", "temperature")
    return all(policy.get("serve", k) == policy.get("acceptance", k) for k in keys) and policy.get(
        "acceptance", "buckets"
    ) == ["natural"]
