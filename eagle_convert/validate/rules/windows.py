"""Config rules whose verdict depends on the vLLM release: where a flag counts, what V2 honours, the verifier.

- E318: an EAGLE-3.1 flag (fc_norm, norm_output) written true only where the release does not read
  it (`VllmDraftConfig.lost_flags`): speculators configs count inner values on 0.22-0.24 and
  top-level ones from 0.25 (vLLM #46488), P-EAGLE never reads the top level, and no class reads
  either flag before 0.22 (vLLM #42764).
- W308: the speculators flags not mirrored; hygiene where the release applies what is written.
- W326: `eagle_config.use_aux_hidden_state: false`, which Model Runner V2 ignores before 0.33.
- W319: a speculators verifier that `vllm serve DRAFT` refuses on 0.33 (vllm_model/verifier.py).
"""

from __future__ import annotations

import re
from typing import Any

from eagle_convert.validate.findings import Finding, Impact, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model import FLAG_NAMES, eagle_section, inner_config, lookup, verifier_problem

TOP, INNER, EAGLE = "the top level", "transformer_layer_config", "eagle_config"
_FC_NORM = re.compile(r"^fc_norm\.\d+\.weight$")
_31_FLAGS = ("fc_norm", "norm_output")


def check(ctx: Context) -> list[Finding]:
    return [*lost_flags(ctx), *mirrored(ctx), *use_aux_on_v2(ctx), *verifier(ctx)]


def written_at(ctx: Context, flag: str) -> dict[str, Any]:
    """Where config.json sets `flag`, and to what: {location: value}."""
    cfg = ctx.config
    places = {TOP: cfg, INNER: inner_config(cfg) if ctx.speculators else {}, EAGLE: eagle_section(cfg)}
    return {where: src[flag] for where, src in places.items() if flag in src}


def read_at(ctx: Context, flag: str) -> tuple[str | None, str]:
    """Where this release reads `flag` (None: nowhere), and why there."""
    rel = ctx.release
    if flag in _31_FLAGS and not rel.has("fc_norm"):
        return None, "no draft class reads it before 0.22.0 (vLLM #42764)"
    if not ctx.speculators:
        return TOP, "the draft class reads the top-level field only"
    if flag not in _31_FLAGS:
        return TOP, "speculators' update_eagle3 / update_peagle always overwrite the inner value with it"
    if ctx.view.speculators_kind == "peagle":
        return INNER, "speculators' update_peagle never copies a top-level fc_norm / norm_output"
    if rel.has("speculators_top_level_31_flags"):
        return TOP, "speculators' update_eagle3 overwrites the inner value with the top-level one, default false"
    return INNER, "speculators' update_eagle3 copies the top-level value only from 0.25.0 (vLLM #46488)"


def _where(places: list[str]) -> str:
    return " and ".join(("at " if p == TOP else "in ") + p for p in places)


def lost_flags(ctx: Context) -> list[Finding]:
    """E318: each 3.1 flag written true only where this release does not read it, and what that does."""
    out = []
    rel = ctx.release
    fc_norm_tensors = sorted(n for n, v in ctx.vnames.items() if v and _FC_NORM.match(v))
    for flag in ctx.view.lost_flags:
        if flag == "fc_norm" and fc_norm_tensors and not rel.has("fc_norm"):
            continue  # a release without fc_norm at all: the tensor rules report what it does with them
        written = written_at(ctx, flag)
        true_at = [w for w, v in written.items() if v]
        place, why = read_at(ctx, flag)
        read = "nowhere" if place is None else ("at " if place == TOP else "from ") + place
        said = f" ({place} says {written[place]!r})" if place in written else ""
        head = f"{flag}: true is written {_where(true_at)} but vLLM {rel} reads it {read}{said}: {why}"
        impact: Impact = "computes-differently"
        if flag == "norm_output":
            effect = "the draft is served without norm_output (the pre-norm state is fed back, not the trained one)"
        elif not fc_norm_tensors:
            effect = "the draft is served without fc_norm"
        elif ctx.attention == "mla" and not rel.has("auto_weights_loader"):
            effect = f"it builds no fc_norm and drops the {len(fc_norm_tensors)} fc_norm.* tensors silently"
        else:
            impact = "fails-to-load"
            first = ctx.vnames[fc_norm_tensors[0]]
            exc = (
                "ValueError: There is no module or parameter named 'fc_norm'"
                if rel.has("auto_weights_loader")
                else f"KeyError: {first!r}"
            )
            effect = f"it builds no fc_norm and the {len(fc_norm_tensors)} fc_norm.* tensors fail the load ({exc})"
        fix = (
            f"Write {flag}: true {_where([place])} (eagle-convert upgrade writes it everywhere)."
            if place
            else "Serve on vLLM 0.22.0 or newer."
        )
        out.append(finding("E318", f"{head}, so {effect}", field=_field(ctx, flag, place), fix=fix, impact=impact))
    return out


