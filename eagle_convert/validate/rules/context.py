"""The draft as vLLM sees it: which class it builds, which flags and sizes it reads, which names it
maps. Every rule reads this one object, so vLLM's config semantics live in one place.

Built from vLLM 0.32.0's source (llama_eagle3.py, qwen3_eagle3.py, deepseek_eagle3.py,
configs/eagle.py, configs/speculators/algos.py); see docs/validate.md for where the docs differ.
Unlike `describe.effective_config`, legacy aliases (`use_aux_norm`) are *not* honoured here,
because vLLM does not honour them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.draft import schemas
from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.draft.describe import DraftInfo
from eagle_convert.io.safetensors_header import TensorInfo

MAX_COUNT = 1024  # more layers or aux states than this is a corrupt config, not a draft
FLAG_NAMES = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")
# speculators' update_eagle3 defaults (norm_before_residual differs from the plain path).
SPECULATORS_FLAG_DEFAULTS = {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False,
                             "norm_output": False}
SPECULATORS_ARCHS = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"}
PEAGLE_ARCHS = {"llama": "PeagleLlamaForCausalLM", "qwen3": "PeagleQwen3ForCausalLM"}


@dataclass
class Context:
    """Everything rules need; `env` holds the symbols of `schemas/tensors.json`."""

    ckpt: Checkpoint
    info: DraftInfo
    config: dict[str, Any]  # config.json as written
    vcfg: dict[str, Any]  # the config vLLM's draft class reads
    speculators: bool
    arch: str | None  # architecture name vLLM resolves (after its Eagle3 prefix rule)
    impl: str | None  # implementation class, None when `arch` is not registered
    attention: str  # llama | qwen3 | mla
    flags: dict[str, bool]  # as vLLM applies them, incl. use_aux
    aux_count: int | None  # A: aux hidden states vLLM builds fc for
    aux_count_source: str
    env: dict[str, Any]
    target: dict[str, Any] | None = None
    target_source: str | None = None
    serving_context: int | None = None
    vnames: dict[str, str | None] = field(default_factory=dict)  # on-disk name -> name after vLLM's mapping

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self.ckpt.tensors

    def disk_name(self, vname: str) -> str | None:
        """On-disk name that vLLM maps to `vname`."""
        return next((k for k, v in self.vnames.items() if v == vname), None)

    def aux_ids_v1(self) -> tuple[list[Any] | None, str]:
        """Ids vLLM's V1 runner (also CPU) uses: top-level, then eagle_config's."""
        top = self.vcfg.get("eagle_aux_hidden_state_layer_ids")
        if top:
            return as_list(top), "eagle_aux_hidden_state_layer_ids"
        nested = eagle_section(self.vcfg).get("eagle_aux_hidden_state_layer_ids")
        if nested:
            return as_list(nested), "eagle_config.eagle_aux_hidden_state_layer_ids"
        return None, ""

    def aux_ids_v2(self) -> list[Any] | None:
        """Ids vLLM's V2 runner uses: top-level, then eagle_config.layer_ids (not the long name)."""
        ids = self.vcfg.get("eagle_aux_hidden_state_layer_ids") or eagle_section(self.vcfg).get("layer_ids")
        return as_list(ids) if ids else None


def as_list(value: Any) -> list[Any]:
    """A config list as a list; any other truthy value as a one-element list (reported as invalid)."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def eagle_section(cfg: dict[str, Any]) -> dict[str, Any]:
    value = cfg.get("eagle_config")
    return value if isinstance(value, dict) else {}


def vllm_config(config: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(config the draft class reads, is_speculators), following vLLM's two config paths.

    Speculators configs go through `update_eagle3` (or `update_peagle`, which sets
    norm_before_residual False and does not propagate fc_norm / norm_output).
    """
    if "speculators_model_type" not in config:
        return dict(config), False
    kind = config.get("speculators_model_type")
    inner = config.get("transformer_layer_config")
    eff = dict(inner) if isinstance(inner, dict) else {}
    eff["draft_vocab_size"] = config.get("draft_vocab_size")
    if config.get("target_hidden_size") is not None:
        eff["target_hidden_size"] = config["target_hidden_size"]
    flags = SPECULATORS_FLAG_DEFAULTS if kind == "eagle3" else {"norm_before_residual": False, "norm_before_fc": False}
    for flag, default in flags.items():
        eff[flag] = config.get(flag, default)
    archs = SPECULATORS_ARCHS if kind == "eagle3" else PEAGLE_ARCHS if kind == "peagle" else {}
    eff["architectures"] = [archs.get(eff.get("model_type", "llama"), "")]
    if config.get("eagle_aux_hidden_state_layer_ids"):
        eff["eagle_aux_hidden_state_layer_ids"] = config["eagle_aux_hidden_state_layer_ids"]
    return eff, True


