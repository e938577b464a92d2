"""`upgrade --for vllm --for sglang ...`: one config every named engine reads as trained, or a refusal.

The upgraded config is written for vLLM (`configgen`); for every other engine named, the keys it reads
are added in its own place and convention: SGLang reads the aux ids only from
`eagle_config.eagle_aux_hidden_state_layer_ids` and taps id + 1 (its offset rule per target class,
`engines.sglang`), and builds an EAGLE-3 draft only for its two architecture names (both registered
in vLLM too); TensorRT-LLM reads no ids (its serve command sets them) and builds d2t only when
`draft_vocab_size` is written. The result is then judged as each engine reads it
(`validate.engines.engine_findings`, the same verdict `validate --for` gives): anything left that
changes what the draft computes there, such as `norm_before_residual: true` for SGLang or
TensorRT-LLM, refuses the upgrade with that finding's line. Only what the serving config sets (the
capture layers of TensorRT-LLM, a draft window flag) is left to the serve command.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from eagle_convert.draft import Checkpoint, Target
from eagle_convert.engines import VLLM, EngineRules, EngineStatus, ids_for, parse_for
from eagle_convert.errors import UpgradeRefusedError
from eagle_convert.io import TensorInfo
from eagle_convert.vllm_model import Release

SERVING_CONFIG_CODES = frozenset({"W337"})  # set by the engine's serve command, not by the draft's config


def engines_for(specs: Sequence[str]) -> list[EngineStatus]:
    """The engine releases `--for` names (vLLM alone when none: today's upgrade). Raises UsageError."""
    return parse_for(list(specs)) if specs else []


def _refuse(ckpt: Checkpoint, rules: EngineRules, why: str, hint: str | None = None) -> UpgradeRefusedError:
    return UpgradeRefusedError(
        f"{ckpt.description}: no single config serves this draft as trained on vLLM and {rules.label}: {why}",
        hint=hint or f"drop {{serve_for={rules.engine}}}",
        options=("serve_for", "layout"),
    )


def make_portable(
    config: dict[str, Any],
    engines: Sequence[EngineStatus],
    *,
    ckpt: Checkpoint,
    attention: str,
    aux_ids: Sequence[int],
    num_aux: int,
    tensors: frozenset[str],
    config_format: str,
    target: Target | None,
    warnings: list[str],
    release: Release,
    d2t: TensorInfo | None,
) -> dict[str, Any]:
    """`config` (the vLLM config the upgrade writes) with what each engine in `engines` needs to read it
    as trained; `aux_ids` are the ids in vLLM's convention (A(k)); `d2t` the draft's map (describe's), if any.

    Raises:
        UpgradeRefusedError: an engine cannot read any config as this draft was trained (the reason in one line).
    """
    out = copy.deepcopy(config)
    others = [st for st in engines if st.engine != VLLM]
    for st in others:
        rules = st.rules
        if config_format == "speculators" and not rules.reads_speculators:
            raise _refuse(
                ckpt,
                rules,
                f"it reads no speculators-format config ({rules.cite('speculators')})",
                "write {layout=vllm}",
            )
        if rules.architectures and attention in ("llama", "mla"):
            want = rules.mla_architecture if attention == "mla" else min(rules.architectures - {rules.mla_architecture})
            out["architectures"] = [want]
        if rules.aux_ids_path is not None:
            _write_ids(out, rules, ckpt, aux_ids, target, warnings)
        if rules.d2t_needs_draft_vocab_size and out.get("draft_vocab_size") is None:
            if d2t is not None and d2t.shape and d2t.shape[0] != out.get("vocab_size"):
                out["draft_vocab_size"] = d2t.shape[0]
    if others:
        _judge(out, others, ckpt=ckpt, num_aux=num_aux, tensors=tensors, target=target, release=release)
    return out


def _write_ids(
    out: dict[str, Any],
    rules: EngineRules,
    ckpt: Checkpoint,
    aux_ids: Sequence[int],
    target: Target | None,
    warnings: list[str],
) -> None:
    """The ids `rules`' engine must read to tap A(aux_ids), written where it reads them."""
    target_class = target.architectures[0] if target is not None and target.architectures else None
    n = target.num_layers if target is not None else None
    offset = rules.offsets.get(target_class or "", rules.offset)
    if target_class is None and rules.offsets:
        warnings.append(
            f"no --target architecture: the ids for {rules.label} are written with its {rules.offset} rule "
            f"(its other rules are for {', '.join(sorted(rules.offsets))} targets)"
        )
    need = ids_for(list(aux_ids), offset, n)
    if need is None:
        raise _refuse(
            ckpt,
            rules,
            f"no id list in {rules.aux_ids_path} makes it tap the layers A({', '.join(map(str, aux_ids))}) "
            f"the draft was trained on (its {offset} rule, {rules.cite('offset')})",
        )
    node = out
    *parents, leaf = (rules.aux_ids_path or "").split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[leaf] = need


def _judge(
    config: dict[str, Any],
    engines: Sequence[EngineStatus],
    *,
    ckpt: Checkpoint,
    num_aux: int,
    tensors: frozenset[str],
    target: Target | None,
    release: Release,
) -> None:
    """Refuse when an engine still reads `config` as another function than vLLM (the draft as trained)."""
    from eagle_convert.validate import engine_findings
    from eagle_convert.vllm_model import read_config

    view = read_config(config, release)
    for st in engines:
        rules = st.rules
        found = engine_findings(config, view, rules, target=target, tensors=tensors, aux_weights=num_aux)
        left = [
            f
            for f in found
            if f.code not in SERVING_CONFIG_CODES and not (f.code == "W334" and rules.aux_ids_path is None)
        ]
        if left:
            f = left[0]
            raise _refuse(
                ckpt, rules, f"{f.code} {f.message}", f"serve it on vLLM, or drop {{serve_for={rules.engine}}}"
            )
