"""Tensor names: replay vLLM's load_weights name handling and compare with the module tree it builds.

vLLM raises on a name it has no parameter for, but silently drops some names (`.bias`, `t2d`,
`input_norm` without its flag) and, worst, never notices a parameter nobody wrote. This rule
reports both directions: names vLLM would reject or drop (E102-E105, W107) and parameters it
would leave uninitialised (E101, E106, E401, E402). What happens to a name depends on the release:
`vllm_model.weights.unknown_name` says, for the release the verdict is for (KeyError up to 0.24.0,
ValueError from 0.25.0, silently dropped by the MLA class up to 0.24.0), and `release_findings`
adds what a release does to an EAGLE-3.1 draft's fc_norm (E104 on <= 0.21.0, E108 on 0.22.x MLA).
"""

from __future__ import annotations

import re
from collections import defaultdict

from eagle_convert.draft import canonical_name
from eagle_convert.validate.findings import Finding, Impact, finding
from eagle_convert.validate.rules import loading
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.tensorspec import Expected, expected_tensors

_FC_NORM_RE = re.compile(r"^fc_norm\.(\d+)\.weight$")
_ROTARY = ("rotary_pos_emb.inv_freq", "rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached")
_QUANT_SUFFIXES = (
    "_scale",
    ".weight_packed",
    ".weight_shape",
    ".weight_zero_point",
    ".g_idx",
    ".qweight",
    ".qzeros",
    ".scales",
)


# A missing fc_norm.{i} serves as 1.0: from an EAGLE-3 source that is exactly `upgrade`'s identity init
# (W604's case), from an EAGLE-3.1 source the trained values are lost. `fc_norm: false` is no neutral
# fix: with norm_output still on it serves neither the source nor the 3.1 draft.
FC_NORM_MISSING_FIX = (
    "If the source draft had trained fc_norm.{i}.weight (EAGLE-3.1), copy them in; if it was EAGLE-3, write "
    "the init explicitly (`eagle-convert upgrade SOURCE --init calibrated --target T`, or ones), then "
    "`finetune`. Setting fc_norm: false changes what the draft computes: it serves the EAGLE-3 source only "
    "together with norm_output: false."
)
# speculators 0.9.0 convert/eagle/eagle3_converter.py _save_converted_checkpoint loads the input into the
# legacy Eagle3Speculator (eagle3_legacy_model.py: no fc_norm or input_norm module) with strict=False.
SPECULATORS_DROPS_NORMS = (
    " (`speculators convert` writes the flags but builds a model without fc_norm/input_norm, so it drops "
    "trained ones and writes none.)"
)


def check(ctx: Context) -> list[Finding]:
    expected = expected_tensors(ctx)
    out: list[Finding] = []
    loaded: set[str] = set()  # vLLM-side names written, counting renamable names as written
    grouped: dict[str, list[str]] = defaultdict(list)
    quantized = bool(ctx.vcfg.get("quantization_config"))
    fc_norm_on = ctx.flags["fc_norm"]
    unknown = _Unknown(ctx)
    for name, vname in ctx.vnames.items():
        if vname is None:
            if "mask_hidden" in name:
                out.append(loading.mask_hidden(ctx, name))
            elif name != "t2d":
                why = "vLLM drops every tensor whose name contains 't2d'"
                out.append(finding("W107", f"{name} is ignored: {why}", tensor=name))
            continue
        if name.startswith("model.") and not name.startswith("model.model."):
            grouped["E103"].append(name)
            loaded.add(canonical_name(name))
            continue
        if name.startswith("aux_norm_"):
            grouped["E105"].append(name)
            loaded.add(canonical_name(name))
            continue
        exp = expected.get(vname)
        if exp is not None and exp.exists is not False:
            loaded.add(vname)
            if _FC_NORM_RE.match(vname):
                grouped["fc_norm"].append(name)
            elif vname == "d2t" and ctx.env.get("reduced") is False:
                out.append(loading.d2t_full_vocab(ctx, name, _vd(ctx)))  # loads up to 0.29.0: W410
            continue
        if not fc_norm_on and _FC_NORM_RE.match(vname):
            grouped["E104"].append(name)
        elif vname.endswith(".bias"):
            out.append(loading.bias(ctx, name, vname))
        elif exp is not None:
            out.append(_unexpected(ctx, name, exp))
        elif vname.endswith(_ROTARY):
            out.append(finding("W107", f"{name} is ignored: vLLM drops cached rotary tensors", tensor=name))
        elif quantized and vname.endswith(_QUANT_SUFFIXES):
            continue  # quantisation tensors: see W311
        else:
            out.append(unknown(name, vname))
    out += _grouped(ctx, grouped)
    out += loading.fc_norm_not_applied(ctx, grouped.get("fc_norm", []))
    missing = [exp for exp in expected.values() if exp.required and exp.name not in loaded]
    present = {m.group(1) for n in loaded if (m := _LAYER_OF.match(n))}
    out += _missing_layers(ctx, missing, present)
    out += [_missing(ctx, e) for e in missing if not (m := _LAYER_OF.match(e.name)) or m.group(1) in present]
    return out


