"""Shapes and dtypes from the config's formulas (`schemas/tensors.json`).

vLLM itself asserts on shapes at load, but only after minutes of engine start-up and with a
message that names its fused parameter (`qkv_proj`), not the config field that is wrong; this rule
names the field. The aux count gets its own code (E202) because vLLM derives it from config fields
that are easy to get wrong (it ignores the top-level aux ids for Llama drafts).
"""

from __future__ import annotations

from eagle_convert.draft import canonical_name
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.tensorspec import expected_tensors

FLOATS = {"F16", "BF16", "F32", "F64"}
FP8 = {"F8_E4M3", "F8_E5M2", "F8_E8M0"}
INTS = {"I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64"}
_SYMBOL_FIELDS = {
    "H": "hidden_size",
    "T": "target_hidden_size",
    "A": "num_aux_hidden_states",
    "V": "vocab_size",
    "Vd": "draft_vocab_size",
    "I": "intermediate_size",
    "nH": "num_attention_heads",
    "nKV": "num_key_value_heads",
    "hd": "head_dim",
    "qr": "q_lora_rank",
    "kvr": "kv_lora_rank",
    "nope": "qk_nope_head_dim",
    "rope": "qk_rope_head_dim",
    "vh": "v_head_dim",
}


def weights_aux_count(ctx: Context) -> int | None:
    """A as fc.weight's width says (None when fc is absent or its width is not a multiple of T)."""
    disk = ctx.disk_name("fc.weight") or next((n for n in ctx.tensors if canonical_name(n) == "fc.weight"), None)
    t = ctx.env.get("T")
    if disk is None or not t:
        return None
    shape = ctx.tensors[disk].shape
    return shape[1] // t if len(shape) == 2 and shape[1] % t == 0 and shape[1] else None


def check(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    a_weights = weights_aux_count(ctx)
    overrides = {}
    if a_weights is not None and ctx.aux_count is not None and a_weights != ctx.aux_count and ctx.flags["use_aux"]:
        where = "transformer_layer_config.num_aux_hidden_states" if ctx.speculators else "num_aux_hidden_states"
        if ctx.release.has("fc_width_from_config"):
            out.append(
                finding(
                    "E202",
                    f"vLLM builds fc for A={ctx.aux_count} aux states ({ctx.aux_count_source}) but fc.weight holds "
                    f"{a_weights}×{ctx.env['T']} columns: loading fails the shape check",
                    tensor="fc.weight",
                    field=where,
                    fix=f"Set {where}: {a_weights} (and list {a_weights} aux layer ids).",
                )
            )
        else:  # <= 0.21.0: what the draft uses as I325 says elsewhere, a load failure here
            out.append(
                finding(
                    "E202",
                    f"vLLM {ctx.release} always builds fc for 3 aux states (it sizes fc from the config only from "
                    f"0.22.0, vLLM #42764) but fc.weight holds {a_weights}×{ctx.env['T']} columns: loading fails "
                    "the shape check",
                    tensor="fc.weight",
                    field=where,
                    fix=f"Serve the draft on vLLM >= 0.22.0: no config makes vLLM {ctx.release} build a "
                    f"{a_weights}-state fc.",
                )
            )
        overrides["A"] = a_weights  # report fc_norm / input_norm against the weights' A, not twice
    expected = expected_tensors(ctx, **overrides)
    for name, info in ctx.tensors.items():
        vname = ctx.vnames.get(name)
        if vname is None:
            continue
        if name.startswith(("model.", "aux_norm_")):
            vname = canonical_name(name)
        exp = expected.get(vname)
        if exp is None or exp.exists is False:
            continue
        want = tuple(d for d in exp.shape if d is not None)
        if len(want) != len(exp.shape):
            continue  # a config field is missing; the config rule reports it
        if tuple(info.shape) != want:
            out.append(_shape_finding(ctx, name, info.shape, want, exp.formula))
        out += _dtype_findings(ctx, name, info.dtype, exp.kind)
    out += ctx.memo("dtype_summary", lambda: _dtype_summary(ctx))  # the tensors' dtypes only
    return out


def _shape_finding(
    ctx: Context, name: str, got: tuple[int, ...], want: tuple[int, ...], formula: tuple[str, ...]
) -> Finding:
    symbols = sorted(
        {
            s
            for f in formula
            for s in _SYMBOL_FIELDS
            if s in f.replace("*", " ").replace("+", " ").replace("(", " ").replace(")", " ").split()
        }
    )
    fields = ", ".join(f"{_SYMBOL_FIELDS[s]}={ctx.env[s]}" for s in symbols)
    return finding(
        "E201",
        f"{name} is {list(got)} but the config says [{', '.join(formula)}] = {list(want)} "
        f"({fields}): vLLM fails the shape assert at load",
        tensor=name,
    )


def _dtype_findings(ctx: Context, name: str, dtype: str, kind: str) -> list[Finding]:
    if kind == "index":
        if dtype == "I64":
            return []
        if dtype in INTS:
            return [
                finding(
                    "W204",
                    f"{name} is {dtype}; vLLM's draft_id_to_target_id is int64 (the copy widens it)",
                    tensor=name,
                )
            ]
        return [finding("E203", f"{name} is {dtype}: d2t must hold integer offsets (int64)", tensor=name)]
    if dtype in FLOATS:
        return []
    if dtype in FP8 and ctx.vcfg.get("quantization_config"):
        return []
    what = "fp8 without a quantization_config" if dtype in FP8 else dtype
    return [finding("E203", f"{name} is {what}: vLLM needs floating-point weights here", tensor=name)]


def _dtype_summary(ctx: Context) -> list[Finding]:
    floats = {n: t for n, t in ctx.tensors.items() if t.dtype in FLOATS}
    wide = [n for n, t in floats.items() if t.dtype in ("F32", "F64")]
    out = []
    if wide:
        mib = sum(floats[n].nbytes for n in wide) / 2**20
        out.append(
            finding(
                "W204",
                f"{len(wide)} tensors are fp32/fp64 ({mib:.1f} MiB, e.g. {sorted(wide)[0]}); vLLM "
                "serves the draft in the target's dtype, so this only enlarges the files",
                tensor=sorted(wide)[0],
            )
        )
    halves = sorted({t.dtype for t in floats.values()} & {"F16", "BF16"})
    if len(halves) > 1:
        out.append(finding("W204", f"weights mix {' and '.join(halves)}: usually a botched merge of two exports"))
    return out
