"""The stages of `check`: gather one stage's measurements, hand them to `checks.py`.

`State` carries what later stages reuse: the validation report, the draft opened and described
once, local folders (downloaded once for hub references), the `Measure` the engines run with (decided
once by run_check), the prepared prompts, and every engine pass (`measure.Engines`).

Hub references are downloaded (`draft.local_checkpoint`) only for the stages that load weights;
the static stages read headers only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.check import checks as ck
from eagle_convert.check import measured as ms
from eagle_convert.check.checks import CheckResult
from eagle_convert.check.policy import Policy
from eagle_convert.draft import local_checkpoint
from eagle_convert.measure import CONTROL_EPS, GREEDY, MAIN, MIXED, Engines, draft_from_pass, plan_check_passes

if TYPE_CHECKING:
    from eagle_convert.measure import Measure


@dataclass
class State:
    draft: str
    target: str | None
    baseline: str | None
    policy: Policy
    need: Any  # gate.Needs
    engines: Engines
    report: Any = None  # ValidationReport of the static stage
    measure: Measure | None = None  # what every engine runs with (k, prompts, decoding); None: no engine runs
    folders: dict[str, Path] = field(default_factory=dict)
    opened: dict[str, Any] = field(default_factory=dict)  # "draft" -> Checkpoint, "info" -> DraftInfo: once
    pset: Any = None
    candidate: Any = None  # measure.results.DraftResult of the measuring pass
    passes: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> pass name -> PassResult
    settings: dict[str, Any] = field(default_factory=dict)
    vllm_version: str | None = None
    release: Any = None  # vllm_model.VllmVersionStatus, resolved once by run_check: the release the verdict is for
    serve: Any = None  # vllm_model.serve_config.ServeConfig: --speculative-config / --max-model-len
    serve_for: Any = None  # engines.EngineStatus: --for sglang|trtllm, the engine the static verdict is for
    serve_config: str | None = None  # --serve-config: that engine's serve config file, checked by the static stage

    def folder(self, role: str) -> Path:
        """Local folder of the draft / target / baseline (a hub repo is downloaded once)."""
        if role not in self.folders:
            ref = {"draft": self.draft, "target": self.target, "baseline": self.baseline}[role]
            if ref is None:
                from eagle_convert.errors import UsageError

                raise UsageError(f"the check needs a {role} for this stage", hint=f"pass --{role}")
            self.folders[role] = local_checkpoint(ref, role, "check", hub=True)
        return self.folders[role]

    @property
    def m(self) -> Measure:
        """The `Measure` of the engine stages (run_check resolves it whenever one runs)."""
        assert self.measure is not None, "run_check resolves the Measure before an engine stage"
        return self.measure

    def checkpoint(self) -> Any:
        """The draft opened once (its downloaded folder once there is one; headers only)."""
        if "draft" not in self.opened:
            from eagle_convert.draft import open_checkpoint

            self.opened["draft"] = open_checkpoint(self.folders.get("draft", self.draft))
        return self.opened["draft"]

    @property
    def speculative(self) -> dict[str, Any] | None:
        """The deployment's speculative-config keys every engine runs with (None: eagle3 at k)."""
        return dict(self.serve.data) if self.serve is not None and self.serve.given else None


def _unmeasured(s: State, stage: str) -> list[CheckResult] | None:
    """A skip when the candidate's engine run, which this stage reads, did not happen."""
    if "candidate" in s.passes:
        return None
    return [ck.skipped(stage, "not measured: the candidate's engine run failed (acceptance stage)")]


# -------------------------------------------------------------------------------- the stages


