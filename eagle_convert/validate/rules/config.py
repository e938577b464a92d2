"""config.json as vLLM reads it: the class it resolves, fields it needs, flags that conflict.

These are the failures that happen before a single weight is read (unregistered architecture,
MTP hijack, unsupported activation) and the ones that never fail at all (a flag whose default
differs between vLLM's two config paths, a flag written where vLLM does not look).
"""

from __future__ import annotations

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules import contextlen, windows
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.producer import trained_norm_before_residual
from eagle_convert.vllm_model import (
    ARCHITECTURES,
    FLAG_NAMES,
    MAX_COUNT,
    SPECULATORS_ARCHITECTURES,
    WRITE_ARCHITECTURE,
    eagle_section,
    positive_int,
)

REQUIRED_FIELDS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size")
MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
OPTIONAL_POSITIVE = (
    "target_hidden_size",
    "draft_vocab_size",
    "num_aux_hidden_states",
    "num_key_value_heads",
    "head_dim",
    "q_lora_rank",
)
_SPECULATORS_TOP = {"draft_vocab_size", "target_hidden_size", "eagle_aux_hidden_state_layer_ids", *FLAG_NAMES}


def check(ctx: Context) -> list[Finding]:
    return [*_architecture(ctx), *_fields(ctx), *_flags(ctx), *windows.check(ctx), *contextlen.check(ctx)]


def _architecture(ctx: Context) -> list[Finding]:
    cfg, out = ctx.config, []
    recommended = WRITE_ARCHITECTURE.get(ctx.info.attention, WRITE_ARCHITECTURE["llama"])
    forced_llama = False
    if ctx.speculators:
        inner_type = ctx.vcfg.get("model_type", "llama")
        kind = cfg.get("speculators_model_type")
        if kind not in ("eagle3", "peagle"):
            out.append(
                finding(
                    "E301",
                    f"speculators_model_type is {kind!r}: not an EAGLE-3 draft (vLLM serves it "
                    "with another method, or raises)",
                    field="speculators_model_type",
                )
            )
        elif inner_type not in SPECULATORS_ARCHITECTURES[kind]:
            out.append(
                finding(
                    "E301",
                    f"transformer_layer_config.model_type is {inner_type!r}: vLLM raises "
                    f"`Unsupported model_type {inner_type} for Eagle3 speculator` "
                    "(llama, qwen3 only)",
                    field="transformer_layer_config.model_type",
                )
            )
        elif inner_type != "llama" and not ctx.release.has("speculators_inner_class"):
            forced_llama = True
            out.append(
                finding(
                    "E301",
                    f"transformer_layer_config.model_type is {inner_type!r} but vLLM {ctx.release}'s speculators "
                    f"path builds {ctx.arch} for every inner model (the inner model_type picks the class from "
                    "0.24.0): its q_norm / k_norm tensors fail the load with KeyError: "
                    "'layers.0.self_attn.k_norm.weight' (vLLM #43132)",
                    field="transformer_layer_config.model_type",
                    fix="Serve on vLLM 0.24.0 or newer: no earlier release has a Qwen3 EAGLE-3 draft class.",
                )
            )
    elif not ctx.arch:
        out.append(
            finding(
                "E301",
                "config.json has no architectures: vLLM cannot pick a draft class",
                field="architectures",
                fix=f'Set architectures to ["{recommended}"].',
            )
        )
    elif ctx.impl is None and ctx.arch not in ARCHITECTURES:  # in a later release only: served.py says which
        declared = (cfg.get("architectures") or [""])[0]
        how = f"{declared!r} becomes {ctx.arch!r} under method eagle3" if declared != ctx.arch else repr(declared)
        out.append(
            finding(
                "E301",
                f"architectures[0] {how}, which vLLM does not register as an EAGLE-3 draft",
                field="architectures",
                fix=f'Set architectures to ["{recommended}"].',
            )
        )
    if ctx.impl and ctx.info.attention != ctx.attention and not forced_llama:
        out.append(
            finding(
                "E301",
                f"the tensors hold {ctx.info.attention} attention ({ctx.info.attention_reason}) but "
                f"{ctx.arch} builds {ctx.impl} with {ctx.attention} attention",
                field="architectures",
                fix=f'Set architectures to ["{recommended}"].',
            )
        )
    if ctx.view.mtp_rewrite:
        what = ctx.view.mtp_rewrite
        out.append(
            finding(
                "E302",
                f"{what}: vLLM's SpeculativeConfig.hf_config_override rewrites the draft into "
                "an MTP model before the EAGLE-3 class is chosen",
                field="model_type" if what.startswith("model_type") else "architectures",
            )
        )
    act = ctx.vcfg.get("hidden_act", "silu")
    if act != "silu":
        out.append(
            finding(
                "E303",
                f"hidden_act is {act!r}: vLLM's draft MLP raises `Unsupported activation: {act}`",
                field=_field(ctx, "hidden_act"),
            )
        )
    return out


