"""`check`: the pre-deployment gate. Runs the stages its policy names, cheapest first, and stops
after the first failing stage unless `keep_going`.

    static      validate_checkpoint (headers; hub repos read remotely, nothing downloaded)
    features    the draft's EAGLE-3.1 flags against the installed vLLM's source (no import)
    engine      the strict sentinel load in vLLM                 -- first use of the vLLM worker
    acceptance  the candidate's engine: AL floors                -- engine start 1
    alarms      per-request loops / implausible AL / AL ~ 1      (same measurements)
    baseline    the production draft's engine, same prompts      -- engine start 2 (with --baseline)
    identity    the target alone at T = 0, token for token       -- engine start 3
    sampling    T -> 0 converges to greedy                       (passes of engines 1 and 3)
    drift       attention drift by draft depth                   (reference engine, with [drift] limits)
    serve       the draft as deployed: a running server's AL and per-user speedup ([serve] or --server)

A stage the policy asks for that cannot run here (no --target, no vLLM, no GPU) fails as "not run"
(check/gate.py): the gate never passes what it did not check.

Exit status (cli): 0 every check passed, 1 a check failed or an asked stage could not run, 2 usage
(a bad policy file, tables that contradict each other, a bad flag).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.check.checks import STAGES, TITLES, CheckResult, not_run, skipped
from eagle_convert.check.gate import needs
from eagle_convert.check.options import CheckOptions
from eagle_convert.check.policy import Policy, k_problem, load_policy
from eagle_convert.errors import EngineError, UsageError
from eagle_convert.jsonable import dump
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.measure import Measure
    from eagle_convert.vllm_model import Release

SCHEMA_VERSION = 1


@dataclass
class CheckReport:
    draft: str
    target: str | None
    baseline: str | None
    policy: Policy
    results: list[CheckResult] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stopped_after: str | None = None  # the failing stage that ended the run (without keep_going)
    engine_starts: int = 0
    draft_swaps: int = 0
    load_checks: int = 0
    worker_starts: int = 0
    vllm_version: str | None = None
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    release: Any = None  # versions.VllmVersionStatus: the release the static and features verdicts are for
    serve: Any = None  # vllm_model.serve_config.ServeConfig: --speculative-config / --max-model-len

    @property
    def passed(self) -> bool:
        return not any(r.passed is False for r in self.results)

    def stage_status(self, stage: str) -> str:
        """pass, fail, skip (off, or after a failing stage), or not-run (asked, could not run: a failure)."""
        rs = [r for r in self.results if r.stage == stage]
        if any(r.not_run for r in rs):
            return "not-run"
        if not rs or all(r.passed is None for r in rs):
            return "skip"
        return "fail" if any(r.passed is False for r in rs) else "pass"

    def verdict(self) -> str:
        """The verdict as one line, the same in every output; it names what was not checked, so a
        skipped stage never reads as a passed one."""
        if self.passed:
            off = [TITLES[s] for s in STAGES if self.stage_status(s) == "skip"]
            return "PASS: every check the policy asks for passed" + (
                f"; not checked (off in the policy): {', '.join(off)}" if off else ""
            )
        failed = sum(1 for r in self.results if r.passed is False and not r.not_run)
        unrun = [TITLES[s] for s in STAGES if self.stage_status(s) == "not-run"]
        parts = [f"{failed} check(s) failed"] if failed else []
        if unrun:
            parts.append(f"{len(unrun)} stage(s) the policy asks for could not run ({', '.join(unrun)})")
        stop = f"; stopped after the {TITLES[self.stopped_after]} stage" if self.stopped_after else ""
        return f"FAIL: {', '.join(parts)}{stop}"

    def to_dict(self) -> dict[str, Any]:
        stages = [
            {"stage": s, "title": TITLES[s], "status": self.stage_status(s), "seconds": self.stage_seconds.get(s, 0.0)}
            for s in STAGES
        ]
        return dump(
            self, _KEYS, schema_version=SCHEMA_VERSION, verdict=self.verdict(), stages=stages, checks=self.results
        )


_KEYS = (
    "schema_version draft target baseline passed verdict policy stopped_after stages:3 checks engine_starts "
    "draft_swaps load_checks worker_starts vllm_version release serve seconds:3 settings"
)


def _serve_config(
    value: str | dict[str, Any] | None,
    max_model_len: int | None,
    status: Any,
    installed: Any,
    policy: Policy,
    *,
    engines_run: bool,
) -> Any:
    """The serve config for the release checked (and for the `installed` vLLM the engines run, when
    they run and it is another release); refused where it contradicts the policy's [acceptance]."""
    from eagle_convert.vllm_model import parse_serve_config

    serve = parse_serve_config(value, status.rules, max_model_len=max_model_len)
    if serve is not None and serve.given and engines_run and installed.release != status.release:
        try:
            parse_serve_config(value, installed.rules, max_model_len=max_model_len)
        except UsageError as exc:
            exc.message = f"{exc.message}; the engine stages run the installed vLLM"  # keeps its options
            raise exc from None
    k = serve.k if serve is not None else None
    acc = policy.data.get("acceptance") or {}
    if k is None or not policy.has("acceptance"):
        return serve
    own = acc.get("num_speculative_tokens")
    if own is not None and own != k:
        raise UsageError(
            f"{{speculative_config}} num_speculative_tokens is {k} but {policy.source}: [acceptance] "
            f"num_speculative_tokens is {own}: check measures the k you serve",
            hint="make them equal, or drop one",
            options=("speculative_config",),
            file=policy.source,
        )
    problem = k_problem(acc, k, "{speculative_config} num_speculative_tokens")
    if problem:
        raise UsageError(f"{policy.source}: {problem[0]}", options=("speculative_config",), file=policy.source)
    return serve


