"""The verdict for an engine other than vLLM (`validate --for sglang|trtllm`): what it serves otherwise.

The draft as trained is the draft as vLLM's newest known release serves it (its ids as A(k), its flags
where vLLM reads them); ids written only in `eagle_config` are taken in SGLang's convention, A(k + 1),
the convention of the trainers that write them there (SpecForge). Each engine release's reading
(`engines.read_draft`) is compared with that, and every difference is a finding naming the engine
and release, with the same code as vLLM's where the meaning is the same (E318 a flag not read, E202
an fc width mismatch, E306 a feature the class cannot express) and the engine codes otherwise. The
checkpoint's own defects (files, shapes) count for every engine; vLLM's loader rules (keys, vocab,
serve config) are vLLM's rows.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.engines import (
    DEFAULT,
    EngineRules,
    EngineStatus,
    EngineView,
    default_taps,
    fmt_taps,
    ids_for,
    int_ids,
    read_draft,
    taps,
)
from eagle_convert.validate.engine_weights import DraftWeights, sharing_findings
from eagle_convert.validate.findings import Finding, code_table, finding
from eagle_convert.vllm_model import lookup

SHARED_FAMILIES = ("files", "shapes")  # the checkpoint's own defects: every engine's
SHARED_CODES = frozenset({"W604"})  # properties of the tensors in other families (fc_norm all ones)
VLLM_ONLY = frozenset({"E202", "W204"})  # vLLM's fc-width reading; a dtype note


def trained_taps(
    view: Any, n: int | None, sglang: EngineRules, target_class: str | None = None
) -> tuple[tuple[int, ...] | str | None, str]:
    """The hidden states the draft was trained on (A-indices, DEFAULT, or None: unknown), and where
    that came from. `view` is the newest vLLM release's VllmDraftConfig; ids only in eagle_config are
    read as SGLang reads them for a target of class `target_class`."""
    top = int_ids(view.aux_ids_v2) if view.aux_ids_v2 is not None else None
    if top:
        return tuple(top), f"{view.aux_ids_v2_where} {top}"
    nested = int_ids(lookup(view.config, "eagle_config.eagle_aux_hidden_state_layer_ids"))
    if nested:
        # ids only in eagle_config: SGLang's place, read in its convention (SpecForge trains on A(k + 1))
        offset = sglang.offsets.get(target_class or "", sglang.offset)
        return taps(nested, offset, n), f"eagle_config.eagle_aux_hidden_state_layer_ids {nested}, SGLang's convention"
    return default_taps(n), "no ids (the default layers)"


def _same(a: Any, b: Any, n: int | None) -> bool | None:
    """Whether two tap sets are the same (None: undecidable without the target's depth)."""
    if a is None or b is None:
        return None
    if a == b:
        return True
    if DEFAULT in (a, b):
        return None if n is None else False
    return False


def engine_findings(
    config: dict[str, Any],
    view: Any,
    rules: EngineRules,
    *,
    target: Any = None,
    tensors: frozenset[str] = frozenset(),
    aux_weights: int | None = None,
    weights: DraftWeights | None = None,
) -> list[Finding]:
    """`rules`' engine release against the draft as trained (`view`: vLLM's newest reading).

    `target`: the target (draft.Target) when given: its depth decides default taps and its class the
    offset rule. `tensors`: the checkpoint's tensor names. `aux_weights`: the aux states fc.weight's
    width holds (None: unknown, vLLM's count is used). `weights`: what the draft ships of embed_tokens /
    lm_head (None: not known, no sharing findings).
    """
    label = rules.label
    if view.speculators and not rules.reads_speculators:  # nothing else of the config is read
        return [
            finding(
                "E331",
                f"{label} cannot read a speculators-format config (speculators_config, transformer_layer_config): "
                f"{rules.cite('speculators')}",
                field="speculators_config",
            )
        ]
    n = target.num_layers if target is not None else None
    target_class = target.architectures[0] if target is not None and target.architectures else None
    mla = view.attention == "mla" or bool(config.get("kv_lora_rank"))  # TRT-LLM's own test (Eagle3ForCausalLM)
    ev = read_draft(config, rules, mla=mla, target_class=target_class, n=n)
    out = _architecture(ev, view, mla)
    out += _aux_ids(ev, view, n, target_class)
    out += _fc_width(ev, aux_weights or view.aux_count, config, mla)
    out += _norms(ev, view, config)
    out += _vocab_window(ev, config, tensors, mla)
    if weights is not None:
        out += sharing_findings(rules, config, weights)
    return out


def _architecture(ev: EngineView, view: Any, mla: bool) -> list[Finding]:
    rules = ev.rules
    if not rules.architectures:  # the name is ignored: the serving config picks the class
        if view.attention == "qwen3":
            return [
                finding(
                    "E306",
                    f"{rules.label} builds its Llama-style Eagle3 class for every draft ({rules.cite('architectures')}): "
                    "this Qwen3-architecture draft's q/k norms are never applied",
                    field="architectures",
                )
            ]
        return []
    want = rules.mla_architecture if mla else next(iter(sorted(rules.architectures - {rules.mla_architecture})))
    if ev.architecture == want:
        return []
    if ev.builds != rules.fallback:
        got = f"builds {ev.builds}"
    elif ev.architecture and "eagle" not in ev.architecture.lower():  # a target's name: registered as that model
        got = f"builds the model it registers under that name (else {rules.fallback}), not an EAGLE-3 draft"
    else:
        got = f"falls back to {rules.fallback}, not an EAGLE-3 draft"
    return [
        finding(
            "E330",
            f"architectures[0] {ev.architecture!r}: {rules.label} {got} ({rules.cite('architectures')}); "
            f"this {'MLA' if mla else view.attention or 'llama'} draft needs {want!r}",
            field="architectures",
            fix=f"Write architectures: [{want!r}] for {rules.label}.",
        )
    ]


def _aux_ids(ev: EngineView, view: Any, n: int | None, target_class: str | None) -> list[Finding]:
    from eagle_convert.engines import ENGINES

    rules = ev.rules
    sglang = ENGINES["sglang"].rules[-1]
    trained, source = trained_taps(view, n, sglang, target_class)
    out: list[Finding] = []
    if rules.sorts_ids and isinstance(trained, tuple) and list(trained) != sorted(trained):
        out.append(
            finding(
                "E336",
                f"{rules.label} sorts the capture layers ({rules.cite('sorted')}); the draft was trained on "
                f"{fmt_taps(trained)} in that order ({source})",
                field="eagle_aux_hidden_state_layer_ids",
            )
        )
        return out
    if rules.aux_ids_path is None:  # ids only from the serving config
        if _same(trained, ev.taps, n) is True:
            return out
        need = ids_for(trained, rules.offset, n) if isinstance(trained, tuple) else None
        what = (
            f"set {rules.aux_ids_serving_key}: {{{', '.join(map(str, need))}}} in the serving config"
            if need is not None
            else "no serving config taps these layers"
        )
        out.append(
            finding(
                "W334",
                f"{rules.label} reads no aux ids from the draft ({rules.cite('aux_ids')}); without "
                f"{rules.aux_ids_serving_key} it taps {rules.default_ids}, but the draft was trained on "
                f"{fmt_taps(trained)} ({source}): {what}",
                field="eagle_aux_hidden_state_layer_ids",
                fix=f"For {rules.label}: {what}.",
            )
        )
        return out
    same = _same(trained, ev.taps, n)
    if same is not False and not (same is None and ev.ids is None and isinstance(trained, tuple)):
        return out
    need = ids_for(trained, ev.offset, n) if isinstance(trained, tuple) else None
    rule = f" (its {ev.offset} rule for {target_class})" if ev.offset != rules.offset else ""
    write = (
        f"write {rules.aux_ids_path}: {need}"
        if need is not None
        else f"no id list makes {rules.label} tap these layers{rule}"
    )
    if ev.ids is None:
        out.append(
            finding(
                "W334",
                f"{rules.label} reads only {rules.aux_ids_path} ({rules.cite('aux_ids')}), which this draft does not "
                f"write: it taps {rules.default_ids}, but the draft was trained on {fmt_taps(trained)} ({source}); {write}",
                field=rules.aux_ids_path,
                fix=f"For {rules.label}: {write}.",
            )
        )
    else:
        out.append(
            finding(
                "E335",
                f"{rules.label} reads {rules.aux_ids_path} {ev.ids} and taps {fmt_taps(ev.taps)}{rule} "
                f"({rules.cite('offset')}), but the draft was trained on {fmt_taps(trained)} ({source}); {write}",
                field=rules.aux_ids_path,
                fix=f"For {rules.label}: {write}.",
            )
        )
    return out


def _fc_width(ev: EngineView, have: int | None, config: dict[str, Any], mla: bool) -> list[Finding]:
    """E202 where the engine sizes fc for another number of aux states than the draft's (SGLang: the
    Llama class reads num_aux_hidden_states, else len(eagle_config ids), else 3; the MLA class
    len(eagle_config ids), else len(top-level ids), else 3)."""
    rules = ev.rules
    if rules.aux_ids_path is None or have is None:
        return []
    count = None if mla else config.get("num_aux_hidden_states")
    if not isinstance(count, int) or isinstance(count, bool):
        ids = ev.ids or (int_ids(config.get("eagle_aux_hidden_state_layer_ids")) if mla else None)
        count = len(ids) if ids else 3
    if count == have:
        return []
    return [
        finding(
            "E202",
            f"{rules.label} sizes fc for {count} aux hidden states ({rules.cite('fc_width')}), fc.weight holds "
            f"{have}: the load fails on its shape",
            field="num_aux_hidden_states",
            fix=f"Write the {have} ids {rules.label} needs in {rules.aux_ids_path}"
            + ("." if mla else f" (or num_aux_hidden_states: {have})."),
        )
    ]


def _norms(ev: EngineView, view: Any, config: dict[str, Any]) -> list[Finding]:
    rules = ev.rules
    flags = view.flags
    out: list[Finding] = []
    trained_fc = bool(flags.get("fc_norm")) or bool(config.get("use_aux_norm"))
    if trained_fc and not ev.fc_norm:
        where = "use_aux_norm" if config.get("use_aux_norm") and not flags.get("fc_norm") else "fc_norm"
        out.append(
            finding(
                "E318",
                f"{where} is on but {rules.label} reads only {' / '.join(rules.fc_norm_keys)} "
                f"({rules.cite('fc_norm')}): it never applies fc_norm",
                field=where,
                fix=f"Write fc_norm: true at the top level for {rules.label}.",
            )
        )
    trained_out = bool(flags.get("norm_output"))
    if ev.norm_output and not trained_out:
        out.append(
            finding(
                "E333",
                f"{rules.label} feeds back the post-norm state (it reads {' or '.join(rules.norm_output_paths)}, "
                f"{rules.cite('norm_output')}), but the draft as trained (norm_output false) feeds back the pre-norm one",
                field="eagle_config.return_hidden_post_norm",
                fix="Write norm_output and eagle_config.return_hidden_post_norm alike.",
            )
        )
    trained_nbf = bool(flags.get("norm_before_fc"))
    if ev.norm_before_fc and not trained_nbf:
        out.append(
            finding(
                "E333",
                f"{rules.label} applies norm_before_fc (it reads {' / '.join(rules.norm_before_fc_paths)}, "
                f"{rules.cite('norm_before_fc')}), which the draft as trained does not (vLLM's "
                f"{view.draft_class.name if view.draft_class else 'draft class'} reads none here)",
                field="norm_before_fc",
                fix="Write norm_before_fc only for a class that applies it.",
            )
        )
    if trained_nbf and not ev.norm_before_fc:
        if ev.norm_before_fc_read:  # read, then dropped because fc_norm is on too
            out.append(
                finding(
                    "E333",
                    f"fc_norm and norm_before_fc are both on: {rules.label} applies only fc_norm "
                    f"({rules.cite('norm_flags_both')}), the draft as trained applies both",
                    field="norm_before_fc",
                    fix="Serve on vLLM or SGLang, which apply both, or retrain with one of the two.",
                )
            )
        else:
            mla_note = (
                "its MLA draft class reads no norm_before_fc"
                if view.attention == "mla" and not rules.norm_before_fc_mla
                else f"it reads only {' / '.join(rules.norm_before_fc_paths)}"
            )
            out.append(
                finding(
                    "E318",
                    f"norm_before_fc is on but {rules.label} never applies it: {mla_note} ({rules.cite('norm_before_fc')})",
                    field="norm_before_fc",
                    fix=f"Write eagle_config.norm_before_fc: true for {rules.label}"
                    + (
                        ""
                        if view.attention != "mla" or rules.norm_before_fc_mla
                        else " (no place exists for an MLA draft)"
                    )
                    + ".",
                )
            )
    if flags.get("norm_before_residual") and not rules.norm_before_residual:
        out.append(
            finding(
                "E332",
                f"norm_before_residual is on (as vLLM reads this config), but {rules.label} always feeds the first "
                f"layer's residual from the pre-norm state ({rules.cite('norm_before_residual')})",
                field="norm_before_residual",
            )
        )
    return out


def _vocab_window(ev: EngineView, config: dict[str, Any], tensors: frozenset[str], mla: bool) -> list[Finding]:
    rules = ev.rules
    out: list[Finding] = []
    has_d2t = any(t == "d2t" or t.endswith(".d2t") for t in tensors)
    dvs = config.get("draft_vocab_size")
    if rules.d2t_needs_draft_vocab_size and has_d2t and (dvs is None or dvs == config.get("vocab_size")):
        out.append(
            finding(
                "E411",
                f"the draft ships d2t but config.json has {'no draft_vocab_size' if dvs is None else 'draft_vocab_size == vocab_size'}: "
                f"{rules.label} builds no d2t and sizes lm_head for the full vocabulary ({rules.cite('d2t')})",
                field="draft_vocab_size",
            )
        )
    window = ev.window_asked
    if window is not None:
        if rules.window_flag and (not mla or rules.window_mla):
            how = f"pass {rules.window_flag} {window} to the server"
        elif rules.window_flag:
            how = f"its MLA draft ignores {rules.window_flag}"
        else:
            how = "it has no draft sliding window"
        out.append(
            finding(
                "W337",
                f"the config asks for a draft sliding window of {window}, which {rules.label} never reads from the "
                f"config ({rules.cite('window')}): {how}",
                field="sliding_window",
                fix=f"For {rules.label}: {how}.",
            )
        )
    return out


def shared_findings(findings: list[Finding]) -> list[Finding]:
    """The findings of a vLLM report that hold for every engine: the checkpoint's own defects, and W604
    (fc_norm exactly ones: a property of the tensors, whichever engine applies them)."""
    table = code_table()
    return [
        f
        for f in findings
        if (table[f.code].family in SHARED_FAMILIES and f.code not in VLLM_ONLY) or f.code in SHARED_CODES
    ]


def version_findings(status: EngineStatus) -> list[Finding]:
    """E707 when the engine release is not one eagle-convert has read."""
    line = status.warning()
    return [] if line is None else [finding("E707", line)]
