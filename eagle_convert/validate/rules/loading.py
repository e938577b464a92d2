"""What the release's load_weights does with the names the keys rule flags: wording, level and impact.

`keys.check` decides which names vLLM has no parameter for; this module says what the release the
verdict is for (`ctx.release`) then does (`vllm_model.weights.unknown_name`): raise ValueError
(0.25.0 on), raise KeyError (Llama / Qwen3 up to 0.24.0), or drop the name without a word (the MLA
class up to 0.24.0). A name vLLM raises on is an error; a trained tensor it drops is served without,
so it changes what is served even where the load succeeds. For the installed-and-tested release
(0.32.0) the messages are the ones validate has always printed.
"""

from __future__ import annotations

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model import Unknown, unknown_name

_KEYERROR_WHERE = "its hand-written load_weights up to 0.24.0; ValueError from 0.25.0"
_SERVE_31 = "Serve the draft on vLLM >= {first}: it is an EAGLE-3.1 draft, which this release cannot serve as trained."


def fate(ctx: Context, vname: str) -> Unknown:
    """What `ctx.release` does with `vname`, a name the draft class has no parameter for."""
    return unknown_name(vname, ctx.attention, ctx.release)


def said(ctx: Context, u: Unknown) -> str:
    """`vLLM 0.24.0 raises KeyError: 'x' (...)`: the release and what it does."""
    if u.error == "KeyError":
        return f"vLLM {ctx.release} {u.what} ({_KEYERROR_WHERE})"
    return f"vLLM {ctx.release} {u.what}"


def unknown_tensor(ctx: Context, name: str, vname: str, what: str, newest: str) -> Finding:
    """E102 for `name`: `what` says why the class has no parameter; `newest` is the whole 0.25.0-on reason."""
    if not vname.endswith(".bias") and ctx.release.has("auto_weights_loader"):
        return finding("E102", f"{name}: {newest}", tensor=name)  # `fate`'s ValueError, without asking per name
    u = fate(ctx, vname)
    if u.raises:
        return finding("E102", f"{name}: {what}; {said(ctx, u)}", tensor=name)
    return finding(
        "E102",
        f"{name}: {what}; {said(ctx, u)}, so the draft loads and is served without it (from 0.25.0 the load raises)",
        tensor=name,
        impact="computes-differently",
        fix="Remove the tensor, or serve a config whose class has a parameter for it.",
    )


def bias(ctx: Context, name: str, vname: str) -> Finding:
    """An unexpected `.bias`: ignored from 0.25.0 (W107), a load failure or a silent drop before."""
    u = fate(ctx, vname)
    if ctx.release.has("auto_weights_loader"):
        return finding(
            "W107",
            f"{name} is ignored: vLLM has no bias here and drops unknown .bias tensors silently",
            tensor=name,
        )
    if not u.raises:
        return finding("W107", f"{name} is ignored: {said(ctx, u)}", tensor=name)
    why = (
        " (its hand-written load_weights; unexpected .bias tensors are ignored only from 0.25.0)"
        if u.error == "KeyError"
        else ""
    )
    return finding(
        "E102",
        f"{name}: vLLM has no bias here; vLLM {ctx.release} {u.what}{why}",
        tensor=name,
        fix="Remove the bias tensor (or set attention_bias / mlp_bias if the draft was trained with biases).",
    )