def _field(ctx: Context, flag: str, place: str | None) -> str:
    return f"transformer_layer_config.{flag}" if place == INNER else flag


def mirrored(ctx: Context) -> list[Finding]:
    """W308: speculators flags that top level and transformer_layer_config do not both hold equally."""
    if not ctx.speculators:
        return []
    cfg, inner = ctx.config, inner_config(ctx.config)
    listed = [f for f in FLAG_NAMES if (f in cfg or f in inner) and (f not in inner or inner.get(f) != cfg.get(f))]
    if not listed:
        return []
    places: dict[str, list[str]] = {}
    for f in listed:
        place = read_at(ctx, f)[0]
        places.setdefault("nowhere" if place is None else ("at " if place == TOP else "from ") + place, []).append(f)
    reads = " and ".join(f"{', '.join(fs)} {where}" for where, fs in places.items())
    lost = set(ctx.view.lost_flags)  # E318 reports these
    differ = []
    for f in listed:
        for where, value in written_at(ctx, f).items():
            if where != EAGLE and bool(value) != ctx.flags[f] and f not in lost:
                differ.append(f"{f}: {str(ctx.flags[f]).lower()} while {where} says {value!r}")
    dropped = [f for f in listed if f in lost]
    tail = f"; so it applies {', '.join(differ)}" if differ else ""
    tail += f"; it drops {', '.join(dropped)} (E318)" if dropped else ""
    tail = tail or "; it applies what is written, so the draft is served as written"
    return [
        finding(
            "W308",
            f"{', '.join(listed)}: top-level and transformer_layer_config disagree or one is missing; "
            f"vLLM {ctx.release} reads {reads}{tail}",
            field=listed[0],
            impact="computes-differently" if differ else "hygiene",
        )
    ]


def use_aux_on_v2(ctx: Context) -> list[Finding]:
    """W326: before 0.33 Model Runner V2 captures aux states for every eagle3 draft, whatever the flag says."""
    rel = ctx.release
    cls = ctx.view.draft_class
    if eagle_section(ctx.vcfg).get("use_aux_hidden_state") is not False or cls is None:
        return []
    if not cls.reads_use_aux_hidden_state or rel.has("v2_honours_use_aux") or not rel.at_least("0.22.0"):
        return []
    return [
        finding(
            "W326",
            f"eagle_config.use_aux_hidden_state is false: vLLM {rel}'s Model Runner V2, {rel.v2_role()}, "
            "ignores it and passes the draft the concatenated aux hidden states, which "
            "fail the draft's input width check (inferred: a crash at the first decode); V1 honours the flag, "
            "and V2 does from 0.33.0",
            field="eagle_config.use_aux_hidden_state",
        )
    ]


def verifier(ctx: Context) -> list[Finding]:
    """W319: `vllm serve DRAFT` on 0.33 needs speculators_config.verifier.name_or_path to be a hub repo id."""
    if not ctx.speculators or not ctx.release.has("verifier_must_be_hub_id"):
        return []
    verifier_cfg = lookup(ctx.config, "speculators_config.verifier")
    if not isinstance(verifier_cfg, dict) or "name_or_path" not in verifier_cfg:
        return []
    problem = verifier_problem(verifier_cfg["name_or_path"])
    if problem is None:
        return []
    return [
        finding(
            "W319",
            f"speculators_config.verifier.name_or_path {problem}: vLLM {ctx.release} raises "
            "`Speculators verifier must name a remote model repository` for `vllm serve DRAFT` "
            "(transformers_utils/config.py maybe_override_with_speculators); serving with --model TARGET "
            "--speculative-config '{\"model\": DRAFT, ...}' avoids it",
            field="speculators_config.verifier.name_or_path",
        )
    ]