def static(s: State) -> list[CheckResult]:
    from eagle_convert.validate import validate_checkpoint, validate_for

    if s.serve_for is not None:  # --for sglang / trtllm: that engine's static verdict
        s.report = validate_for(
            s.draft,
            s.serve_for,
            target=s.target,
            serving_context=s.policy.get("static", "max_model_len"),
            serve_config=s.serve_config,
        )
    else:
        s.report = validate_checkpoint(
            s.draft,
            target=s.target,
            deep=bool(s.policy.get("static", "deep")),
            serving_context=s.policy.get("static", "max_model_len"),
            vllm_version=s.release,
            speculative_config=s.serve,
            identity_required=s.need.identity,
        )
    return ck.static_checks(
        s.report,
        list(s.policy.get("static", "allow_warnings", [])),
        fail_on_hygiene=bool(s.policy.get("static", "fail_on_hygiene")),
        accept={k: s.policy.get("vllm", k) for k in ("unknown_release", "modified_source")},
    )


def _info(s: State) -> Any:
    """The draft as the release reads it: the static stage's, else described once here."""
    if s.report is not None:
        return s.report.info
    if "info" not in s.opened:
        from eagle_convert.draft import describe

        s.opened["info"] = describe(s.checkpoint(), s.release.rules, read_vocab=False)
    return s.opened["info"]


def features(s: State) -> list[CheckResult]:
    """The draft's EAGLE-3.1 features against the named release's (releases.py), else the installed
    vLLM's source, else (no vLLM here) the newest known release's, the one the static verdict is for."""
    from eagle_convert.vllm_model import VllmFeatures, detect_features, features_of, vllm_available

    found: VllmFeatures | None
    if s.release.named or not vllm_available():
        found = features_of(s.release.rules)
    else:
        found = detect_features()
        s.vllm_version = found.version if found else None
    return ck.feature_checks(_info(s), found, s.policy)


def engine(s: State) -> list[CheckResult]:
    from eagle_convert.validate import build_context, feature_findings, from_engine

    result = s.engines.load_check(
        s.folder("draft"),
        s.folder("target"),
        k=s.m.k,
        timeout_s=float(s.policy.get("engine", "timeout")),
        speculative=s.speculative,
    )
    ctx = build_context(s.checkpoint(), _info(s))  # the features a draft needs are its own, not its target's
    return ck.engine_checks(feature_findings(ctx, result.features) + from_engine(result), result)


def _run(s: State, role: str, draft: Path | None, specs: list) -> dict[str, Any]:
    from eagle_convert.measure import max_model_len_for

    m = s.m
    needed = max_model_len_for(s.folder("target"), s.pset, m.max_new_tokens, m.k)
    out = s.engines.passes(
        role,
        s.folder("target"),
        draft,
        [p.token_ids for p in s.pset.prompts],
        specs,
        k=m.k,
        max_new_tokens=m.max_new_tokens,
        max_model_len=s.serve.engine_max_model_len(needed) if s.serve is not None else needed,
        seed=m.seed,
        timeout_s=float(s.policy.get("acceptance", "timeout")),
        speculative=s.speculative,
    )
    s.passes[role] = out
    return out


def _plan(s: State):
    out = s.policy.get("output", "mixed_batch")
    return plan_check_passes(
        temperature=s.m.temperature,
        seed=s.m.seed,
        identity=s.need.runs("identity"),
        mixed=float(s.policy.get("output", "companion_temperature")) if (s.need.runs("identity") and out) else None,
        control=s.need.control,
        control_prompts=int(s.policy.get("sampling", "prompts")),
        n_prompts=len(s.pset.prompts),
    )


def acceptance(s: State) -> list[CheckResult]:
    from eagle_convert.measure import prepare_smoke_prompts

    m = s.m
    s.pset = prepare_smoke_prompts(
        s.folder("target"),
        m.suite,
        k=m.k,
        max_new_tokens=m.max_new_tokens,
        buckets=list(m.buckets),
        chat_template=m.chat_template,
    )
    refused = list(m.suite.notices)
    s.settings = {
        "k": m.k,
        "max_new_tokens": m.max_new_tokens,
        "temperature": m.temperature,
        "seed": m.seed,
        "prompts": len(s.pset.prompts),
        "prompt_suite": m.suite.label,
        **({"prompts_refused": refused} if refused else {}),
        "chat_template": s.pset.chat_template,
        "speculative_config": s.speculative,
    }
    out = _run(s, "candidate", s.folder("draft"), _plan(s).candidate)
    s.candidate = draft_from_pass(s.folder("draft"), out[MAIN], s.pset, m.k, "candidate", s.release.rules)
    return ms.acceptance_checks(s.candidate, s.policy)


