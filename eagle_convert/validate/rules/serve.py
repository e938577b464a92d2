"""The deployment's serve config against the draft (family `serve`, E901 ...; runs with --speculative-config).

`vllm_model/serve_config.py` refuses what vLLM's `SpeculativeConfig` refuses by itself (unknown keys,
types, literals: a usage error); these rules judge what the keys mean for this draft on the release
checked (`ctx.release`): the method against the draft class, num_speculative_tokens against the k the
draft records or `check` measures, lossy rejection sampling, draft_lm_head_quantization against the
draft's own lm_head, and `quantization` against the draft's quantization_config. The context
(`max_model_len` / `--max-model-len`) reaches the context rule of the config family through
`ctx.serving_context`, so it is judged once.
"""

from __future__ import annotations

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model import (
    DRAFT_QUANT_SOURCE,
    EAGLE3_METHOD,
    LOSSY_REJECTION,
    ServeConfig,
    architecture_for_method,
    guess_method,
    no_k_source,
    recorded_k,
    served_method,
)


def check(ctx: Context) -> list[Finding]:
    serve = ctx.serve
    if serve is None or not serve.given:
        return []
    return [
        *_method(ctx, serve),
        *_k(ctx, serve),
        *_rejection(ctx, serve),
        *_lm_head_quantization(ctx, serve),
        *_quantization(ctx, serve),
        *_parallel_drafting(ctx, serve),
    ]