def mask_hidden(ctx: Context, name: str) -> Finding:
    """`mask_hidden`: the Llama / Qwen3 classes skip it without parallel drafting; the MLA class has no
    such branch, so it becomes `model.mask_hidden` (deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM.load_weights)."""
    if ctx.attention == "mla":
        u = fate(ctx, "mask_hidden")
        if u.raises:
            return finding(
                "E102",
                f"{name}: vLLM's MLA draft class has no mask_hidden (no parallel drafting); {said(ctx, u)}",
                tensor=name,
                fix="Remove mask_hidden: the MLA draft class has no parallel drafting.",
            )
        return finding("W107", f"{name} is ignored: {said(ctx, u)}", tensor=name)
    if ctx.release.has("parallel_drafting_eagle3_refused"):
        return finding(
            "W107",
            f"{name} is ignored: vLLM {ctx.release} has no parallel drafting for EAGLE-3 (P-EAGLE was removed in "
            '0.34.0) and always skips mask_hidden ("mask_hidden found in weights but parallel drafting is not '
            'supported for EAGLE-3"; llama_eagle3.py / qwen3_eagle3.py load_weights)',
            tensor=name,
            fix="Remove mask_hidden (no option of this release uses it), or serve the P-EAGLE draft on vLLM "
            "0.22.0-0.33.0 with parallel_drafting.",
        )
    return finding(
        "W107", f"{name} is ignored: vLLM uses mask_hidden only with parallel drafting (P-EAGLE)", tensor=name
    )


def grouped(
    ctx: Context, code: str, names: list[str], vnames: list[str], head: str, newest: str, silent: str
) -> Finding:
    """E103 / E105 for a group of names: `head` says what is wrong, `newest` ends it from 0.25.0 on,
    `silent` says what is served when the release drops every one of them."""
    if ctx.release.has("auto_weights_loader"):
        return finding(code, f"{head}{newest}", tensor=names[0])
    fates = [fate(ctx, v) for v in vnames]
    raising = next((u for u in fates if u.raises), None)
    if raising is not None:
        return finding(code, f"{head}; {said(ctx, raising)}", tensor=names[0])
    return finding(
        code,
        f"{head}; vLLM {ctx.release}'s MLA loader drops every one of them silently (DeepseekV2Eagle3Model."
        f"load_weights skips unknown names up to 0.24.0), so {silent} (from 0.25.0 the load raises)",
        tensor=names[0],
        impact="loads-other-weights" if code == "E103" else "computes-differently",
    )


def fc_norm_without_flag(ctx: Context, names: list[str], alias: str) -> Finding:
    """E104 for fc_norm.* tensors whose module the release does not build (flag off, or no fc_norm at all)."""
    rel, first = ctx.release, sorted(names)[0]
    n = len(names)
    if rel.has("auto_weights_loader"):
        return finding(
            "E104",
            f"{n} fc_norm.* tensors but fc_norm is off{alias}: vLLM raises `There is "
            "no module or parameter named 'fc_norm'`",
            tensor=first,
            field="fc_norm",
        )
    u = fate(ctx, ctx.vnames.get(first) or first)
    if not rel.has("fc_norm"):
        head = (
            f"{n} fc_norm.* tensors: vLLM {rel} builds no fc_norm (the draft classes have it from 0.22.0, vLLM #42764)"
        )
        if u.raises:
            return finding(
                "E104",
                f"{head} and {u.what}",
                tensor=first,
                field="fc_norm",
                fix=_SERVE_31.format(first="0.22.0"),
            )
        lost = " and ignores norm_output too" if ctx.view.written.get("norm_output") else ""
        return finding(
            "E104",
            f"{head}; its MLA loader drops them silently{lost}, so the draft loads and is served without "
            "the norms it was trained with",
            tensor=first,
            field="fc_norm",
            fix=_SERVE_31.format(first="0.23.0") + " (0.22.x loads the MLA fc_norm but never applies it)",
            impact="computes-differently",
        )
    where = f" (it is written true, but not where vLLM {rel} reads it)" if "fc_norm" in ctx.view.lost_flags else alias
    if u.raises:
        return finding(
            "E104", f"{n} fc_norm.* tensors but fc_norm is off{where}: {said(ctx, u)}", tensor=first, field="fc_norm"
        )
    return finding(
        "E104",
        f"{n} fc_norm.* tensors but fc_norm is off{where}: {said(ctx, u)}, so the draft is served without "
        "the fc_norm it was trained with (from 0.25.0 the load raises)",
        tensor=first,
        field="fc_norm",
        impact="computes-differently",
    )


