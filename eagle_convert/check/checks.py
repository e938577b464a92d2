"""The gate's checks as pure functions: measurements and policy in, `CheckResult`s out.

Every check returns data (name, passed, figure, threshold, message); nothing here starts an engine
or prints. `run.py` gathers the measurements (validation report, vLLM runs) and calls these in
order; the CLI, JSON, JUnit and Markdown outputs render the same results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.check.policy import Policy
from eagle_convert.jsonable import dump, key

TITLES = {
    "static": "static validation",
    "features": "EAGLE-3.1 features",
    "engine": "engine load",
    "acceptance": "acceptance",
    "alarms": "output alarms",
    "baseline": "baseline comparison",
    "identity": "output identity (T=0)",
    "sampling": "sampling sanity (T->0)",
    "drift": "attention drift",
    "serve": "served deployment",
}
STAGES = tuple(TITLES)  # the order the gate runs them


def format_value(value: object) -> str:
    """A figure or threshold as text, the same in the table, the summary and JUnit: None is empty,
    floats get 4 significant digits."""
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class CheckResult:
    """One check: `passed` None means skipped (off: the reason is the `message`); `not_run` marks a
    stage the policy asks for that could not run here, a failure (check/gate.py)."""

    name: str
    stage: str
    passed: bool | None
    figure: float | str | None = field(metadata=key(ndigits=4))
    threshold: str | None
    message: str
    seconds: float = field(default=0.0, metadata=key(ndigits=3))
    details: dict[str, Any] = field(default_factory=dict)
    not_run: bool = False

    @property
    def status(self) -> str:
        if self.not_run:
            return "not-run"
        return "skip" if self.passed is None else "pass" if self.passed else "fail"

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "name stage status passed figure threshold message seconds details")


def skipped(stage: str, why: str) -> CheckResult:
    return CheckResult(TITLES[stage], stage, None, None, None, why)


def not_run(stage: str, why: str) -> CheckResult:
    """A stage the policy asks for that could not run: it fails the gate (check/gate.py)."""
    return CheckResult(TITLES[stage], stage, False, None, None, why, not_run=True)


def fmt_figure(x: float) -> str:
    """A figure as the gate shows it: 3 decimals at most, no trailing zeros (nan and inf as such)."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


# ------------------------------------------------------------------------------------ static


# The policy key ([vllm] table) that decides what an unverified finding does to the gate, per code.
UNVERIFIED_KEYS = {"E706": "unknown_release", "E705": "modified_source"}


def static_checks(
    report: Any, allow_warnings: list[str], *, fail_on_hygiene: bool = False, accept: dict[str, str] | None = None
) -> list[CheckResult]:
    """Errors fail; warnings that change what vLLM serves fail unless their code is in `allow_warnings`;
    hygiene warnings (served as trained by the release checked) are reported and fail only with
    `fail_on_hygiene`. An unverified verdict (impact "unverified": rules not read from the vLLM served)
    is its own row, failing unless `accept` ([vllm] policy key -> "warn") accepts that risk on purpose."""
    accept = accept or {}
    unverified = [f for f in report.findings if f.impact == "unverified" and f.level != "info"]
    failing = [f for f in report.failing(strict=True, allowed=allow_warnings) if f.impact != "unverified"]
    errors = [f for f in failing if f.level == "error"]
    warnings = [w for w in failing if w.level == "warning" and w.changes_serving]  # hygiene: its own row
    hygiene = [w for w in report.warnings if not w.changes_serving]
    allowed = [w for w in report.warnings if w.changes_serving and w.impact != "unverified" and w not in warnings]
    release = f" on vLLM {report.vllm.release}" if getattr(report, "vllm", None) else ""

    def lines(fs: list) -> str:
        shown = "; ".join(f"{f.code} {f.slug}: {f.message}" for f in fs[:3])
        return shown + (f"; and {len(fs) - 3} more" if len(fs) > 3 else "")

    out = [
        CheckResult(
            "static: errors",
            "static",
            not errors,
            len(errors),
            "0",
            lines(errors) if errors else f"no errors ({', '.join(report.families_run)} checked{release})",
            details={"codes": sorted({f.code for f in errors})},
        )
    ]
    msg = (
        lines(warnings)
        if warnings
        else ("no warning changes what vLLM serves" + release if hygiene else "no warnings")
        + (f" ({len(allowed)} allowed: {', '.join(sorted({w.code for w in allowed}))})" if allowed else "")
    )
    out.append(
        CheckResult(
            "static: warnings",
            "static",
            not warnings,
            len(warnings),
            "0" + (f" (allowed: {', '.join(allow_warnings)})" if allow_warnings else ""),
            msg,
            details={
                "codes": sorted({f.code for f in warnings}),
                "allowed": sorted({f.code for f in allowed}),
                "impacts": sorted({f.impact for f in warnings}),
            },
        )
    )
    if unverified:
        out.append(_unverified_row(unverified, accept, lines(unverified)))
    if hygiene:
        out.append(
            CheckResult(
                "static: hygiene",
                "static",
                not fail_on_hygiene,
                len(hygiene),
                "0" if fail_on_hygiene else "reported",
                f"served as trained{release}: " + lines(hygiene),
                details={"codes": sorted({f.code for f in hygiene})},
            )
        )
    return out


