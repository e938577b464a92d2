"""Aux layer ids: which target layers feed the draft, the commonest silent failure of EAGLE-3.

vLLM never checks them: missing ids fall back to (2, N//2, N-3) (about 1% acceptance for drafts
trained on other layers), repeated ids collapse into fewer captured states, and a list of the wrong
length only crashes at the first decode. Ids follow vLLM's convention: k = the residual stream
after k target layers, so 0..N are valid for an N-layer target.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.engines import Conversion, fmt_taps
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.producer import producer_conversion
from eagle_convert.validate.rules.shapes import weights_aux_count
from eagle_convert.vllm_model import as_list, default_aux_ids, eagle_section

_NESTED = "eagle_aux_hidden_state_layer_ids"  # inside eagle_config: read by V1 only (up to 0.33.0)

# Producers whose trainer, given no aux ids, captures the same target states as vLLM's default
# (2, N//2, N-3): SafeAILab's training target records the stream before layers {2, N//2, N-3};
# SpecForge (specforge/algorithms/model_providers.py `resolve_eagle_capture_layers`) falls back to
# layer outputs [1, N//2-1, N-4], which SGLang's `set_eagle3_layers_to_capture` captures one layer
# later, i.e. vLLM's ids. For their drafts a missing id list is hygiene, not a silent failure.
DEFAULT_IDS_PRODUCERS = {"safeailab": "SafeAILab", "specforge": "SpecForge"}


# `speculators convert` writes `eagle_aux_hidden_state_layer_ids: null` unless given the ids. Every known
# release reads null as absent, never as an error: the speculators path copies only a truthy list
# (0.21.0 ... 0.34.0 transformers_utils/configs/speculators/algos.py update_eagle3: `if
# config_dict.get("eagle_aux_hidden_state_layer_ids")`), the runners fall back on `if not layer_ids`
# (0.32.0 v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config, v1/worker/gpu/spec_decode/
# eagle/eagle3_utils.py get_eagle3_aux_layers_from_config). The draft then taps the default layers.
_NULL_FIX = (
    "Replace null with the ids the draft was trained on (`speculators convert`: pass "
    "eagle_aux_hidden_state_layer_ids in --algorithm-kwargs); write vLLM's defaults only if it was trained on them."
)


def _null_where(ctx: Context) -> str | None:
    """Where the config writes the aux ids as null (top level, else eagle_config), if it does."""
    if "eagle_aux_hidden_state_layer_ids" in ctx.config and ctx.config["eagle_aux_hidden_state_layer_ids"] is None:
        return "eagle_aux_hidden_state_layer_ids"
    nested = ctx.config.get("eagle_config")
    if isinstance(nested, dict) and _NESTED in nested and nested[_NESTED] is None:
        return f"eagle_config.{_NESTED}"
    return None


def target_layers(ctx: Context) -> int | None:
    return ctx.target.num_layers if ctx.target else None


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check(ctx: Context) -> list[Finding]:
    if not ctx.flags["use_aux"]:
        return []
    ids, where = ctx.view.aux_ids, ctx.view.aux_ids_where
    n = target_layers(ctx)
    a = weights_aux_count(ctx) or ctx.aux_count
    out: list[Finding] = []
    nested = eagle_section(ctx.vcfg).get(_NESTED)
    if ids is None and nested and not ctx.release.has_v1:  # from 0.34.0: no runner reads eagle_config's ids
        out.append(_v2_ignores(ctx, as_list(nested), f"eagle_config.{_NESTED}", n, a))
    elif ids is None:
        default = default_aux_ids(n) if n else None
        producer = DEFAULT_IDS_PRODUCERS.get(ctx.info.layout)
        trained = (
            f" ({producer} trains on exactly these when it writes no ids, so it is served as trained)"
            if producer
            else ""
        )
        layers = f"{default} for this {n}-layer target" if default else "(2, N//2, N-3)"
        null = _null_where(ctx)
        head = (
            f"{null} is null, which vLLM {ctx.release.version} reads as absent"
            if null
            else "no eagle_aux_hidden_state_layer_ids"
        )
        out.append(
            finding(
                "W320",
                f"{head}: vLLM taps {layers}{trained}",
                field=null or "eagle_aux_hidden_state_layer_ids",
                impact="hygiene" if producer else None,
                fix=_NULL_FIX if null else None,
            )
        )
        if default and (len(set(default)) < 3 or min(default) < 0):
            out.append(
                finding(
                    "E503",
                    f"vLLM's default aux ids {default} collide or go negative for a {n}-layer "
                    "target: fewer states than fc expects arrive and the first decode crashes",
                    field="eagle_aux_hidden_state_layer_ids",
                )
            )
        elif a is not None and a != 3:
            out.append(
                finding(
                    "E202",
                    f"no aux ids, so vLLM captures its 3 default layers, but fc expects {a} aux "
                    "states: the first decode crashes",
                    field="eagle_aux_hidden_state_layer_ids",
                    fix=f"Write {a} explicit eagle_aux_hidden_state_layer_ids.",
                )
            )
    else:
        out += _check_ids(ctx, ids, where, n, a)
    if a is not None and a != 3:
        out.append(
            finding(
                "I325",
                f"the draft uses {a} aux hidden states; vLLM before 0.22 (PR #42764) builds fc for 3",
                field="num_aux_hidden_states",
            )
        )
    return out


def _check_ids(ctx: Context, ids: list[Any], where: str, n: int | None, a: int | None) -> list[Finding]:
    out = []
    bad = [i for i in ids if not _is_id(i) or (n is not None and i > n)]
    if bad:
        limit = f"[0, {n}] for this {n}-layer target" if n is not None else "non-negative integers"
        out.append(
            finding(
                "E322",
                f"{where} = {ids}: {bad} outside {limit}; vLLM never captures such a layer and the "
                "first decode crashes",
                field=where,
            )
        )
    if len({repr(i) for i in ids}) != len(ids):
        out.append(
            finding(
                "E321",
                f"{where} = {ids} repeats ids: vLLM captures each layer once, so fewer states than "
                "fc expects arrive and the first decode crashes",
                field=where,
            )
        )
    elif a is not None and len(ids) != a:
        out.append(
            finding(
                "E202",
                f"{where} lists {len(ids)} layers but fc expects {a} aux states "
                f"({ctx.aux_count_source}): the first decode crashes",
                field=where,
                fix=f"List exactly {a} aux layer ids (or fix num_aux_hidden_states).",
            )
        )
    top = ctx.vcfg.get("eagle_aux_hidden_state_layer_ids")
    nested = eagle_section(ctx.vcfg).get("eagle_aux_hidden_state_layer_ids")
    if ctx.view.aux_ids_v2 is None:
        out.append(_v2_ignores(ctx, ids, where, n, a))
    # eagle_config ids one below the top-level ones are the same layers in SGLang's convention (it taps
    # id + 1: what `validate --for sglang` asks for), not a disagreement
    shifted = _sglang_mirror(as_list(top), as_list(nested)) if top and nested else False
    if top and nested and not shifted and sorted(map(repr, as_list(top))) != sorted(map(repr, as_list(nested))):
        out.append(
            finding(
                "W324",
                f"top-level aux ids {top} differ from eagle_config's {nested}; vLLM uses the top-level list",
                field="eagle_config.eagle_aux_hidden_state_layer_ids",
            )
        )
    return out


def _sglang_mirror(top: list[Any], nested: list[Any]) -> bool:
    """Whether `nested` is `top` in SGLang's convention (each id - 1, the order kept)."""
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in [*top, *nested])
    return ints and len(top) == len(nested) and all(t - 1 == m for t, m in zip(top, nested, strict=True))