def run_check(
    draft: str | Path,
    opts: CheckOptions | None = None,
    *,
    policy: Policy | None = None,
    progress: Callable[[str], None] | None = None,
    cache: dict | None = None,
    session: Any = None,
    on_tick: OnTick | None = None,
) -> CheckReport:
    """Run the gate on `draft` (folder or hub repo); see the module docstring.

    Args:
        opts: the options (`CheckOptions`, as `check` takes them). `vllm_version` (else the policy's
            [static] one, else the installed vLLM, else the newest known) is the release the static and
            features verdicts are for; the engine stages run the installed vLLM with exactly
            `speculative_config`'s keys and `max_model_len`. `serve_for` sglang / trtllm (with
            `serve_config`) make the static stage that engine's verdict (`validate.validate_for`).
        policy: the policy, already read (default: `opts.policy`'s file, else `./eagle-check.toml`).
        progress: one line per stage started; `on_tick` counts the stages that run.
        cache: shares engine runs between checks in one process (measure/passes.py).
        session: a `vllm.session.EngineSession`, left open, sharing one vLLM worker between checks.

    Raises:
        UsageError: the policy contradicts itself, `vllm_version` names no known release, or the
            speculative config is refused by the release or contradicts the policy.
    """
    from eagle_convert.check import stages
    from eagle_convert.check.serve import serve_stage
    from eagle_convert.measure import Engines
    from eagle_convert.vllm_model import installed_status

    o = opts or CheckOptions()
    vllm_version, serve_for, serve_config = o.vllm_version, o.serve_for, o.serve_config

    t0 = time.perf_counter()
    serving = None
    if serve_for is not None:
        from eagle_convert.engines import VLLM, parse_for

        found = parse_for([serve_for])  # an unknown engine: a usage error before any stage runs
        if len(found) != 1:
            raise UsageError(
                f"{{serve_for={serve_for}}}: check gates one engine release",
                hint="name one: {serve_for=vllm[==X.Y.Z]}, {serve_for=sglang} or {serve_for=trtllm} (the matrix is "
                "validate {serve_for=all})",
                options=("serve_for",),
            )
        serving = found[0]
        if serving.engine == VLLM:
            vllm_version, serving = serving.requested or vllm_version, None
    if serve_config is not None:
        from eagle_convert.engines import read_serve_file

        if serving is None:
            raise UsageError(
                "{serve_config} is for {serve_for=sglang} or {serve_for=trtllm}",
                hint="give vLLM's serve config as {speculative_config}",
                options=("serve_config", "serve_for", "speculative_config"),
            )
        read_serve_file(serve_config, serving.engine)  # an unreadable file: a usage error before any stage runs
    policy = policy or load_policy(o.policy)
    server = _server(o, policy)
    target_s = None if o.target is None else str(o.target)
    baseline_s = None if o.baseline is None else str(o.baseline)
    requested = vllm_version or policy.get("static", "vllm_version")
    status = installed_status(requested)  # a bad release is a usage error before any stage runs
    installed = status if requested is None else installed_status()  # the release the engine stages run
    need = needs(policy, target=target_s, baseline=baseline_s, server=server)
    serve = _serve_config(
        o.speculative_config, o.max_model_len, status, installed, policy, engines_run=need.engines_run
    )
    measure = _measure(policy, o.speculative_config, installed.rules) if need.engines_run else None
    report = CheckReport(str(draft), target_s, baseline_s, policy, release=status)
    say = progress or (lambda _m: None)
    engines = Engines(cache if cache is not None else {}, session)
    state = stages.State(str(draft), target_s, baseline_s, policy, need, engines, release=status, measure=measure)
    state.serve_for = serving
    state.serve_config = serve_config
    state.serve = report.serve = serve
    # each stage is the function of its name in stages.py, run in STAGES' order
    plan = [(s, getattr(stages, s)) for s in STAGES if s != "serve"] + [
        ("serve", lambda st: serve_stage(st, need.serve))
    ]
    tick, runs = tick_or_nothing(on_tick), sum(1 for stage, _f in plan if need.runs(stage))
    ran = 0
    tick(Tick("check", ran, runs))
    try:
        for stage, fn in plan:
            if not need.runs(stage):  # off (skipped), or asked and not runnable here (a failure)
                if need.not_run(stage):
                    report.results.append(not_run(stage, need.why_not(stage)))
                    report.stopped_after = report.stopped_after or (None if o.keep_going else stage)
                else:
                    report.results.append(skipped(stage, need.why_not(stage)))
                continue
            if report.stopped_after is not None:
                report.results.append(
                    skipped(
                        stage,
                        f"not run: the {TITLES[report.stopped_after]} stage failed (--keep-going runs every stage)",
                    )
                )
                continue
            say(f"check: {TITLES[stage]} ...")
            t1 = time.perf_counter()
            try:
                results = fn(state)
            except EngineError as exc:  # the engine could not serve this draft: a failed check, not a crash
                results = [CheckResult(f"{TITLES[stage]}: engine", stage, False, None, None, str(exc))]
            report.stage_seconds[stage] = time.perf_counter() - t1
            if results:  # the stage's time goes to its first check (JUnit sums testcase times)
                results[0].seconds = report.stage_seconds[stage]
            report.results.extend(results)
            ran += 1
            tick(Tick("check", ran, runs, TITLES[stage]))
            if any(r.passed is False for r in results) and not o.keep_going:
                report.stopped_after = stage
    finally:
        report.worker_starts = engines.worker_starts
        engines.close()
    report.engine_starts, report.load_checks = engines.engine_starts, engines.load_checks
    report.draft_swaps = engines.draft_swaps
    report.vllm_version = engines.vllm_version or state.vllm_version
    report.settings = state.settings
    report.seconds = time.perf_counter() - t0
    return report


def _measure(policy: Policy, speculative_config: str | dict[str, Any] | None, release: Release) -> Measure:
    """What every engine stage runs with, decided once by `MeasureOptions.resolve`: the policy's
    [acceptance] (else the defaults) in vLLM at the served k, else the policy's, else 3; `release`: the
    installed vLLM's, which the engine stages run."""
    from eagle_convert.measure import MeasureOptions

    asked = replace(policy.acceptance or MeasureOptions(engine="vllm"), speculative_config=speculative_config)
    return asked.resolve("check", release, categories=f"{policy.source}: [acceptance] categories")


def _server(o: CheckOptions, policy: Policy) -> Any:
    """`server`, `baseline_server`, `api_key` as the serve stage's `ServeTarget` (None: the policy's)."""
    from eagle_convert.check.serve import ServeTarget

    if o.baseline_server is not None and o.server is None and not policy.get("serve", "server"):
        raise UsageError(
            "{baseline_server} goes with {server} (or [serve] server in the policy)",
            options=("baseline_server", "server"),
        )
    return ServeTarget(o.server, o.baseline_server, o.api_key) if o.server or o.baseline_server or o.api_key else None