def _method(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """E901: a method (given, guessed from the model path, or replaced by it) that does not build the EAGLE-3 class."""
    rel = f"vLLM {ctx.release.version}"
    path = serve.model or ctx.ckpt.description
    method, from_path = served_method(serve.method, path, ctx.release)
    if method == EAGLE3_METHOD:
        return []
    if serve.method is None:
        said = f"no method: {rel} guesses it from the model path ({path!r} gives {method})"
    elif from_path:
        said = f"method {serve.method!r}: {rel} replaces it with the one the model path names ({path!r} gives {method})"
    else:
        said = f"method {method!r}"
        if guess_method(path) == EAGLE3_METHOD and not ctx.release.has("path_overrides_method"):
            said += f" ({rel} never replaces a configured method by the one the path names, as 0.21.0-0.33.0 did)"
    declared = ctx.arch or ""
    if method == "eagle":
        built = architecture_for_method(declared, "eagle") if declared else "an EAGLE-1 class"
        what = (
            f"the EAGLE-1 drafter with class {built}, which is never fed the target's aux hidden states "
            "(only method eagle3 is) and cannot run this EAGLE-3 draft"
        )
    elif method == "draft_model":
        what = (
            f"a standalone draft model from the draft's config ({declared or 'its architectures'}), which has "
            "no parameter for fc or the aux states"
        )
    else:
        what = f"a {method} drafter, not an EAGLE-3 one"
    return [
        finding(
            "E901",
            f"{serve.source}: {said}: {rel} builds {what}",
            field="method",
            fix=f'Add "method": "{EAGLE3_METHOD}" to the speculative config.',
        )
    ]


def _k(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """E902: no k and no n_predict (vLLM raises); W903: a k other than the one the draft records."""
    rel = f"vLLM {ctx.release.version}"
    k = serve.k
    if k is None:
        if ctx.vcfg.get("n_predict") is not None or ctx.config.get("n_predict") is not None:
            return []
        return [
            finding(
                "E902",
                f"{serve.source} has no num_speculative_tokens and the draft's config no n_predict: {rel} raises "
                'ValueError ("A speculative model was provided, but `num_speculative_tokens` was not provided"; '
                f"{no_k_source(ctx.release)})",
                field="num_speculative_tokens",
            )
        ]
    recorded, where = recorded_k(ctx.config)
    if recorded is not None and recorded != k:
        return [
            finding(
                "W903",
                f"{serve.source} serves num_speculative_tokens {k} but the draft records {recorded} ({where}, "
                f"what `vllm serve DRAFT` would use): acceptance past position {min(k, recorded)} was not "
                "measured for this deployment",
                field="num_speculative_tokens",
            )
        ]
    return []


def _rejection(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """E904 / W905: a lossy rejection_sample_method (the output is not the target's)."""
    method = serve.rejection_sample_method
    why = LOSSY_REJECTION.get(method)
    if why is None:
        return []
    text = f'{serve.source}: rejection_sample_method "{method}" {why}; vLLM {ctx.release.version} does not'
    if ctx.identity_required:
        return [
            finding(
                "E904",
                f"{text} reproduce the target's output, and this check requires output identity ([output] identity)",
                field="rejection_sample_method",
            )
        ]
    return [
        finding(
            "W905",
            f"{text} serve the target's distribution: outputs differ from the target alone's",
            field="rejection_sample_method",
        )
    ]


def _own_lm_head(ctx: Context) -> str | None:
    """Why the draft keeps a head of its own (None: none found, it may share the target's)."""
    head = ctx.disk_name("lm_head.weight")
    if head is None:
        return None
    if ctx.env.get("reduced"):
        return f"{head} maps a reduced vocabulary ({ctx.env.get('Vd')} of {ctx.env.get('TV')} tokens)"
    return f"it ships {head}, which vLLM shares with the target only when it is bit-identical to the target's"


def _lm_head_quantization(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """E906: draft_lm_head_quantization (0.33.0) with a draft that keeps its own lm_head."""
    quant = serve.data.get("draft_lm_head_quantization")
    own = _own_lm_head(ctx) if quant is not None else None
    if own is None:
        return []
    return [
        finding(
            "E906",
            f"{serve.source}: draft_lm_head_quantization {quant!r} needs a draft that shares the target's lm_head, "
            f"but this draft has its own ({own}): vLLM {ctx.release.version} raises ValueError "
            '("draft_lm_head_quantization needs a drafter that shares the target lm_head."; '
            "v1/worker/gpu/spec_decode/eagle/utils.py)",
            field="draft_lm_head_quantization",
        )
    ]


def _quantization(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """E907: `quantization` other than the draft's quantization_config; W908: quantizing a float draft."""
    quant = serve.data.get("quantization")
    if quant is None:
        return []
    rel = f"vLLM {ctx.release.version}"
    qcfg = ctx.vcfg.get(DRAFT_QUANT_SOURCE)
    written = qcfg.get("quant_method") if isinstance(qcfg, dict) else None
    if written and written != quant:
        return [
            finding(
                "E907",
                f"{serve.source}: quantization {quant!r} but the draft's {DRAFT_QUANT_SOURCE} says {written!r}: {rel} "
                "raises ValueError (config/model.py ModelConfig._verify_quantization: the method in the model "
                "config does not match the `quantization` argument)",
                field="quantization",
                fix=f"Drop quantization from the speculative config, or set it to {written!r}.",
            )
        ]
    if not written:
        return [
            finding(
                "W908",
                f"{serve.source}: quantization {quant!r} on a draft with no {DRAFT_QUANT_SOURCE}: {rel} quantizes the "
                "draft's float weights at load (the draft's ModelConfig gets quantization from the speculative "
                "config, config/speculative.py SpeculativeConfig.__post_init__), so it drafts with weights it was "
                "not trained with",
                field="quantization",
            )
        ]
    return []


# The classes that build mask_hidden for parallel drafting (llama_eagle3.py, qwen3_eagle3.py
# `load_weights`; the MLA class has no parallel drafting).
_PARALLEL_ATTENTION = ("llama", "qwen3")


def _parallel_drafting(ctx: Context, serve: ServeConfig) -> list[Finding]:
    """W909 / E910: `parallel_drafting` against the draft's mask_hidden (a P-EAGLE draft ships it).

    From 0.34.0 (releases "parallel_drafting_eagle3_refused") parallel_drafting: true fails the engine start for
    eagle3 whatever the tensors, and a mask_hidden is always skipped.
    """
    rel = f"vLLM {ctx.release.version}"
    on = serve.data.get("parallel_drafting") is True
    removed = ctx.release.has("parallel_drafting_eagle3_refused")
    if removed and on:
        return [
            finding(
                "E910",
                f'{serve.source} sets parallel_drafting: true: {rel} raises ValueError ("parallel_drafting is only '
                f"supported by the dflash and dspark methods, not '{serve.method or EAGLE3_METHOD}'.\"; "
                "config/speculative.py SpeculativeConfig._verify_args), whatever the draft's tensors",
                field="parallel_drafting",
                fix=f"Drop parallel_drafting from the speculative config: {rel} has no parallel drafting for EAGLE-3 "
                "(a P-EAGLE draft needs vLLM 0.22.0-0.33.0).",
            )
        ]
    if ctx.attention not in _PARALLEL_ATTENTION:
        return []
    mask = next((n for n in ctx.tensors if "mask_hidden" in n), None)
    if mask is not None and removed:
        return [
            finding(
                "W909",
                f"the draft ships {mask} (a parallel-drafting P-EAGLE draft) but {rel} has no parallel drafting for "
                'EAGLE-3: it skips the tensor ("mask_hidden found in weights but parallel drafting is not supported '
                'for EAGLE-3") and drafts one token per forward pass, not as the draft was trained',
                tensor=mask,
                fix='Serve the draft on vLLM 0.22.0-0.33.0 with "parallel_drafting": true; no option of '
                f"{rel} serves it as trained.",
            )
        ]
    if mask is not None and not on:
        return [
            finding(
                "W909",
                f"the draft ships {mask} (a parallel-drafting P-EAGLE draft) but {serve.source} does not set "
                f'parallel_drafting: {rel} skips it ("mask_hidden found in weights but model is not configured '
                'for parallel drafting") and drafts one token per forward pass, not as the draft was trained',
                tensor=mask,
            )
        ]
    if on and mask is None:
        return [
            finding(
                "E910",
                f"{serve.source} sets parallel_drafting but the draft has no mask_hidden: {rel} raises ValueError "
                '("mask_hidden not found in weights but model is configured for parallel drafting"; '
                "model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.load_weights)",
                field="parallel_drafting",
            )
        ]
    return []
