"""W604: fc_norm weights that were never trained (exactly 1.0, the identity init).

`upgrade` writes ones (its `--init` default) and so, in effect, does any converter that sets
`fc_norm: true` without tensors (vLLM's RMSNorm starts at 1.0). The draft then computes what it was
made to compute: served as written, hence hygiene. But RMSNorm with weight 1 still rescales each
aux state to unit RMS, so acceptance sits below the EAGLE-3 source's until the values are fitted
(docs/upgrade.md, the trained fixture: AL 1.18 with ones vs 1.93 for the EAGLE-3 source, 1.58
calibrated). Only when eagle-convert's own provenance says the values were calibrated or fine-tuned
do ones mean the trained values were replaced after the fact: what vLLM serves is then not what
was trained (computes-differently).
"""

from __future__ import annotations

from eagle_convert.draft import PROVENANCE_KEY, FcNormState, fc_norm_state, recorded_target
from eagle_convert.validate.findings import Finding, Impact, finding
from eagle_convert.validate.rules.context import Context


def check(ctx: Context) -> list[Finding]:
    if not ctx.flags["fc_norm"]:
        return []  # tensors without the flag are E104's; vLLM never builds the module
    state = ctx.memo("fc_norm_state", lambda: fc_norm_state(ctx.ckpt))
    if state is None or not state.untrained:
        return []
    return [finding("W604", _message(state), tensor=_where(state), fix=_fix(ctx), impact=_impact(state))]


def _where(state: FcNormState) -> str:
    ids = state.identity
    return ids[0] if len(ids) == 1 else f"{ids[0]} .. {ids[-1]}"


def _impact(state: FcNormState) -> Impact | None:
    """computes-differently only where eagle-convert itself recorded fitted values (None: the table's hygiene)."""
    fitted = state.claim in ("calibrated", "fine-tuned") and state.claim_source.startswith("provenance")
    return "computes-differently" if fitted else None


def _message(state: FcNormState) -> str:
    n, total = len(state.identity), len(state.tensors)
    head = (
        "the fc_norm weight is"
        if total == 1
        else "every fc_norm weight is"
        if n == total
        else f"{n} of {total} fc_norm weights are"
    )
    head += " exactly 1.0"
    if state.claim == "identity":
        return (
            f"{head}: the identity init of an upgrade ({state.claim_source}), as expected right after it; the "
            "draft computes what the upgrade made it compute, but acceptance is expected below the EAGLE-3 "
            "source's until fc_norm is calibrated or fine-tuned"
        )
    if state.claim is None:
        return (
            f"{head} (the identity init `upgrade` and converters write) and no record of a calibration or "
            "fine-tune (no eagle-convert provenance says so, nor the model card): acceptance is expected "
            "below a trained EAGLE-3.1 draft's until fc_norm is calibrated or fine-tuned"
        )
    if state.claim_source.startswith("provenance"):
        return (
            f"{head} although the newest record says {state.claim} ({state.claim_source}): the fitted values "
            "were replaced since (a re-export that dropped the fc_norm tensors and filled ones?); vLLM serves "
            "identity norms, not what was trained"
        )
    return (
        f"{head} although the model card claims training ({state.claim_source}): if fc_norm was trained, "
        "its values were lost in export; as it is, acceptance is expected below a trained EAGLE-3.1 draft's"
    )


def _fix(ctx: Context) -> str:
    """The commands, with the target (--target, else the recorded one) and the upgrade's source filled in."""
    target = ctx.target_source or recorded_target(ctx.config) or "TARGET"
    prov = ctx.config.get(PROVENANCE_KEY)
    prov = prov if isinstance(prov, dict) else {}
    upgraded = str(prov.get("operation", "")).startswith("upgrade") and isinstance(prov.get("source"), str)
    source = prov["source"] if upgraded else "EAGLE3_SOURCE"
    draft = ctx.ckpt.description
    return (
        f"Fit the values: `eagle-convert upgrade {source} --init calibrated --target {target} --out OUT` or "
        f"`eagle-convert finetune {draft} --target {target} --out FINETUNED`; "
        f"`eagle-convert smoke {source} {draft} --target {target}` measures how much acceptance it costs."
    )