def _field(ctx: Context, name: str) -> str:
    """Where the user edits `name`: speculators configs keep model fields in transformer_layer_config."""
    return f"transformer_layer_config.{name}" if ctx.speculators and name not in _SPECULATORS_TOP else name


def _fields(ctx: Context) -> list[Finding]:
    vcfg, out = ctx.vcfg, []
    required = REQUIRED_FIELDS + (MLA_FIELDS if ctx.attention == "mla" else ())
    for name in required:
        value = vcfg.get(name)
        if value is None:
            out.append(
                finding(
                    "E304",
                    f"{_field(ctx, name)} is missing: vLLM would use a config-class default, not the draft's size",
                    field=_field(ctx, name),
                )
            )
        elif not positive_int(value):
            out.append(
                finding(
                    "E304", f"{_field(ctx, name)} is {value!r}, expected a positive integer", field=_field(ctx, name)
                )
            )
    for name in OPTIONAL_POSITIVE:
        if name in vcfg and not positive_int(vcfg[name]) and not (vcfg[name] is None and name != "target_hidden_size"):
            crash = " (vLLM multiplies it by the aux count and crashes)" if name == "target_hidden_size" else ""
            out.append(
                finding(
                    "E304",
                    f"{_field(ctx, name)} is {vcfg[name]!r}, expected a positive integer{crash}",
                    field=_field(ctx, name),
                )
            )
    for name in ("num_hidden_layers", "num_aux_hidden_states"):
        if positive_int(vcfg.get(name)) and vcfg[name] > MAX_COUNT:
            out.append(
                finding(
                    "E304",
                    f"{_field(ctx, name)} is {vcfg[name]}: not a plausible draft (at most {MAX_COUNT})",
                    field=_field(ctx, name),
                )
            )
    eps = vcfg.get("rms_norm_eps")
    if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 < eps < 1):
        out.append(
            finding(
                "E304",
                f"{_field(ctx, 'rms_norm_eps')} is {eps!r}, expected a small positive number",
                field=_field(ctx, "rms_norm_eps"),
            )
        )
    if "eagle_config" in vcfg and not isinstance(vcfg["eagle_config"], dict):
        out.append(finding("E304", "eagle_config is not a JSON object: vLLM ignores it", field="eagle_config"))
    return out


def _flags(ctx: Context) -> list[Finding]:
    cfg, out = ctx.config, []
    eagle = eagle_section(ctx.vcfg)
    if ctx.flags["fc_norm"] and ctx.flags["norm_before_fc"]:
        out.append(
            finding(
                "E305",
                "fc_norm and norm_before_fc are both on: vLLM would apply input_norm and then "
                "every fc_norm, a combination no producer trains",
                field="fc_norm",
            )
        )
    if ctx.attention == "mla":
        if eagle.get("norm_before_fc", ctx.vcfg.get("norm_before_fc")):
            out.append(
                finding(
                    "E306",
                    "norm_before_fc is on but vLLM's MLA draft class has no input_norm and ignores the flag",
                    field="norm_before_fc",
                )
            )
        if eagle.get("use_aux_hidden_state") is False:
            out.append(
                finding(
                    "E306",
                    "eagle_config.use_aux_hidden_state is false but vLLM's MLA draft class always "
                    "builds fc over the aux states",
                    field="eagle_config.use_aux_hidden_state",
                )
            )
    if "norm_before_residual" not in cfg:
        out.append(_implicit_norm_before_residual(ctx))
    if "use_aux_norm" in cfg:
        out.append(
            finding(
                "W309",
                f"use_aux_norm is {cfg['use_aux_norm']!r} but vLLM reads only fc_norm "
                f"(fc_norm is {'on' if ctx.flags['fc_norm'] else 'off'})",
                field="use_aux_norm",
            )
        )
    return out


def _implicit_norm_before_residual(ctx: Context) -> Finding:
    """W307: hygiene when the producer is known to train with the value the path vLLM takes assumes."""
    assumed = ctx.flags["norm_before_residual"]
    default = f"{str(assumed).lower()} ({'speculators' if ctx.speculators else 'plain config'} path)"
    message = f"norm_before_residual is not written; vLLM assumes {default}, and the other path assumes the opposite"
    trained = trained_norm_before_residual(ctx.info.layout)
    if trained is None:
        return finding("W307", message, field="norm_before_residual")
    value, producer = trained
    same = value == assumed
    return finding(
        "W307",
        f"{message}; {producer} trains with {str(value).lower()}, so vLLM {ctx.release} serves it "
        + ("as trained" if same else "otherwise than trained"),
        field="norm_before_residual",
        impact="hygiene" if same else "computes-differently",
        fix=None if same else f"Write norm_before_residual: {str(value).lower()} (what {producer} trains with).",
    )
