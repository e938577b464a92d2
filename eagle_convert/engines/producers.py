"""Whose convention a draft's aux-layer ids are in: each producer's training code as data.

A(k) is the residual stream after k target layers, vLLM's meaning of id k (model_executor/models/llama.py
`_maybe_add_hidden_state(..., idx + 1, ...)`). A trainer writes ids and feeds the draft some A-indices for
them; an engine reads ids and taps some A-indices. A draft is served as trained only where the two agree,
so ids move between places (top level, `eagle_config`) only through the A-indices they were trained on.

Read from the trainers' source (commit, file, function, lines). Every trainer that writes ids into
`eagle_config` trains id k on A(k + 1), the output of decoder layer k (0-based), not on vLLM's A(k); only
speculators (top level) trains on A(k). Where a trainer's capture paths disagree for the written ids (a
backend or dump that feeds A(k)), `trained_on` says so instead of choosing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eagle_convert.engines.reading import DEFAULT, ids_for, int_ids, taps
from eagle_convert.engines.rules import Offset
from eagle_convert.engines.select import ENGINES, VLLM
from eagle_convert.vllm_model import lookup

# "as-is": written id k fed A(k) (vLLM's reading); the Offset values as the engines apply them
# (engines/rules.py: "plus-one" A(k + 1), "first-id" A(k + 1) only when ids[0] == 1, "max-id").
Convention = Literal["as-is"] | Offset

NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
TOP = "eagle_aux_hidden_state_layer_ids"

# SGLang's own per-target rules that a trainer capturing through SGLang inherits. SGLang 0.5.14 (the
# release SpecForge pins, pyproject.toml `sglang==0.5.14` @ a6b6b023) has the first-id rule of 0.5.23
# (models/deepseek_v2.py DeepseekV2ForCausalLM.set_eagle3_layers_to_capture, lines 2799-2814;
# models/glm4_moe_lite.py lines 1023-1038) but not its gpt-oss max-id rule (models/gpt_oss.py lines
# 1273-1285 always add 1): so only the first-id rows of the engine's table are taken.
_SGLANG_FIRST_ID: dict[str, Convention] = {
    cls: rule for cls, rule in ENGINES["sglang"].rules[-1].offsets.items() if rule == "first-id"
}


@dataclass(frozen=True)
class Capture:
    """One way a trainer fed the target's hidden states to training: the convention it applied to the ids."""

    name: str  # "HF backend", "SGLang backend (sglang 0.5.14)"
    convention: Convention
    cite: str  # file, function and lines at the producer's commit
    per_target: Mapping[str, Convention] = field(default_factory=dict)  # target class -> its own rule


@dataclass(frozen=True)
class Producer:
    """A trainer: where it writes aux ids and what it trained them on."""

    layout: str  # its id in schemas/layouts.json (draft/layout.py's detection)
    name: str
    repo: str  # owner/name @ the commit read
    writes: str | None  # the config path its exported config carries ids at (None: it writes none)
    chooses: str  # where the ids come from (file, function)
    default: str  # its default ids
    captures: tuple[Capture, ...]


_SF = "sgl-project/SpecForge @ a6b6b023"
_SPEC = "vllm-project/speculators @ c05b95b3"
_MO = "NVIDIA/Model-Optimizer @ a2fbac7b"
_TS = "lightseekorg/TorchSpec @ 6f21829c"
_NEMO = "NVIDIA-NeMo/Automodel @ 36044ad3"

