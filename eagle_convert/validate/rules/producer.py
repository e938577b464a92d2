"""Known producer bugs that make a draft's flags lie (sgl-project/SpecForge PR #879, NVIDIA-NeMo/Automodel PR #2897).

These cannot be proven from the files (no producer records its version), so they are warnings
that name the bug and the date of its fix and let the user decide. W603: ids vLLM reads in their
producer's convention (engines/producers.py: what each trainer fed for the ids it writes).
"""

from __future__ import annotations

import json
import re
from typing import Any

from eagle_convert.engines import CAVEATS, Conversion, convert, fmt_taps, producer_for
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules import untrained
from eagle_convert.validate.rules.context import Context

_EAGLE31_HINT = re.compile(r"eagle[-_ .]?3[._]1|eagle31", re.IGNORECASE)

# What a producer's trainer does where vLLM's norm_before_residual chooses (layout id -> (value, who)),
# read from the trainer's source. vLLM's choice: llama_eagle3.py LlamaDecoderLayer._norm_after_residual
# (false: residual = the un-normed input, then hidden_norm) vs _norm_before_residual (true).
# - specforge: sgl-project/SpecForge specforge/modeling/draft/llama3_eagle.py LlamaDecoderLayer.forward
#   (commit a6b6b023, 2026-08-08): `residual = hidden_states` before `self.hidden_norm(hidden_states)`.
# - safeailab: SafeAILab/EAGLE eagle/traineagle3/cnets.py LlamaDecoderLayeremb.forward (commit cb7e0841,
#   2026-02-19): the same order.
# - speculators: vllm-project/speculators src/speculators/models/eagle3/config.py Eagle3SpeculatorConfig
#   (norm_before_residual defaults to False; model_definitions.py takes the normed residual only when set;
#   commit c05b95b3, 2026-08-20), while vLLM's update_eagle3 assumes True when the top level lacks it.
TRAINED_NORM_BEFORE_RESIDUAL: dict[str, tuple[bool, str]] = {
    "specforge": (False, "SpecForge"),
    "safeailab": (False, "SafeAILab EAGLE"),
    "speculators": (False, "vllm-project/speculators"),
}


def trained_norm_before_residual(layout: str) -> tuple[bool, str] | None:
    """(the value the producer trains with, its name) when the layout's trainer is known, else None."""
    return TRAINED_NORM_BEFORE_RESIDUAL.get(layout)


def check(ctx: Context) -> list[Finding]:
    out: list[Finding] = aux_convention(ctx) + untrained.check(ctx)
    if ctx.info.layout == "specforge" and ctx.flags["norm_output"]:
        out.append(
            finding(
                "W601",
                "SpecForge draft with norm_output: true; SpecForge before PR #879 (2026-09-15) "
                "trained with pre-norm feedback whatever the flag said, so vLLM's post-norm "
                "feedback would not match training",
                field="norm_output",
            )
        )
    nemo = ctx.info.layout == "nemo" or "LlamaEagle3DraftModel" in (ctx.config.get("architectures") or [])
    if nemo and not (ctx.flags["fc_norm"] or ctx.flags["norm_output"]):
        text = f"{ctx.ckpt.description} {json.dumps(ctx.config)}"
        if m := _EAGLE31_HINT.search(text):
            out.append(
                finding(
                    "W602",
                    f"NeMo Automodel draft named like EAGLE-3.1 ({m.group(0)!r}) but without "
                    "fc_norm / norm_output: NeMo's 3.1 recipes trained plain EAGLE-3 until PR #2897 "
                    "(2026-07-03)",
                    field="fc_norm",
                )
            )
    return out


def producer_conversion(ctx: Context, ids: list[Any], where: str) -> Conversion | None:
    """`ids` at `where` moved from their producer's convention to vLLM's (engines/producers.py), or None
    where the producer is unknown or did not write them there (another tool's ids)."""
    producer = producer_for(ctx.info.layout)
    if producer is None or producer.writes != where or not all(type(i) is int for i in ids):
        return None
    target = ctx.target
    target_class = target.architectures[0] if target is not None and target.architectures else None
    return convert(ids, producer, target_class=target_class, n=target.num_layers if target else None)


def aux_convention(ctx: Context) -> list[Finding]:
    """W603: ids vLLM reads that their producer trained on other layers, or that look like the
    output-of-layer convention (1, N//2-1, N-4) when the producer is unknown."""
    n = ctx.target.num_layers if ctx.target else None
    ids, where = ctx.view.aux_ids, ctx.view.aux_ids_where
    if not ids or not all(isinstance(i, int) for i in ids):
        return []
    v1 = " on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids"
    runner = v1 if where.startswith("eagle_config.") else ""
    out = []
    conv = producer_conversion(ctx, ids, where)
    caveat = f" ({CAVEATS[conv.producer.layout]})" if conv and conv.producer.layout in CAVEATS else ""
    if conv is not None and conv.ids is None:
        out.append(
            finding(
                "W603",
                f"{where} = {ids}: {conv.why}; vLLM taps {fmt_taps(ids)}{runner}",
                field=where,
                fix="Write eagle_aux_hidden_state_layer_ids at the top level with the layers the draft was trained on.",
            )
        )
    elif conv is not None and conv.ids != ids and conv.trained is not None:
        out.append(
            finding(
                "W603",
                f"{where} = {ids} are {conv.producer.name}'s ids, trained on {fmt_taps(conv.trained)} "
                f"({conv.producer.repo}); vLLM taps {fmt_taps(ids)}{runner}{caveat}"
                + (f"; assumed {conv.assumed}" if conv.assumed else ""),
                field=where,
                fix=f"Write eagle_aux_hidden_state_layer_ids: {conv.ids} at the top level (vLLM's convention).",
            )
        )
    elif conv is None and n is not None and sorted(ids) == [1, n // 2 - 1, n - 4]:
        out.append(
            finding(
                "W603",
                f"{where} = {ids} is (1, N//2-1, N-4) for this {n}-layer target: the output-of-layer convention "
                f"of SpecForge / ModelOpt / TorchSpec / NeMo for vLLM's ({2}, {n // 2}, {n - 3}); vLLM taps each "
                "layer one lower" + runner,
                field=where,
                fix=f"If the draft was trained on output-of-layer ids, write {[i + 1 for i in ids]} (vLLM convention).",
            )
        )
    if ctx.target and ctx.target.model_type == "minimax_m2":
        out.append(
            finding(
                "W603",
                f"MiniMax-M2 target: vLLM's aux ids are one lower than the draft's training "
                f"layers (vLLM PR #43671, open); check {where} = {ids}",
                field=where,
            )
        )
    return out
