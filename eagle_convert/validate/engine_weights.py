"""Embedding / lm_head sharing per engine: whether an engine drafts with the draft's own weights or the target's.

vLLM (the draft as trained) keeps a shipped embed_tokens / lm_head unless it is bit-identical to the
target's (`vllm_model.EMBED_SHARING`). SGLang and TensorRT-LLM decide from the config alone
(`EngineRules.embed_from_target`, `EngineRules.lm_head_from`, each cited): the findings below name
where that makes the engine draft with other weights than vLLM does, or with weights never loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_convert.engines import EngineRules
from eagle_convert.validate.findings import Finding, finding


@dataclass(frozen=True)
class DraftWeights:
    """What the checkpoint ships of the weights an engine may take from the target."""

    embed: bool  # ships embed_tokens.weight
    lm_head_rows: int | None  # lm_head.weight's rows (None: no lm_head shipped)
    embed_trained: bool = False  # its embed_tokens is close to the target's, not identical (I507 against --target)


def draft_weights(ctx: Any, reference_findings: list[Finding]) -> DraftWeights:
    """`DraftWeights` from a validate context (`rules.context.Context`) and the reference report's findings."""
    embed = ctx.disk_name("embed_tokens.weight")
    head = ctx.disk_name("lm_head.weight")
    shape = ctx.tensors[head].shape if head is not None else None
    rows = int(shape[0]) if shape else None
    trained = any(f.code == "I507" for f in reference_findings)
    return DraftWeights(embed is not None, rows, trained)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sharing_findings(rules: EngineRules, config: dict[str, Any], weights: DraftWeights) -> list[Finding]:
    """Where `rules`' engine takes embed_tokens / lm_head from elsewhere than vLLM does for `config`."""
    label = rules.label
    out: list[Finding] = []
    hidden, target_hidden = _int(config.get("hidden_size")), _int(config.get("target_hidden_size"))
    own_embed = target_hidden is not None and hidden is not None and target_hidden != hidden
    if own_embed and not weights.embed:
        out.append(
            finding(
                "E106",
                f"target_hidden_size {target_hidden} differs from hidden_size {hidden}: {label} keeps the draft's "
                f"own embed_tokens ({rules.cite('embed')}), which this draft does not ship: it drafts from an "
                "embedding that is never loaded",
                field="target_hidden_size",
                fix="Ship the draft's own embed_tokens.weight [vocab_size, hidden_size].",
            )
        )
    elif rules.embed_from_target and not own_embed and weights.embed and weights.embed_trained:
        out.append(
            finding(
                "W338",
                f"the draft ships its own embed_tokens, close to the target's but not identical (I507), and vLLM "
                f"drafts with it; {label} replaces it with the target's whenever the widths match "
                f"({rules.cite('embed')}): it drafts with another embedding than the one trained",
                tensor="embed_tokens.weight",
                fix=f"For {label}: fine-tune the draft with the target's embedding frozen, or expect acceptance "
                "to differ from vLLM's.",
            )
        )
    out += _lm_head(rules, config, weights)
    return out


def _lm_head(rules: EngineRules, config: dict[str, Any], weights: DraftWeights) -> list[Finding]:
    label, rows = rules.label, weights.lm_head_rows
    vocab, dvs = _int(config.get("vocab_size")), _int(config.get("draft_vocab_size"))
    if rules.lm_head_from == "shipped":  # the draft's own when shipped, else the target's (full vocabulary)
        if rows is None and dvs is not None and vocab is not None and dvs != vocab:
            return [
                finding(
                    "E402",
                    f"the draft ships no lm_head: {label} takes the target's ({rules.cite('lm_head')}), whose "
                    f"{vocab} logits d2t cannot map (draft_vocab_size {dvs})",
                    field="draft_vocab_size",
                    fix=f"Ship lm_head.weight [{dvs}, hidden_size].",
                )
            ]
        return []
    if config.get("tie_word_embeddings") is True:
        if rows is None:
            return []
        return [
            finding(
                "E339",
                f"tie_word_embeddings is true: {label} uses embed_tokens (the target's) as lm_head "
                f"({rules.cite('lm_head')}) and never loads the draft's lm_head.weight, which vLLM drafts with",
                field="tie_word_embeddings",
                fix=f"Write tie_word_embeddings: false for {label}.",
            )
        ]
    if config.get("draft_vocab_size") is None:
        if rows is None:
            return []
        if vocab is not None and rows != vocab:
            return [
                finding(
                    "E339",
                    f"config.json has no draft_vocab_size: {label} takes the target's lm_head over all {vocab} "
                    f"tokens ({rules.cite('lm_head')}) instead of the draft's {rows}-row lm_head.weight, so d2t "
                    "maps other logits than the draft was trained on",
                    field="draft_vocab_size",
                    fix=f"Write draft_vocab_size: {rows} into config.json.",
                )
            ]
        return [
            finding(
                "W338",
                f"config.json has no draft_vocab_size: {label} replaces the draft's lm_head.weight, which vLLM "
                f"drafts with, by the target's ({rules.cite('lm_head')}); unless it is a copy of the target's, "
                "the draft's logits differ",
                field="draft_vocab_size",
                fix=f"Write draft_vocab_size: {rows} into config.json for {label}.",
            )
        ]
    if rows is None:
        return [
            finding(
                "E402",
                f"draft_vocab_size is written, so {label} builds the draft's own lm_head ({rules.cite('lm_head')}), "
                "but this draft ships none: its lm_head is never loaded",
                field="draft_vocab_size",
                fix="Ship lm_head.weight [draft_vocab_size, hidden_size]"
                + (", or drop draft_vocab_size to take the target's." if dvs == vocab else "."),
            )
        ]
    return []