def resolve_architecture(vcfg: dict[str, Any], speculators: bool) -> tuple[str | None, str | None]:
    """(name vLLM looks up, implementation class or None) for method eagle3."""
    table = schemas.load("tensors.json")["architectures"]
    archs = vcfg.get("architectures") or []
    if not archs or not isinstance(archs[0], str) or not archs[0]:
        return None, None
    name = archs[0]
    if not speculators and not (name.startswith("Eagle3") or name.endswith("Eagle3")):
        name = f"Eagle3{name}"
    return name, table.get(name)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def aux_count(vcfg: dict[str, Any], impl: str | None) -> tuple[int | None, str]:
    """A as the implementation class computes it (first set source, else 3)."""
    sources = schemas.load("tensors.json")["classes"].get(impl or "Eagle3LlamaForCausalLM")["aux_count_from"]
    eagle = eagle_section(vcfg)
    for src in sources:
        value = eagle.get(src.split(".", 1)[1]) if src.startswith("eagle_config.") else vcfg.get(src)
        if value is None or value == [] or value == 0:
            continue
        if src.startswith("num_aux"):
            count = _int(value)
            return (count if count is None or count <= MAX_COUNT else None), src
        if isinstance(value, list):
            return len(value), f"len({src})"
    return 3, "vLLM's default (3)"


def build_context(ckpt: Checkpoint, info: DraftInfo, *, target: dict[str, Any] | None = None,
                  target_source: str | None = None, serving_context: int | None = None) -> Context:
    config = ckpt.config
    vcfg, speculators = vllm_config(config)
    arch, impl = resolve_architecture(vcfg, speculators)
    classes = schemas.load("tensors.json")["classes"]
    attention = classes[impl]["attention"] if impl else info.attention
    cls = classes.get(impl or "", {"norm_before_fc": True, "use_aux_hidden_state": True})
    eagle = eagle_section(vcfg)
    flags = {f: bool(vcfg.get(f, False)) for f in FLAG_NAMES}
    flags["norm_before_fc"] = bool(eagle.get("norm_before_fc", vcfg.get("norm_before_fc", False)))
    flags["use_aux"] = bool(eagle.get("use_aux_hidden_state", True))
    if not cls["norm_before_fc"]:
        flags["norm_before_fc"] = False  # the MLA class never reads it
    if not cls["use_aux_hidden_state"]:
        flags["use_aux"] = True  # the MLA class always builds fc
    a, a_src = aux_count(vcfg, impl) if flags["use_aux"] else (0, "use_aux_hidden_state is false")
    env = _symbols(vcfg, flags, a, target)
    ctx = Context(ckpt, info, config, vcfg, speculators, arch, impl, attention, flags, a, a_src, env, target,
                  target_source, serving_context)
    ctx.vnames = {name: vllm_name(name) for name in ckpt.tensors}
    return ctx


def _symbols(vcfg: dict[str, Any], flags: dict[str, bool], a: int | None,
             target: dict[str, Any] | None) -> dict[str, Any]:
    h, n_heads = _int(vcfg.get("hidden_size")), _int(vcfg.get("num_attention_heads"))
    t = _int(vcfg["target_hidden_size"]) if "target_hidden_size" in vcfg else h
    v = _int(vcfg.get("vocab_size"))
    vd = _int(vcfg.get("draft_vocab_size")) if vcfg.get("draft_vocab_size") is not None else v
    tv = _int(target.get("vocab_size")) if target else v
    th = _int(target.get("hidden_size")) if target else t
    hd = _int(vcfg.get("head_dim")) or (h // n_heads if h and n_heads else None)
    q_lora = vcfg.get("q_lora_rank")
    return {
        "H": h, "T": t, "A": a, "V": v, "Vd": vd, "TV": tv or v, "TH": th or t,
        "L": layers if (layers := _int(vcfg.get("num_hidden_layers"))) is None or layers <= MAX_COUNT else None,
        "I": _int(vcfg.get("intermediate_size")), "nH": n_heads,
        "nKV": _int(vcfg.get("num_key_value_heads")) or n_heads, "hd": hd,
        "qr": _int(q_lora), "kvr": _int(vcfg.get("kv_lora_rank")), "nope": _int(vcfg.get("qk_nope_head_dim")),
        "rope": _int(vcfg.get("qk_rope_head_dim")), "vh": _int(vcfg.get("v_head_dim")),
        "use_aux": flags["use_aux"], "fc_norm": flags["fc_norm"], "norm_before_fc": flags["norm_before_fc"],
        "reduced": (vd != (tv or v)) if vd and (tv or v) else None,
        "attention_bias": bool(vcfg.get("attention_bias", False)),
        "o_bias": bool(vcfg.get("attention_bias", False) or vcfg.get("bias", False)),
        "mlp_bias": bool(vcfg.get("mlp_bias", False)), "has_q_lora": q_lora is not None,
        "k": None, "in0": None,
    }


def vllm_name(name: str) -> str | None:
    """The name vLLM's load_weights maps an on-disk name to (without its own `model.`), None if dropped.

    `model.`-prefixed names are kept as they are: vLLM would look for `model.model.*` and fail.
    """
    if "t2d" in name or "mask_hidden" in name:
        return None
    if "d2t" in name or "lm_head" in name:
        return name
    return name.replace("midlayer.", "layers.0.", 1)