PRODUCERS: dict[str, Producer] = {
    p.layout: p
    for p in (
        Producer(
            "specforge",
            "SpecForge",
            _SF,
            NESTED,
            "specforge/algorithms/model_providers.py resolve_eagle_capture_layers, lines 188-210 (a run override "
            "that is not written back, else the draft config's eagle_config ids, else the default)",
            "[1, N//2-1, N-4]",
            (
                Capture(
                    "HF backend (removed 2026-07-14, d5883d5b)",
                    "plus-one",
                    "specforge/modeling/target/eagle3_target_model.py @ e7ba6c09 "
                    "HFEagle3TargetEngine.generate_eagle3_data, lines 251-272: a forward hook on the output of "
                    "layers[id]",
                ),
                Capture(
                    "SGLang backend (sglang 0.5.14)",
                    "plus-one",
                    "specforge/offline_capture/sglang_backend/capture.py set_eagle3_capture_layers, lines 86-87: "
                    "SGLang's set_eagle3_layers_to_capture (0.5.14 models/llama.py lines 812-824: id + 1)",
                    _SGLANG_FIRST_ID,
                ),
            ),
        ),
        Producer(
            "speculators",
            "speculators",
            _SPEC,
            TOP,
            "src/speculators/models/utils.py resolve_target_layer_ids, lines 40-57; "
            "src/speculators/models/eagle3/config.py eagle_aux_hidden_state_layer_ids",
            "[2, N//2, N-3]",
            (
                Capture(
                    "vLLM hidden-state extraction",
                    "as-is",
                    "scripts/launch_vllm.py main, lines 119-141: the ids go unchanged to vLLM's "
                    "extract_hidden_states draft config",
                ),
            ),
        ),
        Producer(
            "modelopt",
            "ModelOpt",
            _MO,
            NESTED,
            "modelopt/torch/export/plugins/hf_spec_configs.py llama_eagle_template_config (eagle_config, filled "
            "by hf_spec_export.py _export_config); plugins/hf_eagle.py default_eagle_aux_layer_ids, lines 58-63",
            "[1, N//2-1, N-4]",
            (
                Capture(
                    "online HF training",
                    "plus-one",
                    "modelopt/torch/speculative/plugins/hf_eagle.py HFEagleModel.modify, lines 401-406: a "
                    "forward hook on the output of layers[id]",
                ),
                Capture(
                    "Megatron",
                    "plus-one",
                    "modelopt/torch/speculative/plugins/megatron_eagle.py _transformer_layer_forward_hook, lines "
                    "661-666: the output of layer_number - 1",
                ),
                Capture(
                    "HF and TensorRT-LLM dumps",
                    "plus-one",
                    "examples/speculative_decoding/collect_hidden_states/compute_hidden_states_hf.py lines 184-187 "
                    "(hidden_states[lid + 1]); compute_hidden_states_trtllm.py line 201 (eagle3_layers_to_capture, "
                    "output of layer)",
                ),
            ),
        ),
        Producer(
            "torchspec",
            "TorchSpec",
            _TS,
            NESTED,
            "a draft-model template's eagle_config (configs/draft_models/*.json); torchspec/utils/misc.py "
            "get_default_eagle3_aux_layer_ids, lines 76-88",
            "[1, N//2-1, N-4]",
            (
                Capture(
                    "HF backend",
                    "plus-one",
                    "torchspec/models/target/eagle3_target_model.py generate_eagle3_data, lines 205-223: a forward "
                    "hook on the output of layers[id]",
                ),
                Capture(
                    "vLLM backend",
                    "plus-one",
                    "torchspec/inference/engine/vllm_engine.py, lines 155-166: lid + 1 'to align with sglang's "
                    "convention'",
                ),
                Capture(
                    "SGLang backend (patched sglang 0.5.10.post1)",
                    "plus-one",
                    "torchspec/inference/engine/sgl_engine.py, line 237: aux_hidden_state_layer_ids to SGLang's "
                    "eagle_aux ids (patches/sglang/v0.5.10.post1/sglang.patch); SGLang's per-target rule assumed",
                    _SGLANG_FIRST_ID,
                ),
            ),
        ),
        Producer(
            "nemo",
            "NeMo Automodel",
            _NEMO,
            None,
            "nemo_automodel/components/speculative/eagle/target.py default_eagle3_aux_layer_ids, lines 42-61 "
            "(the recipe's aux_layer_ids; no writer into the draft config found)",
            "[1, N//2-1, N-4]",
            (
                Capture(
                    "HF target",
                    "plus-one",
                    "nemo_automodel/components/speculative/eagle/target.py, line 285: a forward hook on the "
                    "output of layers[id]; eagle/vllm_runner.py lines 236-245 shift +1 to match it",
                ),
            ),
        ),
    )
}

# Known capture paths that trained the same written ids on other layers, which a config cannot show.
CAVEATS: dict[str, str] = {
    "modelopt": "ModelOpt's offline vLLM dump (compute_hidden_states_vllm.py, line 262, in "
    "examples/speculative_decoding/collect_hidden_states) passes the ids to vLLM unchanged: a draft trained "
    "from it is in vLLM's convention already",
}