def _v2_ignores(ctx: Context, ids: list[Any], where: str, n: int | None, a: int | None) -> Finding:
    """W323: Model Runner V2 reads none of the places that hold ids, so it taps the target's default layers.

    E202 instead where V2 runs every target (the GPU default from 0.29.0, the only runner from 0.34.0) and
    fc is built for other than 3 aux states: the 3 default states meet it at the first forward.
    """
    rel = ctx.release
    if rel.v2_default_everywhere() and a is not None and a != 3:
        return _v2_count_mismatch(ctx, ids, where, n, a)
    default = default_aux_ids(n) if n else None
    instead = f"{default} for this {n}-layer target" if default else "(2, N//2, N-3) of an N-layer target"
    conv = producer_conversion(ctx, ids, where)
    shifted = conv is None and default is not None and sorted(ids) == [i - 1 for i in default]
    # The layers the ids were trained on: their producer's convention (engines/producers.py); for an
    # unknown producer, (1, N//2-1, N-4) is the output-of-layer name of vLLM's default layers (the
    # convention of every trainer known to write eagle_config ids), anything else is taken as written.
    trained = conv.trained if conv is not None else tuple(i + 1 for i in ids) if shifted else tuple(ids)
    same = trained is not None and default is not None and tuple(default) == trained
    v1 = "; V1 reads them one lower, W603" if rel.has_v1 else ""
    who = f"{conv.producer.name} trained these ids on" if conv is not None else "these output-of-layer ids name"
    if conv is not None and trained is None:
        served = f" ({conv.why})"
    elif same and trained != tuple(ids):
        served = f" (the layers {who}: served as trained on V2{v1})"
    elif same:
        served = " (the same layers: served as trained)"
    elif conv is not None and trained != tuple(ids):
        served = f" ({conv.producer.name} trained them on {fmt_taps(trained or ())})"
    else:
        served = ""
    return finding(
        "W323",
        f"aux ids only in {where}: vLLM {rel}'s Model Runner V2, {rel.v2_role()}, never reads "
        f"them, so it taps {instead} instead of {ids}{served}",
        field=where,
        fix=_top_level_fix(conv, ids, shifted),
        impact="hygiene" if same else "computes-differently",
    )


