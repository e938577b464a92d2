"""The gate's one rule for stages: which the policy asks for, which can run here, and why not.

A stage is *off* when the policy (or the command line, for `--baseline`) does not ask for it: it
is reported as skipped with the key that decides it, and it neither passes nor fails. A stage the
policy asks for that cannot run here (no `--target`, no vLLM, no GPU for a GPU build of vLLM, a
missing module of the `smoke` extra) is *not run*: a failed check naming what is missing and how
to turn the stage off, so a CI job that forgot `--target` can never be green. A policy that
contradicts itself stays a usage error (exit 2) before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.check.policy import Policy
from eagle_convert.errors import UsageError

# How a policy (or the command line) turns each stage off: what a not-run stage offers besides the
# missing piece, and the words of a skip. The features stage reads the release's tables when no
# vLLM is installed, so it always runs.
TURN_OFF = {
    "static": "[static] enabled = false",
    "engine": "[engine] load = false",
    "acceptance": "remove the [acceptance] table",
    "alarms": "[alarms] enabled = false",
    "baseline": "leave out --baseline",
    "identity": "[output] identity = false",
    "sampling": "[sampling] control = false",
    "drift": "remove the [drift] limits",
    "serve": "remove the [serve] table and --server",
}
_OFF = {
    "static": "off: [static] enabled = false",
    "engine": "off: [engine] load = false",
    "acceptance": "off: the policy has no [acceptance] table",
    "alarms": "off: [alarms] enabled = false",
    "baseline": "off: no --baseline given",
    "identity": "off: [output] identity = false",
    "sampling": "off: [sampling] control (auto runs it when [acceptance] temperature > 0)",
    "drift": "off: the policy sets no [drift] limit (max_rms_growth, min_sink_share)",
    "serve": "off: no [serve] table in the policy and no --server",
}


@dataclass
class Needs:
    """Per stage: asked by the policy, and what is missing for it here (empty: it runs)."""

    asked: dict[str, bool]
    missing: dict[str, list[str]] = field(default_factory=dict)
    control: float | None = None  # the sampling control's temperature (when asked)
    serve: Any = None  # check.serve.ServeTarget: the server the serve stage measures ([serve] or --server)

    def runs(self, stage: str) -> bool:
        return self.asked.get(stage, False) and not self.missing.get(stage)

    def not_run(self, stage: str) -> bool:
        return self.asked.get(stage, False) and bool(self.missing.get(stage))

    def why_not(self, stage: str) -> str:
        """The message of a stage that does not run: its skip reason, or what is missing and the fix."""
        if not self.asked.get(stage, False):
            if stage in ("alarms", "baseline", "identity", "sampling") and not self.asked["acceptance"]:
                return _OFF["acceptance"]
            return _OFF[stage]
        return f"not run: needs {' and '.join(self.missing[stage])}; or turn it off: {TURN_OFF[stage]}"

    @property
    def identity(self) -> bool:
        """The policy requires output identity (the static stage refuses a lossy sampler then)."""
        return self.asked.get("identity", False)

    @property
    def engines_run(self) -> bool:
        return self.runs("engine") or self.runs("acceptance")


def _missing_torch() -> list[str]:
    from eagle_convert.extras import INSTALL, TORCH_MODULES, missing_modules

    gone = missing_modules("smoke", TORCH_MODULES)
    if not gone:
        return []
    return [f"{', '.join(gone)}, which {'is' if len(gone) == 1 else 'are'} not installed: {INSTALL['smoke']}"]


def serve_target(policy: Policy, server: Any = None) -> Any:
    """The serve stage's `ServeTarget`: `server` (check --server) over the policy's [serve] table;
    None when neither names a server.

    Raises:
        UsageError: a [serve] table without a server.
    """
    from eagle_convert.check.serve import ServeTarget, serve_target_from

    if server is None and not policy.has("serve"):
        return None
    where = serve_target_from(policy, server if isinstance(server, ServeTarget) else None)
    if where is None:
        raise UsageError(
            f"{policy.source}: [serve] needs server = URL (or {{server}})",
            hint="add server = URL to [serve], or pass {server}",
            options=("server",),
            file=policy.source,
        )
    return where


def needs(policy: Policy, *, target: str | None, baseline: str | None, server: Any = None) -> Needs:
    """What the policy asks for and what each asked stage lacks here. Raises UsageError (exit 2)
    only for a policy or command line that contradicts itself."""
    from eagle_convert.extras import INSTALL
    from eagle_convert.vllm_model import engine_device_problem, vllm_available

    acc = policy.has("acceptance")
    for table in ("output", "alarms", "sampling"):
        if policy.has(table) and not acc:
            raise UsageError(
                f"{policy.source}: [{table}] needs an [acceptance] table (its prompts and settings)",
                hint=f"add an [acceptance] table, or remove [{table}]",
            )
    if baseline is not None and not acc:
        raise UsageError(
            "{baseline} needs an [acceptance] table in the policy: the comparison runs there",
            hint="add an [acceptance] table, or leave out {baseline}",
            options=("baseline",),
        )
    temperature = float(policy.get("acceptance", "temperature", 0.0))
    control = policy.get("sampling", "control")
    runs_control = acc and (control is True or (control == "auto" and temperature > 0))
    asked = {
        "static": bool(policy.get("static", "enabled")),
        "features": True,
        "engine": policy.get("engine", "load") is not False,  # asked unless the policy turns it off
        "acceptance": acc,
        "alarms": acc and bool(policy.get("alarms", "enabled")),
        "baseline": acc and baseline is not None,
        "identity": acc and bool(policy.get("output", "identity")),
        "sampling": runs_control,
        "drift": any(policy.get("drift", key) is not None for key in ("max_rms_growth", "min_sink_share")),
        "serve": False,
    }
    serve = serve_target(policy, server)
    asked["serve"] = serve is not None
    no_target = ["--target"] if target is None else []
    engine: list[str] = []
    if asked["engine"] or acc:
        if not vllm_available():
            engine = [*no_target, f"vLLM, which is not installed: {INSTALL['vllm']}"]
        else:
            device = engine_device_problem()
            engine = [*no_target, *([device] if device else [])]
    missing = {"engine": engine}
    if acc:  # the acceptance prompts are tokenized in this process (check/stages.py, smoke's preparation)
        measured = [*engine, *_missing_torch()]
        missing.update({s: measured for s in ("acceptance", "alarms", "baseline", "identity", "sampling")})
    if asked["drift"]:  # the reference engine: torch, no vLLM
        missing["drift"] = [*no_target, *_missing_torch()]
    return Needs(
        asked,
        {s: m for s, m in missing.items() if asked[s] and m},
        float(policy.get("sampling", "temperature")) if runs_control else None,
        serve,
    )
