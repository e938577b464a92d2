"""W310: a draft whose max_position_embeddings is below the serving context, as each vLLM release serves it.

What vLLM does with such a draft moved twice (releases.py): up to 0.26 nothing (the draft's rotary
cache stays as short as its config says, vLLM #48894); 0.27-0.32 raise the draft's
max_position_embeddings to the target's max_model_len for every rope type (#49343); 0.33 raises it only
when every rope type is cache-only, and otherwise Model Runner V2 lowers the TARGET's max_model_len to
the draft's. Which of these serves the draft as trained depends on the rope type as well.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.validate.findings import Finding, Impact, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model import ROPE_TYPES_UNSCALED_MAX_LEN, positive_int, rope_parameters

# get_rope (model_executor/layers/rotary_embedding/__init__.py, 0.21.0-0.34.0) builds these with
# original_max_position_embeddings, not max_position_embeddings: their cos/sin cache spans
# original_max_position_embeddings x factor whatever max_position_embeddings is raised to.
_CACHE_FROM_ORIGINAL = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")
_CONTEXT_RAISE_CITE = "SpeculativeConfig._maybe_override_draft_max_position_embeddings"


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else default


def serving_context(ctx: Context) -> tuple[int | None, str]:
    """The context the target is served with: --max-model-len (or the serve config's), else the target's."""
    if ctx.serving_context:
        return ctx.serving_context, ctx.serving_source
    return (ctx.target.max_position_embeddings if ctx.target else None), "the target's max_position_embeddings"


def draft_max_model_len(vcfg: dict[str, Any], rope: dict[str, Any], mpe: int) -> int:
    """The draft ModelConfig's max_model_len: max_position_embeddings, times `factor` for scaling rope types.

    config/model.py `_get_and_verify_max_len` (0.33.0): the types in ROPE_TYPES_UNSCALED_MAX_LEN keep
    max_position_embeddings (longrope: a top-level original_max_position_embeddings first).
    """
    rope_type = rope.get("rope_type", "default")
    if rope_type == "longrope":
        return positive_int(vcfg.get("original_max_position_embeddings")) or mpe
    if rope_type in ROPE_TYPES_UNSCALED_MAX_LEN:
        return mpe
    return int(mpe * _number(rope.get("factor"), 1.0))


def check(ctx: Context) -> list[Finding]:
    serving, source = serving_context(ctx)
    mpe = positive_int(ctx.vcfg.get("max_position_embeddings"))
    if not serving or mpe is None or mpe >= serving:
        return []
    rel = ctx.release
    rope = rope_parameters(ctx.vcfg)
    rope_type = str(rope.get("rope_type", "default"))
    field = "transformer_layer_config.max_position_embeddings" if ctx.speculators else "max_position_embeddings"
    head = f"max_position_embeddings is {mpe} but the serving context is {serving} ({source})"
    cache = mpe
    if rope_type in _CACHE_FROM_ORIGINAL:
        original = positive_int(rope.get("original_max_position_embeddings")) or mpe
        cache = int(original * _number(rope.get("factor"), 1.0))

    def w310(text: str, impact: Impact) -> list[Finding]:
        return [finding("W310", f"{head}: {text}", field=field, impact=impact)]

    if not rel.has("draft_context_raised"):
        if cache >= serving:
            return w310(
                f"vLLM {rel} does not raise the draft's limit, but its {rope_type} rotary cache spans {cache} "
                "positions, so it is served as trained",
                "hygiene",
            )
        return w310(
            f"vLLM {rel} does not raise the draft's limit (from 0.27.0, vLLM #49343), so positions past "
            f"{cache} crash under torch.compile or read garbage rotary entries in eager mode (vLLM #48894)",
            "computes-differently",
        )
    cache_only = rel.values("draft_context_rope_gated")
    if cache_only and rope_type not in cache_only:
        limit = min(draft_max_model_len(ctx.vcfg, rope, mpe), serving)
        if limit >= serving:
            return w310(
                f"rope_type {rope_type} is not cache-only, so vLLM {rel} keeps the draft's limit, and its "
                f"max_model_len ({limit}) covers the serving context: served as trained",
                "hygiene",
            )
        return w310(
            f"rope_type {rope_type} is not cache-only, so vLLM {rel} keeps the draft's limit and Model Runner "
            f"V2, {rel.v2_role()}, lowers the target's max_model_len from {serving} to "
            f"{limit} (VllmConfig._limit_max_model_len_to_draft)",
            "caps-context",
        )
    raised = (
        f"vLLM {rel} raises the draft's limit to the target's max_model_len ({_CONTEXT_RAISE_CITE}) but the "
        "draft has not seen positions past its own"
    )
    if rope_type in _CACHE_FROM_ORIGINAL and cache < serving:
        return w310(
            f"{raised}, and {rope_type} sizes its rotary cache from original_max_position_embeddings x factor "
            f"({cache}), so positions past {cache} fall outside it (inferred; 0.33.0 stops raising such drafts)",
            "computes-differently",
        )
    if rope_type in ("dynamic", "longrope"):
        return w310(
            f"{raised}, and {rope_type} derives its frequencies from the raised value, not the trained one "
            "(inferred; 0.33.0 stops raising such drafts)",
            "computes-differently",
        )
    return w310(f"{raised}; the raise only resizes the rotary cache, so it is served as trained", "hygiene")