def fc_norm_not_applied(ctx: Context, names: list[str]) -> list[Finding]:
    """E108: the MLA class of 0.22.0 / 0.22.1 loads fc_norm.* and never applies it (`VllmDraftConfig.fc_norm_applied`)."""
    if not names or not ctx.flags["fc_norm"] or ctx.view.fc_norm_applied:
        return []
    rel = ctx.release
    return [
        finding(
            "E108",
            f"{len(names)} fc_norm.* tensors: vLLM {rel} loads fc_norm.* for the MLA draft but never applies "
            "it (Eagle3DeepseekV2ForCausalLM.combine_hidden_states; fixed in 0.23.0, vLLM #43482), so the "
            "draft is served without the norm it was trained with and no error is raised",
            tensor=sorted(names)[0],
            field="fc_norm",
            fix=f"Serve the draft on vLLM >= 0.23.0 (vLLM {rel} cannot serve it as trained).",
        )
    ]


def input_norm_mla(ctx: Context, name: str) -> Finding:
    """input_norm on the MLA class, which has none: ValueError from 0.25.0, silently dropped before."""
    u = fate(ctx, "input_norm.weight")
    if u.raises:
        return finding(
            "E104",
            f"{name} is present but vLLM's MLA draft class has no input_norm: loading fails",
            tensor=name,
            field="norm_before_fc",
        )
    return finding(
        "E104",
        f"{name} is present but vLLM's MLA draft class has no input_norm: {said(ctx, u)}, so the draft is "
        "served without the norm it was trained with (from 0.25.0 the load raises)",
        tensor=name,
        field="norm_before_fc",
        impact="computes-differently",
    )


def d2t_full_vocab(ctx: Context, name: str, vd: str) -> Finding:
    """A d2t with a full vocabulary: E403 from 0.30.0, W410 (hygiene: it loads as written) before."""
    if ctx.release.has("d2t_only_reduced"):
        return finding(
            "E403",
            f"{name} is present but {vd} equals the target vocabulary {ctx.env['TV']}: vLLM "
            "creates no draft_id_to_target_id and fails with `There is no module or parameter "
            "named 'draft_id_to_target_id'`",
            tensor=name,
            field="draft_vocab_size",
        )
    return finding(
        "W410",
        f"{name} is present but {vd} equals the target vocabulary {ctx.env['TV']}: vLLM {ctx.release} loads "
        "it into draft_id_to_target_id and maps draft id i to i + d2t[i] as written, but from 0.30.0 the same "
        "draft fails to load (E403)",
        tensor=name,
        field="draft_vocab_size",
    )


def missing_embed(ctx: Context) -> Finding:
    """E106 per release: which runner shares the target's embedding with a draft that ships none."""
    env, rel = ctx.env, ctx.release
    head = f"embed_tokens.weight is missing and hidden_size {env['H']} differs from the target's {env['TH']}: "
    assert_fail = (
        f"so the {env['TH']}-wide embedding meets the draft's {env['H']}-wide hidden state and fails the "
        "hidden_states/input_embeds width assert (inferred from source, not run)"
    )
    if not rel.has_v1:
        return finding(
            "E106",
            f"{head}vLLM {rel}'s only runner, Model Runner V2, shares the target's embedding without a width "
            f"check (v1/worker/gpu/spec_decode/eagle/utils.py maybe_share_target_embed), {assert_fail}",
            tensor="embed_tokens.weight",
            impact="fails-to-load",
        )
    if not rel.has("v1_embed_width_check"):
        return finding(
            "E106",
            f"{head}vLLM {rel} shares the target's embedding anyway (V1 _maybe_share_embeddings compares "
            f"widths only from 0.25.0), {assert_fail}",
            tensor="embed_tokens.weight",
            impact="fails-to-load",
        )
    msg = f"{head}vLLM cannot share the target's embedding, so the draft's stays unloaded"
    if not rel.has("v2_embed_share_unchecked"):
        return finding("E106", msg, tensor="embed_tokens.weight")
    return finding(
        "E106",
        f"{msg} on the V1 runner; the V2 runner (the GPU default) of vLLM {rel} shares it without a width "
        f"check (maybe_share_target_embed), {assert_fail}",
        tensor="embed_tokens.weight",
        impact="fails-to-load",
    )
