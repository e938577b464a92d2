"""Cross-checks against the target's config.json (`--target PATH_OR_REPO`).

A draft belongs to exactly one target: its vocabulary, the width of the hidden states it fuses,
the layers it taps and the rope it was trained with all come from that target, read once as vLLM
reads them (`draft.target.Target`: a multimodal target's `text_config`, used whole). The checks
that need the target's weights (embedding, lm_head rows) live in `targetweights.py`; they open the
target's tensor headers only when a check needs them (`TargetWeights.weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft import Checkpoint, Target, load_from_source, load_target
from eagle_convert.errors import CheckpointNotFoundError, ConfigError
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model import (
    DRAFT_QUANT_SOURCE,
    ROPE_DEFAULTS,
    ROPE_KEYS,
    rope_is_nested,
    rope_parameters,
    rope_theta_declared,
)


@dataclass
class TargetWeights:
    """The target model, and its tensor headers once a check asks for them."""

    target: Target
    _weights: Checkpoint | None = field(default=None, repr=False)
    weights_note: str | None = None  # why the weights cannot be read (None: not tried or read)

    @property
    def description(self) -> str:
        return self.target.description

    def weights(self) -> Checkpoint | None:
        """config + headers of the target's weight files (byte ranges only); None when it has none."""
        if self._weights is None and self.weights_note is None and self.target.source is not None:
            try:
                self._weights = load_from_source(self.target.source)
            except CheckpointNotFoundError as exc:  # a folder with config.json only: config checks still run
                self.weights_note = f"target weights not read ({exc.message})"
        return self._weights


def open_target(ref: str | Path) -> TargetWeights:
    """A target folder, config.json file or hub repo, for validate; only config.json is read here.

    Raises:
        ConfigError: the target's text config has no integer hidden_size (it is not a target model).
    """
    target = load_target(ref)
    if target.hidden_size is None:
        raise ConfigError(f"{target.description}/config.json: no integer hidden_size; is this the target model?")
    return TargetWeights(target)


def rope_findings(ctx: Context) -> list[Finding]:
    """W504: the rope vLLM builds for the draft against the target's, key by key (YaRN included)."""
    tgt = ctx.target
    if tgt is None or rope_is_nested(ctx.vcfg) or tgt.rope is None or not tgt.rope_declared:
        return []  # a target config without any rope field is a partial copy: its defaults prove nothing
    draft, target = {**ROPE_DEFAULTS, **rope_parameters(ctx.vcfg)}, {**ROPE_DEFAULTS, **tgt.rope}
    keys = [
        k
        for k in ROPE_KEYS
        if (k != "rope_theta" or tgt.rope_theta_declared)
        and draft.get(k) != target.get(k)
        and not _same_number(draft.get(k), target.get(k))
    ]
    if not keys:
        return []
    diffs = "; ".join(f"{k} {draft.get(k)!r} vs the target's {target.get(k)!r}" for k in keys)
    defaulted = (
        f" (no rope_theta in the draft's config: vLLM uses {_num(draft['rope_theta'])})"
        if "rope_theta" in keys and not rope_theta_declared(ctx.vcfg)
        else ""
    )
    where = "rope_theta" if keys == ["rope_theta"] else "rope_scaling"
    return [
        finding(
            "W504", f"the draft's rope as vLLM builds it differs from the target's: {diffs}{defaulted}", field=where
        )
    ]


def _num(x: Any) -> str:
    return f"{x:.0f}" if isinstance(x, (int, float)) and float(x).is_integer() else repr(x)


def _same_number(a: Any, b: Any) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b)


def quant_findings(ctx: Context) -> list[Finding]:
    """I508: a quantized target beside a draft without its own quantization config."""
    tq = ctx.target.quantization if ctx.target else None
    if tq is None or ctx.vcfg.get(DRAFT_QUANT_SOURCE):
        return []
    method = tq.get("quant_method", "unknown method")
    return [
        finding(
            "I508",
            f"the target is quantized ({method}) and the draft has no quantization_config: vLLM "
            "0.32 serves the draft unquantized (get_draft_quant_config reads the draft's own "
            "config only)",
            field="quantization_config",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    tgt = ctx.target
    if tgt is None:
        return []
    out: list[Finding] = []
    name = ctx.target_source
    v, tv = ctx.vcfg.get("vocab_size"), tgt.vocab_size
    t, th = ctx.env.get("T"), tgt.hidden_size
    ids, n = ctx.view.aux_ids_v1, tgt.num_layers
    # Two of vocabulary, width and layer count disagreeing is no typo: the draft is another target's.
    evidence = [
        what
        for what, differs in (
            ("vocabulary", tv is not None and v is not None and v != tv),
            ("hidden width", t is not None and t != th),
            ("layer count", n is not None and isinstance(ids, list) and any(isinstance(i, int) and i > n for i in ids)),
        )
        if differs
    ]
    other = (
        f"; with its {' and '.join(evidence)} all differing, this draft was built for a different target"
        if len(evidence) > 1
        else ""
    )
    if tv is not None and v is not None and v != tv:
        out.append(
            finding(
                "E501",
                f"vocab_size is {v} but the target ({name}) has {tv}{other}",
                field="vocab_size",
                fix=f"Set vocab_size: {tv} (and check that this draft was trained for this target).",
            )
        )
    if t is not None and t != th:
        field = "target_hidden_size" if "target_hidden_size" in ctx.vcfg else "hidden_size"
        out.append(
            finding(
                "E502",
                f"the draft expects aux hidden states of width {t} ({field}) but the target "
                f"({name}) has hidden_size {th}{other}",
                field=field,
                fix=f"Set target_hidden_size: {th} if the weights are {th} wide; otherwise this draft "
                "belongs to another target.",
            )
        )
    return out + rope_findings(ctx) + quant_findings(ctx)