def producer_for(layout: str | None) -> Producer | None:
    """The trainer behind a detected layout (draft/layout.py's `LayoutMatch.id`), if its convention is known."""
    return PRODUCERS.get(layout or "")


def written_ids(producer: Producer, config: Mapping[str, Any]) -> list[int] | None:
    """The ids at the place `producer` writes them (None: none there, or not a list of integers)."""
    return int_ids(lookup(dict(config), producer.writes)) if producer.writes else None


@dataclass(frozen=True)
class Trained:
    """The A-indices written ids were trained on, or why they cannot be told."""

    taps: tuple[int, ...] | None
    why: str  # "" when known
    assumed: str = ""  # what was assumed for lack of the target ("" when nothing was)


def _apply(ids: Sequence[int], convention: Convention, n: int | None) -> tuple[int, ...] | None:
    return tuple(ids) if convention == "as-is" else taps(ids, convention, n)


def fmt_taps(t: Any) -> str:
    """Taps as a person reads them: A(k) is the residual stream after k target layers."""
    return "the default layers" if t == DEFAULT else "A(" + ", ".join(map(str, t)) + ")"


def trained_on(
    producer: Producer, ids: Sequence[int], *, target_class: str | None = None, n: int | None = None
) -> Trained:
    """What `producer` trained written `ids` on, for a target of class `target_class` with `n` layers.

    Without the target's class a capture path's per-target rule (SGLang's first-id rule for DeepSeek-V2
    family targets) cannot be applied: its general convention is taken and `assumed` says so.
    """
    seen = {c.name: _apply(ids, c.per_target.get(target_class or "", c.convention), n) for c in producer.captures}
    if None in seen.values():
        return Trained(None, f"{producer.name}'s taps for {list(ids)} depend on the target's depth: pass the target")
    assumed = ""
    if target_class is None and any(
        _apply(ids, rule, n) != seen[c.name] for c in producer.captures for rule in c.per_target.values()
    ):
        assumed = "a target outside SGLang's first-id family (DeepSeek-V2/V3, Kimi, GLM-4 MoE lite): pass the target"
    if len(set(seen.values())) == 1:
        return Trained(next(iter(seen.values())), "", assumed)
    parts = ", ".join(f"its {name} on {fmt_taps(t)}" for name, t in seen.items() if t is not None)
    return Trained(None, f"{producer.name} trained {list(ids)} differently by capture path: {parts}")


def engine_ids(
    trained: Sequence[int], engine: str = VLLM, *, target_class: str | None = None, n: int | None = None
) -> list[int] | None:
    """The ids `engine` must read to tap exactly A(trained), in its own convention (None: no id list does).

    vLLM reads id k as A(k); SGLang and TensorRT-LLM by their newest release's offset for the target class
    (engines/sglang.py, engines/trtllm.py).
    """
    if engine == VLLM:
        return list(trained)
    rules = ENGINES[engine].rules[-1]
    return ids_for(trained, rules.offsets.get(target_class or "", rules.offset), n)


@dataclass(frozen=True)
class Conversion:
    """Written ids moved from a producer's convention to an engine's: the ids, or why there are none."""

    producer: Producer
    written: tuple[int, ...]
    trained: tuple[int, ...] | None
    ids: list[int] | None
    why: str  # "" when `ids` is known
    assumed: str = ""  # what was assumed for lack of the target (Trained.assumed)


def convert(
    ids: Sequence[int],
    producer: Producer,
    engine: str = VLLM,
    *,
    target_class: str | None = None,
    n: int | None = None,
) -> Conversion:
    """`ids` as `producer` writes them, converted to what `engine` must read to serve them as trained."""
    t = trained_on(producer, ids, target_class=target_class, n=n)
    if t.taps is None:
        return Conversion(producer, tuple(ids), None, None, t.why)
    out = engine_ids(t.taps, engine, target_class=target_class, n=n)
    why = "" if out is not None else f"no id list makes {ENGINES[engine].title} tap {fmt_taps(t.taps)}"
    return Conversion(producer, tuple(ids), t.taps, out, why, t.assumed)