def _top_level_fix(conv: Conversion | None, ids: list[Any], shifted: bool = False) -> str:
    """The one-line advice: the ids in vLLM's convention at the top level (engines/producers.py)."""
    plus = [i + 1 for i in ids] if all(type(i) is int for i in ids) else None
    if conv is None and shifted:
        return f"Also write eagle_aux_hidden_state_layer_ids: {plus} at the top level (output-of-layer {ids})."
    if conv is None:
        return (
            f"Also write eagle_aux_hidden_state_layer_ids at the top level in vLLM's convention: {ids} if "
            f"trained as vLLM reads them, {plus} if as SGLang reads eagle_config."
        )
    if conv.ids is None:
        return f"Write eagle_aux_hidden_state_layer_ids at the top level in vLLM's convention: {conv.why}."
    return f"Also write eagle_aux_hidden_state_layer_ids: {conv.ids} at the top level ({conv.producer.name}'s {ids})."


def _v2_count_mismatch(ctx: Context, ids: list[Any], where: str, n: int | None, a: int) -> Finding:
    """E202: V2 taps its 3 default layers, but the draft class built fc for `a` aux states."""
    rel = ctx.release
    default = f" {default_aux_ids(n)}" if n else ""
    v1 = (
        "; only the V1 runner (CPU, VLLM_USE_V2_MODEL_RUNNER=0) reads them"
        if rel.has_v1
        else "; no runner of this release reads them"
    )
    return finding(
        "E202",
        f"aux ids only in {where} ({len(ids)} ids): vLLM {rel}'s Model Runner V2, {rel.v2_role()}, never reads "
        f"them{v1}, so it captures its 3 default layers{default} while fc expects {a} aux states "
        f"({ctx.aux_count_source}): the first forward fails in combine_hidden_states (inferred from source: "
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config)",
        field=where,
        fix=_top_level_fix(producer_conversion(ctx, ids, where), ids),
    )
