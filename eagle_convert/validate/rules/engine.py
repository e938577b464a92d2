"""Turn a vLLM engine check (`vllm.load_report.EngineReport`) and the installed vLLM's detected features
into findings.

The loader check is strict where vLLM is not: any parameter the checkpoint never wrote is an
error, except the ones vLLM legitimately fills elsewhere (the embedding or head shared from the
target, reported by the worker) and `hidden_norm` of layers >= 1, which vLLM builds but never uses.
"""

from __future__ import annotations

import re
from typing import Any

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context

_UNUSED = re.compile(r"^model\.layers\.([1-9]\d*)\.hidden_norm\.weight$")


def allowed_unwritten(name: str) -> bool:
    """Parameters vLLM builds but never reads (hidden_norm of layers >= 1)."""
    return bool(_UNUSED.match(name))


def from_engine(report: Any) -> list[Finding]:
    """E701 per unwritten parameter, E702 when vLLM failed to load."""
    out: list[Finding] = []
    if report.error:
        stage = f" ({report.stage})" if getattr(report, "stage", None) else ""
        out.append(finding("E702", f"vLLM {report.vllm_version or ''} failed to load the draft{stage}: {report.error}"))
    keys = list(getattr(report, "unwritten_keys", []) or [])
    for i, name in enumerate(report.unwritten):
        if allowed_unwritten(name):
            continue
        key = keys[i] if i < len(keys) and len(keys) == len(report.unwritten) else None
        fills = f" (checkpoint tensor {key})" if key else ""
        out.append(
            finding(
                "E701",
                f"vLLM parameter {name} was never written by the checkpoint{fills}; vLLM itself "
                "loads this draft without complaint",
                tensor=key or name,
            )
        )
    return out


def feature_findings(ctx: Context, features: Any) -> list[Finding]:
    """E703 for each feature this draft needs that the installed vLLM (read from its source) lacks."""
    if features is None:
        return []
    needs: list[tuple[bool, str, str]] = []
    has_fc_norm = ctx.flags["fc_norm"] or any(n.startswith(("fc_norm.", "model.fc_norm.")) for n in ctx.tensors)
    a = ctx.aux_count
    ids_nested_only = ctx.vcfg.get("eagle_aux_hidden_state_layer_ids") is None and bool(
        (ctx.vcfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    )
    needs += [
        (has_fc_norm and ctx.attention != "mla", "fc_norm", "fc_norm (EAGLE-3.1, PR #42764)"),
        (ctx.flags["norm_output"], "norm_output", "norm_output (EAGLE-3.1, PR #42764)"),
        (
            ctx.speculators and (ctx.flags["fc_norm"] or ctx.flags["norm_output"]),
            "speculators_propagates_31_flags",
            "fc_norm / norm_output from speculators configs (PR #46488)",
        ),
        (ctx.impl == "Eagle3Qwen3ForCausalLM", "qwen3_eagle3", "the Qwen3-arch EAGLE-3 draft class (PR #43132)"),
        (ctx.impl == "Eagle3DeepseekV2ForCausalLM", "mla_eagle3", "the MLA EAGLE-3 draft class (PR #36361)"),
        (ctx.attention == "mla" and has_fc_norm, "mla_fc_norm_applied", "fc_norm applied in MLA drafts (PR #43482)"),
        (
            a is not None and a != 3,
            "num_aux_hidden_states",
            f"{a} aux hidden states (num_aux_hidden_states, PR #42764)",
        ),
        (ctx.flags["norm_before_fc"], "norm_before_fc", "norm_before_fc / input_norm (PR #36545)"),
        (ids_nested_only, "reads_eagle_config_aux_ids", "aux ids read from eagle_config (PR #42764)"),
    ]
    version = getattr(features, "version", None) or "?"
    evidence = getattr(features, "evidence", {}) or {}
    out = []
    for needed, attr, what in needs:
        if needed and getattr(features, attr, True) is False:
            note = f" [{evidence[attr]}]" if attr in evidence else ""
            out.append(finding("E703", f"this draft needs {what}, which the installed vLLM {version} lacks{note}"))
    return out