_LAYER_OF = re.compile(r"^layers\.(\d+)\.")


def _missing_layers(ctx: Context, missing: list[Expected], present: set[str]) -> list[Finding]:
    """One E101 for the decoder layers the config declares and the checkpoint lacks entirely."""
    absent = sorted({m.group(1) for e in missing if (m := _LAYER_OF.match(e.name))} - present, key=int)
    if not absent:
        return []
    shown = ", ".join(f"layers.{k}.*" for k in absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
    return [
        finding(
            "E101",
            f"{shown} missing: num_hidden_layers is {ctx.env.get('L')} but the checkpoint has "
            f"{len(present)} decoder layer(s); vLLM builds the missing layers from uninitialised "
            "memory",
            tensor=f"layers.{absent[0]}.*",
            field="num_hidden_layers",
            fix="Set num_hidden_layers to the number of layers the checkpoint holds, or ship the missing layers.",
        )
    ]


class _Unknown:
    """E102: why the class has no parameter for a name, and what the release then does. What does
    not depend on the name is worked out once per check, not once per tensor (a crafted header of
    200,000 unknown names spent most of `upgrade`'s time here)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.layers = ctx.env.get("L")
        what = f"{ctx.impl or 'the draft class'} has no parameter for it"
        self.what = what
        self.newest = f"{what}; vLLM raises `There is no module or parameter named ...`"

    def __call__(self, name: str, vname: str) -> Finding:
        ctx = self.ctx
        if m := _FC_NORM_RE.match(vname):
            what = f"vLLM builds fc_norm.0..{(ctx.aux_count or 0) - 1} only (A={ctx.aux_count} from {ctx.aux_count_source})"
            return loading.unknown_tensor(ctx, name, vname, what, f"{what}; fc_norm.{m.group(1)} makes it raise")
        if (m := _LAYER_OF.match(vname)) and self.layers is not None and int(m.group(1)) >= self.layers:
            what = f"num_hidden_layers is {self.layers}, so vLLM has no layers.{m.group(1)}"
            return loading.unknown_tensor(ctx, name, vname, what, f"{what} and raises")
        return loading.unknown_tensor(ctx, name, vname, self.what, self.newest)


def _vd(ctx: Context) -> str:
    if ctx.vcfg.get("draft_vocab_size") is not None:
        return f"draft_vocab_size {ctx.env['Vd']}"
    return f"draft_vocab_size is not set, so vLLM uses vocab_size {ctx.env['Vd']}, which"


def _unexpected(ctx: Context, name: str, exp: Expected) -> Finding:
    if exp.unexpected == "E403":
        return loading.d2t_full_vocab(ctx, name, _vd(ctx))
    if exp.name == "input_norm.weight":
        if ctx.attention == "mla":
            return loading.input_norm_mla(ctx, name)
        msg = (
            f"{name} is present but norm_before_fc is off ({_where(ctx, 'norm_before_fc')}): vLLM drops it "
            "silently and serves the draft without the norm it was trained with"
        )
        return finding(exp.unexpected, msg, tensor=name, field="norm_before_fc")
    if exp.name == "fc.weight":
        return finding(
            exp.unexpected,
            f"{name} is present but eagle_config.use_aux_hidden_state is false: vLLM drops "
            "it and feeds the target's last hidden state in directly",
            tensor=name,
            field="eagle_config.use_aux_hidden_state",
        )
    return finding(exp.unexpected, f"{name}: vLLM has no parameter for it with this config", tensor=name)


def _grouped(ctx: Context, grouped: dict[str, list[str]]) -> list[Finding]:
    out = []
    if names := grouped.get("E103"):
        head = (
            f"{len(names)} tensor names start with 'model.' (e.g. {names[0]!r}); vLLM adds its "
            "own prefix, looks for 'model.model.*'"
        )
        silent = "the draft is served from parameters nothing wrote"
        out.append(
            loading.grouped(ctx, "E103", names, [ctx.vnames[n] or n for n in names], head, " and fails to load", silent)
        )
    if names := sorted(grouped.get("E105", [])):
        head = f"pre-release EAGLE-3.1 names {', '.join(names)}: vLLM only knows fc_norm.{{0,1,2}}.weight"
        silent = "the draft is served without these norms"
        out.append(loading.grouped(ctx, "E105", names, names, head, " and rejects them", silent))
    # A flag written true but not where this release reads it is E318's (it names both places); E104
    # keeps the tensors of a flag that is off everywhere, and of a release without fc_norm at all.
    lost_here = "fc_norm" in ctx.view.lost_flags and ctx.release.has("fc_norm")
    if (names := grouped.get("E104")) and not lost_here:
        alias = " (the legacy use_aux_norm is set, but vLLM does not read it)" if "use_aux_norm" in ctx.config else ""
        out.append(loading.fc_norm_without_flag(ctx, names, alias))
    return out


def _where(ctx: Context, flag: str) -> str:
    where = ctx.info.flags[flag].where if flag in ctx.info.flags else []
    return ", ".join(where) or "not set, default false"


def _missing(ctx: Context, exp: Expected) -> Finding:
    env = ctx.env
    if exp.missing == "E401":
        return finding(
            "E401",
            f"d2t is missing with a reduced vocabulary (draft_vocab_size {env['Vd']} < "
            f"{env['TV']}): vLLM maps draft id i to target id i and acceptance collapses silently",
            tensor="d2t",
        )
    if exp.missing == "E402":
        why = (
            f"a reduced vocabulary (draft_vocab_size {env['Vd']} < {env['TV']})"
            if env.get("reduced")
            else f"hidden_size {env['H']} differs from the target's {env['TH']}"
        )
        return finding(
            "E402",
            f"lm_head.weight is missing with {why}: vLLM shares the target's head and the logits come out wrong",
            tensor="lm_head.weight",
        )
    if exp.missing == "E106":
        return loading.missing_embed(ctx)
    what = "keeps weight 1.0" if exp.kind == "norm" else "keeps uninitialised memory"
    msg = f"{exp.name} is missing: vLLM {what} and loads without an error"
    fix: str | None = None
    impact: Impact | None = None
    if exp.name.startswith("fc_norm."):
        impact = "computes-differently"  # served as 1.0, not uninitialised memory
        msg += f" (fc_norm is on: {_where(ctx, 'fc_norm')}): the identity init, as `upgrade` writes it"
        fix = FC_NORM_MISSING_FIX
        if ctx.speculators:
            fix += SPECULATORS_DROPS_NORMS
    elif exp.name == "input_norm.weight":
        msg += f" (norm_before_fc is on: {_where(ctx, 'norm_before_fc')})"
        fix = "Add the trained input_norm.weight, or set norm_before_fc: false if the draft was trained without it."
    return finding("E101", msg, tensor=exp.name, fix=fix, impact=impact)
