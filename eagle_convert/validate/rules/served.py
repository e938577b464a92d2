"""What vLLM serves beyond the draft class: method and class per path (and per release), quantization,
rope, sliding window, special token ids (config family, no target needed).

Each rule states the vLLM 0.32.0 behaviour it rests on; the rules themselves live in
`vllm_model/method.py` (`guess_method`, `architecture_for_method`), `vllm_model/attention.py`
(`rope_parameters`, `sliding_windows`) and `vllm_model/tables.py`.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.keys import _QUANT_SUFFIXES
from eagle_convert.vllm_model import (
    ARCHITECTURES,
    ARCHITECTURES_FROM,
    CHANGES,
    DRAFT_QUANT_SOURCE,
    SLIDING_WINDOW_FIELDS,
    SPECULATORS_KINDS_IN,
    WRITE_ARCHITECTURE,
    Change,
    architecture_for_method,
    guess_method,
    sliding_windows,
)

# Dtypes that only quantized checkpoints hold (beside keys._QUANT_SUFFIXES' tensor names).
_QUANT_DTYPES = ("F8_E4M3", "F8_E5M2", "F8_E8M0", "I8", "U8", "I32", "U32")
_VOCAB_TENSORS = ("d2t", "t2d")


def check(ctx: Context) -> list[Finding]:
    return [
        *_release_class(ctx),
        *_architecture(ctx),
        *_quantization(ctx),
        *_rope_fields(ctx),
        *_sliding_window(ctx),
        *_special_ids(ctx),
    ]


# A speculators algorithm past its window raises, as this changes.CHANGES entry says.
_REMOVED_RAISES = {"peagle": "speculators_peagle_raises"}


def _window(name: str, speculators: bool) -> Change | None:
    """The changes.CHANGES entry that bounds the draft class or speculators algorithm `name`."""
    key = SPECULATORS_KINDS_IN.get(name) if speculators else ARCHITECTURES_FROM.get(name)
    return next((c for c in CHANGES if c.key == key), None)


def _release_class(ctx: Context) -> list[Finding]:
    """E301 for a class (or speculators algorithm) vLLM has, but not in the release at hand.

    read_config gives no class there (`registered`); config.py's E301 covers names no release has.
    Before 0.22.0 `speculators_model_type: peagle` is no registered algorithm
    (transformers_utils/configs/speculators/algos.py SUPPORTED_SPECULATORS_TYPES, 0.21.0 vs 0.22.0); from
    0.34.0 it raises (releases "speculators_peagle_raises"). A plain config naming a P-EAGLE class never
    reaches the registry under method eagle3 (EAGLEConfig renames it Eagle3Peagle...): config.py's E301.
    """
    rel = ctx.release
    if ctx.impl is not None:
        return []
    if ctx.speculators:
        kind = ctx.view.speculators_kind or ""
        change = _window(kind, True)
        if change is None or rel.has(change.key):
            return []
        if change.first is None or rel.at_least(change.first):  # past the window: the algorithm was removed
            gone = next(c for c in CHANGES if c.key == _REMOVED_RAISES[kind])
            return [
                finding(
                    "E301",
                    f"speculators_model_type {kind!r}: in vLLM {rel} {gone.what} ({gone.cite}); such drafts load "
                    f"on vLLM {change.span} only",
                    field="speculators_model_type",
                    fix=f"Serve the draft on vLLM {change.span}: no class of vLLM {rel} loads it.",
                )
            ]
        return [
            finding(
                "E301",
                f"speculators_model_type {kind!r}: vLLM {rel} has no such speculators algorithm and raises "
                f"`Expected one of ...`; {change.what} only from {change.first} (see {change.cite})",
                field="speculators_model_type",
                fix=f"Serve the draft on vLLM >= {change.first}.",
            )
        ]
    change = _window(ctx.arch or "", False)
    if change is None or ARCHITECTURES.get(ctx.arch or "") is None:
        return []
    declared = (ctx.config.get("architectures") or [""])[0]
    how = f"{declared!r} becomes {ctx.arch!r} under method eagle3" if declared != ctx.arch else repr(declared)
    return [
        finding(
            "E301",
            f"architectures[0] {how}, which vLLM {rel} does not register: {change.what} only from "
            f"{change.first} (see {change.cite})",
            field="architectures",
            fix=f"Serve the draft on vLLM >= {change.first}: no class of vLLM {rel} loads this draft as trained.",
        )
    ]


def _architecture(ctx: Context) -> list[Finding]:
    """W312: a plain causal-LM class that only becomes an EAGLE-3 class under method eagle3."""
    archs = ctx.config.get("architectures")
    if ctx.speculators or ctx.impl is None or ctx.view.mtp_rewrite or not isinstance(archs, list) or not archs:
        return []
    declared = archs[0]
    if not isinstance(declared, str) or declared in ARCHITECTURES:
        return []
    path = ctx.ckpt.description
    method = guess_method(path)
    built = architecture_for_method(declared, method)
    consequence = {
        "eagle3": f"the same {ctx.impl}",
        "eagle": f"the EAGLE-1 class {built}, which cannot load EAGLE-3 weights",
        "draft_model": f"a standalone {built} from the draft's one layer, which has no parameter for fc or the "
        "aux states and fails to load",
    }.get(method, f"{built} (method {method})")
    target = ctx.target.architectures if ctx.target else ()
    whose = "the target's class" if target and target[0] == declared else "a plain causal-LM class"
    recommended = WRITE_ARCHITECTURE.get(ctx.attention, WRITE_ARCHITECTURE["llama"])
    return [
        finding(
            "W312",
            f"architectures[0] {declared!r} is {whose}: vLLM builds {ctx.impl} only when served "
            f"with method eagle3 (EAGLEConfig renames it {ctx.arch}); without a method vLLM guesses "
            f"one from the model path ({path!r} gives {method}, i.e. {consequence}), and SGLang "
            "builds the full model (sglang #9135)",
            field="architectures",
            fix=f'Set architectures to ["{recommended}"] and serve with "method": "eagle3".',
        )
    ]


def _is_quantized(name: str, dtype: str) -> bool:
    return name not in _VOCAB_TENSORS and (dtype in _QUANT_DTYPES or name.endswith(_QUANT_SUFFIXES))


def _quantization(ctx: Context) -> list[Finding]:
    """E313 / W311: vLLM quantizes the draft by its own config.json only (get_draft_quant_config)."""
    qcfg = ctx.vcfg.get(DRAFT_QUANT_SOURCE)
    quantized = ctx.memo("quantized", lambda: [n for n, t in ctx.tensors.items() if _is_quantized(n, t.dtype)])
    method = qcfg.get("quant_method", "unknown method") if isinstance(qcfg, dict) else None
    if qcfg and not quantized:
        copied = ""
        if ctx.target and ctx.target.quantization == qcfg:
            copied = " (it is the target's quantization_config, copied)"
        return [
            finding(
                "E313",
                f"quantization_config ({method}) is set but no tensor is quantized{copied}: vLLM "
                "0.32 builds the draft's layers quantized from the draft's own config "
                "(get_draft_quant_config) and loads float weights into them",
                field="quantization_config",
            )
        ]
    if quantized and qcfg:
        return [
            finding(
                "W311",
                f"quantized draft ({method}; {len(quantized)} quantized or scale tensors, e.g. "
                f"{min(quantized)}): static checks cover names and unquantised shapes only",
                field="quantization_config",
            )
        ]
    return []


def _rope_fields(ctx: Context) -> list[Finding]:
    """W315: legacy and Transformers-5 rope fields that say different things."""
    cfg, out = ctx.vcfg, []
    params = cfg.get("rope_parameters")
    if not isinstance(params, dict) or any(isinstance(v, dict) for v in params.values()):
        return []
    top, inner = cfg.get("rope_theta"), params.get("rope_theta")
    legacy = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), dict) else None
    if top is not None and inner is not None and float(top) != float(inner) and not (legacy and "rope_theta" in legacy):
        out.append(
            finding(
                "W315",
                f"rope_theta is {top!r} but rope_parameters.rope_theta is {inner!r}: vLLM 0.32 "
                f"(Transformers 5) uses {inner!r}, readers of rope_theta use {top!r}",
                field="rope_theta",
            )
        )
    if legacy:
        strip = ("rope_theta", "type")
        a = {k: v for k, v in legacy.items() if k not in strip} | {
            "rope_type": legacy.get("rope_type", legacy.get("type"))
        }
        b = {k: v for k, v in params.items() if k not in strip} | {
            "rope_type": params.get("rope_type", params.get("type"))
        }
        if a != b:
            out.append(
                finding(
                    "W315",
                    f"rope_scaling {legacy} and rope_parameters {params} differ: vLLM 0.32 "
                    "(Transformers 5) uses rope_scaling and drops rope_parameters",
                    field="rope_scaling",
                )
            )
    return out


def _sliding_window(ctx: Context) -> list[Finding]:
    """W316: a window the config asks for but the class never applies (every layer full attention)."""
    cfg, cls = ctx.vcfg, ctx.view.draft_class
    if cls is None:
        return []
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    asks = []
    if cfg.get("use_sliding_window") is True:
        asks.append("use_sliding_window: true")
    if isinstance(types, list) and "sliding_attention" in types:
        asks.append("layer_types has sliding_attention")
    if isinstance(window, int) and window > 0 and cfg.get("use_sliding_window") is not False and not asks:
        asks.append(f"sliding_window: {window}")
    if not asks or any(w is not None for w in sliding_windows(ctx.view)):
        return []
    reads = ", ".join(SLIDING_WINDOW_FIELDS.get(cls.name, ())) or "none of the sliding-window fields"
    return [
        finding(
            "W316",
            f"the config asks for a sliding window ({'; '.join(asks)}) but vLLM's {cls.name} reads "
            f"{reads}, and by them every draft layer gets full attention",
            field="sliding_window" if "sliding_window" in cfg else "use_sliding_window",
        )
    ]


def _ids(value: Any) -> list[int]:
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def _special_ids(ctx: Context) -> list[Finding]:
    """W317: bos/eos/pad ids outside [0, vocab_size) (the config came from another model family)."""
    v = ctx.env.get("V") or ctx.env.get("TV")
    if not v:
        return []
    bad = [
        (k, i)
        for k in ("bos_token_id", "eos_token_id", "pad_token_id")
        for i in _ids(ctx.vcfg.get(k))
        if not 0 <= i < v
    ]
    if not bad:
        return []
    listed = ", ".join(f"{k} {i}" for k, i in bad)
    target = ctx.target.text if ctx.target else {}
    theirs = ", ".join(f"{k} {target[k]}" for k, _ in bad if k in target)
    return [
        finding(
            "W317",
            f"{listed} outside the vocabulary [0, {v}): the config was copied from another model "
            f"family{f' (the target has {theirs})' if theirs else ''}; vLLM takes special tokens "
            "from the target and never reads these",
            field=bad[0][0],
        )
    ]