def alarms(s: State) -> list[CheckResult]:
    if (skip := _unmeasured(s, "alarms")) is not None:
        return skip
    return ms.alarm_checks(s.candidate, s.passes["candidate"][MAIN].outputs, s.m.k, s.policy)


def baseline(s: State) -> list[CheckResult]:
    if (skip := _unmeasured(s, "baseline")) is not None:
        return skip
    out = _run(s, "baseline", s.folder("baseline"), _plan(s).baseline)
    label = Path(s.baseline or "baseline").name or "baseline"
    base = draft_from_pass(s.folder("baseline"), out[MAIN], s.pset, s.m.k, label, s.release.rules)
    return ms.baseline_checks(s.candidate, base, s.policy)


def _dtype(s: State) -> str:
    from eagle_convert.measure import target_dtype

    return target_dtype(s.folder("target"))


def _greedy(s: State) -> Any:
    cand = s.passes["candidate"]
    return cand[MAIN] if s.m.temperature == 0 else cand[GREEDY]


def identity(s: State) -> list[CheckResult]:
    from eagle_convert.measure import compare_outputs

    if (skip := _unmeasured(s, "identity")) is not None:
        return skip
    alone = _run(s, "target alone", None, _plan(s).target_alone)
    ref = alone[GREEDY]
    ulps, dtype = float(s.policy.get("output", "near_tie_ulps")), _dtype(s)
    ids = [s.pset.prompts[i].id for i in ref.prompts]
    tol = f"near-ties excused: top-2 logits within {ulps:g} {dtype} ulps"
    out = [
        ms.identity_check(
            "greedy batch",
            compare_outputs(ids, ref.outputs, _greedy(s).outputs, ref.top2, dtype=dtype, tie_ulps=ulps),
            tol,
        )
    ]
    mixed = s.passes["candidate"].get(MIXED)
    if mixed is not None:
        r = ms.identity_check(
            "mixed batch (greedy next to sampled requests)",
            compare_outputs(ids, ref.outputs, mixed.outputs, ref.top2, dtype=dtype, tie_ulps=ulps),
            tol,
        )
        if not r.passed:
            from eagle_convert.vllm import sampling_issues

            found = sampling_issues()
            r.message += f". Cause: {found[0].summary}" if found else ""
        out.append(r)
    return out


def sampling(s: State) -> list[CheckResult]:
    from eagle_convert.measure import sampling_control

    if (skip := _unmeasured(s, "sampling")) is not None:
        return skip
    alone = s.passes.get("target alone", {})
    pair = (alone[GREEDY], alone[CONTROL_EPS]) if CONTROL_EPS in alone else None
    control = sampling_control(
        _greedy(s), s.passes["candidate"][CONTROL_EPS], s.pset, _dtype(s), float(s.need.control), alone=pair
    )
    return [ms.sampling_check(control)]


def drift(s: State) -> list[CheckResult]:
    """`drift` on the draft (reference engine, built-in prompts), its verdict against the [drift] limits."""
    from eagle_convert.drift import DriftOptions, run_drift
    from eagle_convert.measure import builtin_prompts, select_prompts

    rep = run_drift(
        s.folder("target"),
        [s.folder("draft")],
        DriftOptions(
            depth=int(s.policy.get("drift", "depth")), max_new_tokens=int(s.policy.get("drift", "max_new_tokens"))
        ),
        prompts=select_prompts(builtin_prompts(), (), int(s.policy.get("drift", "limit"))),
    )
    return ms.drift_checks(rep.drafts[0].verdict, s.policy)