def _unverified_row(found: list, accept: dict[str, str], shown: str) -> CheckResult:
    """The gate row of unverified findings: fails unless each code's [vllm] key says "warn"."""
    keys = sorted({UNVERIFIED_KEYS.get(f.code, "unknown_release") for f in found})
    accepted = all(accept.get(k) == "warn" for k in keys)
    said = ", ".join(f'{k} = "warn"' for k in keys)
    return CheckResult(
        "static: unverified",
        "static",
        accepted,
        len(found),
        f"0 (accepted: [vllm] {said})" if accepted else "0",
        (f"risk accepted by the policy's [vllm] {said}: " if accepted else "unverified, so not passed: ") + shown,
        details={"codes": sorted({f.code for f in found}), "policy_keys": keys, "accepted": accepted},
    )


# ---------------------------------------------------------------------------------- features


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def _without(name: str, mla: bool) -> str:
    """What a vLLM without the feature does with a draft that uses it (vllm_model/releases.py)."""
    if name == "fc_norm" and not mla:
        return "the load fails on the fc_norm.* tensors (KeyError before 0.22.0)"
    return "the engine would silently ignore it"


def feature_checks(info: Any, features: Any, policy: Policy) -> list[CheckResult]:
    """Required EAGLE-3.1 features present in the draft and built by the installed vLLM; the draft's
    own enabled features supported; a minimum vLLM version; source-detected vLLM flags."""
    require = list(policy.get("features", "require", []))
    out = []
    version = features.version if features else None
    used = [f for f in ("fc_norm", "norm_output") if info is not None and info.flags.get(f) and info.flags[f].value]
    for name in dict.fromkeys(require + used):
        in_draft = name in used
        in_vllm = bool(features is not None and getattr(features, name, False))
        evidence = features.evidence.get(name, "") if features else "vLLM is not installed"
        mla = getattr(info, "attention", None) == "mla"
        if name == "fc_norm" and mla and in_vllm and not getattr(features, "mla_fc_norm_applied", True):
            # 0.22.x builds and loads the MLA draft's fc_norm but never applies it (vLLM #43482)
            in_vllm, evidence = False, features.evidence.get("mla_fc_norm_applied", "")
        problems = []
        if name in require and not in_draft:
            problems.append(f"the draft does not enable {name} (config.json)")
        if not in_vllm:
            problems.append(
                f"vLLM {version or '(not installed)'} does not {'apply' if name == 'fc_norm' and mla else 'build'} "
                f"{name}: {evidence}" + (f"; {_without(name, mla)}" if in_draft else "")
            )
        out.append(
            CheckResult(
                f"feature {name}",
                "features",
                not problems,
                f"draft: {'yes' if in_draft else 'no'}, vLLM: {'yes' if in_vllm else 'no'}",
                "required" if name in require else "used by the draft",
                "; ".join(problems) or f"draft enables it; {evidence}",
            )
        )
    minimum = policy.get("features", "min_vllm_version")
    if minimum:
        ok = version is not None and _version_tuple(version) >= _version_tuple(minimum)
        out.append(
            CheckResult(
                "vLLM version",
                "features",
                ok,
                version or "not installed",
                f">= {minimum}",
                f"installed vLLM {version} " + ("meets" if ok else "is below") + f" {minimum}"
                if version
                else "vLLM is not installed",
            )
        )
    for flag in policy.get("features", "vllm_features", []):
        ok = bool(features is not None and getattr(features, flag, False))
        out.append(
            CheckResult(
                f"vLLM feature {flag}",
                "features",
                ok,
                "yes" if ok else "no",
                "yes",
                features.evidence.get(flag, "") if features else "vLLM is not installed",
            )
        )
    if not out:
        out.append(
            CheckResult(
                "features",
                "features",
                True,
                None,
                None,
                "the draft enables no EAGLE-3.1 feature and the policy requires none",
            )
        )
    return out


# ------------------------------------------------------------------------------------ engine


def engine_checks(findings: list, result: Any) -> list[CheckResult]:
    """The strict sentinel load: every parameter written, no load error, no predicted runtime failure."""
    errors = [f for f in findings if f.level == "error"]
    loaded = len(result.loaded) if result is not None else 0
    unwritten = result.unwritten if result is not None else []
    if errors:
        msg = "; ".join(f"{f.code} {f.slug}: {f.message}" for f in errors[:3])
    else:
        msg = f"vLLM {result.vllm_version} loaded {loaded} parameters, none left unwritten"
    return [
        CheckResult(
            "engine load (strict)",
            "engine",
            not errors,
            f"{len(unwritten)} unwritten",
            "0 unwritten",
            msg,
            details={
                "codes": sorted({f.code for f in errors}),
                "unwritten": list(unwritten),
                "unwritten_keys": list(result.unwritten_keys) if result else [],
                "error": result.error if result else None,
            },
        )
    ]
