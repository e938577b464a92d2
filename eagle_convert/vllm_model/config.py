"""A draft's config.json as vLLM reads it for method eagle3: the one implementation of vLLM's reading.

`read_config(config, release)` follows both of vLLM's config paths (plain and speculators), resolves
the architecture and implementation class, the flags as the class applies them, the aux ids each
model runner uses and the aux count the class builds `fc` for, and says when vLLM rewrites the draft
into an MTP model, all as the named vLLM release does (`releases.py`; always given: no default below a command's entry). Inspect, validate, upgrade, the reference drafter and smoke all read drafts
through it; how the read config sets up a layer's attention is `attention.py`, the method a served
draft runs `method.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.vllm_model.changes import version_key
from eagle_convert.vllm_model.releases import Release
from eagle_convert.vllm_model.rewrites import (
    MTP_ARCHITECTURES,
    MTP_ARCHITECTURES_ANYWHERE,
    MTP_CONDITIONAL_ARCHITECTURES,
    MTP_CONDITIONAL_MODEL_TYPES,
    MTP_CONDITIONAL_SUBCONFIG,
    MTP_MODEL_TYPE_SUBSTRINGS,
    MTP_MODEL_TYPES,
    MTP_MODEL_TYPES_RETIRED,
    MTP_MODEL_TYPES_WITH_NEXTN,
    REWRITTEN_ARCHITECTURES,
)
from eagle_convert.vllm_model.tables import (
    ARCHITECTURES,
    ARCHITECTURES_FROM,
    ARCHITECTURES_UNTIL,
    AUX_IDS_V1,
    AUX_IDS_V2_SOURCES,
    DRAFT_CLASSES,
    EAGLE3_PREFIX,
    FLAG_NAMES,
    PLAIN_FLAG_DEFAULTS,
    SPECULATORS_ARCHITECTURES,
    SPECULATORS_FLAG_DEFAULTS,
    SPECULATORS_KINDS_IN,
    V1_DFLASH_AUX_IDS,
    DraftClass,
    default_aux_ids,
)

MAX_COUNT = 1024  # more aux states than this is a corrupt config, not a draft


def lookup(config: dict[str, Any], path: str) -> Any:
    """Value at a dotted path (`eagle_config.layer_ids`), None where any step is missing."""
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def eagle_section(config: dict[str, Any]) -> dict[str, Any]:
    """`eagle_config` when it is an object (vLLM reads it with `getattr(config, "eagle_config") or {}`)."""
    value = config.get("eagle_config")
    return value if isinstance(value, dict) else {}


def inner_config(config: dict[str, Any]) -> dict[str, Any]:
    """A speculators config's `transformer_layer_config` when it is an object ({} otherwise)."""
    value = config.get("transformer_layer_config")
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A config list as a list; any other set value as a one-element list (reported as invalid)."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def positive_int(value: Any) -> int | None:
    """`value` if it is a positive int (not a bool), else None: how a config's counts are read."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def flatten_speculators(config: dict[str, Any], rel: Release) -> dict[str, Any]:
    """The plain config vLLM builds from a speculators config (`SpeculatorsConfig`, `update_eagle3`).

    The inner `transformer_layer_config`, with the eagle fields copied from the top level and the
    flags given speculators' defaults; `architectures` is the class the inner model_type picks ("" when
    vLLM raises `Unsupported model_type`, or the release has no such algorithm: a `peagle` config before
    0.22.0 or from 0.34.0). Before 0.25.0 `update_eagle3` leaves fc_norm / norm_output alone (the inner
    values count); before 0.24.0 it always picks the Llama class.
    """
    kind = config.get("speculators_model_type")
    if not speculators_kind_in(kind, rel):
        kind = None  # this release builds no class from it (served.py says why)
    flat = dict(inner_config(config))
    flat["draft_vocab_size"] = config.get("draft_vocab_size")
    if config.get("target_hidden_size") is not None:
        flat["target_hidden_size"] = config["target_hidden_size"]
    top_level_31 = rel.has("speculators_top_level_31_flags")
    for flag, default in SPECULATORS_FLAG_DEFAULTS.get(kind if isinstance(kind, str) else "", {}).items():
        if flag in ("fc_norm", "norm_output") and not top_level_31:
            continue
        flat[flag] = config.get(flag, default)
    archs = SPECULATORS_ARCHITECTURES.get(kind if isinstance(kind, str) else "", {})
    inner_type = flat.get("model_type", "llama") if rel.has("speculators_inner_class") else "llama"
    flat["architectures"] = [archs.get(inner_type, "")]
    if config.get("eagle_aux_hidden_state_layer_ids"):
        flat["eagle_aux_hidden_state_layer_ids"] = config["eagle_aux_hidden_state_layer_ids"]
    return flat


def speculators_kind_in(kind: Any, release: Release) -> bool:
    """Whether `release` builds a draft from a speculators config of this `speculators_model_type`."""
    key = SPECULATORS_KINDS_IN.get(kind) if isinstance(kind, str) else None
    return key is None or release.has(key)


def _in(first: str, rel: Release) -> bool:
    return version_key(rel.version) >= version_key(first)


def mtp_rewrite(config: dict[str, Any], rel: Release) -> str | None:
    """Why vLLM's `SpeculativeConfig.hf_config_override` rewrites this (plain) draft config, or None."""
    model_type = config.get("model_type")
    archs = config.get("architectures")
    names = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    arch0 = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch0 in MTP_CONDITIONAL_ARCHITECTURES:
        path, since = MTP_CONDITIONAL_ARCHITECTURES[arch0]
        if _in(since, rel) and lookup(config, path):
            return f"architectures {arch0!r} with {path} set"
    sub = config.get(MTP_CONDITIONAL_SUBCONFIG)
    text = sub if isinstance(sub, dict) else config
    text_type = text.get("model_type")
    conditional = MTP_CONDITIONAL_MODEL_TYPES.get(text_type) if isinstance(text_type, str) else None
    if conditional is not None and _in(conditional[1], rel) and text.get(conditional[0]):
        where = f"{MTP_CONDITIONAL_SUBCONFIG}." if text is not config else ""
        return f"{where}model_type {text['model_type']!r} with {where}{conditional[0]} set"
    if isinstance(model_type, str):
        first = MTP_MODEL_TYPES.get(model_type)
        retired = MTP_MODEL_TYPES_RETIRED.get(model_type)
        if (first is not None and _in(first, rel)) or any(s in model_type for s in MTP_MODEL_TYPE_SUBSTRINGS):
            return f"model_type {model_type!r}"
        if retired is not None and version_key(retired[0]) <= version_key(rel.version) <= version_key(retired[1]):
            return f"model_type {model_type!r}"
        nextn = config.get("num_nextn_predict_layers")
        if model_type in MTP_MODEL_TYPES_WITH_NEXTN and isinstance(nextn, int) and nextn > 0:
            return f"model_type {model_type!r} with num_nextn_predict_layers {nextn}"
    if arch0 in MTP_ARCHITECTURES and _in(MTP_ARCHITECTURES[arch0], rel):
        return f"architectures {arch0!r}"
    anywhere = [a for a in names if a in MTP_ARCHITECTURES_ANYWHERE and _in(MTP_ARCHITECTURES_ANYWHERE[a], rel)]
    if anywhere:
        return f"architectures {anywhere[0]!r}" + ("" if anywhere[0] == arch0 else " (anywhere in the list)")
    if arch0 in REWRITTEN_ARCHITECTURES and _in(REWRITTEN_ARCHITECTURES[arch0][1], rel):
        return f"architectures {arch0!r} (becomes {REWRITTEN_ARCHITECTURES[arch0][0]})"
    return None


def registered(architecture: str | None, rel: Release) -> str | None:
    """The implementation class `rel`'s registry maps `architecture` to (None: not registered there)."""
    impl = ARCHITECTURES.get(architecture or "")
    needs = ARCHITECTURES_FROM.get(architecture or "")
    until = ARCHITECTURES_UNTIL.get(architecture or "")
    known = (needs is None or rel.has(needs)) and (until is None or rel.has(until))
    return impl if impl is not None and known else None


def resolve_architecture(vcfg: dict[str, Any], speculators: bool) -> str | None:
    """The architecture name vLLM looks up in its registry (after EAGLEConfig's prefix rule)."""
    archs = vcfg.get("architectures") or []
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str) or not archs[0]:
        return None
    name = archs[0]
    if not speculators and not (name.startswith(EAGLE3_PREFIX) or name.endswith(EAGLE3_PREFIX)):
        name = f"{EAGLE3_PREFIX}{name}"
    return name


def _shifted(ids: list[Any], offset: int) -> list[Any]:
    return (
        [i + offset for i in ids]
        if offset and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        else ids
    )


def _aux_ids_v1(vcfg: dict[str, Any], rel: Release) -> tuple[list[Any] | None, str]:
    """The ids the V1 runner of `rel` reads (`GPUModelRunner._get_eagle3_aux_layers_from_config`).

    Top-level ids; else `dflash_config.target_layer_ids` (plus one from 0.22.0), which a non-empty
    `eagle_config` object replaces by its `eagle_aux_hidden_state_layer_ids` from 0.22.0 on, even when
    it holds none. None from 0.34.0: the release has no V1 runner.
    """
    if not rel.has_v1:
        return None, ""
    top, nested = AUX_IDS_V1
    value = lookup(vcfg, top)
    if value:
        return as_list(value), top
    ids: list[Any] | None = None
    where = ""
    dflash = lookup(vcfg, V1_DFLASH_AUX_IDS)
    if dflash:
        ids, where = _shifted(as_list(dflash), 1 if rel.has("v1_dflash_ids_shifted") else 0), V1_DFLASH_AUX_IDS
    eagle = vcfg.get("eagle_config")
    if rel.has("v1_reads_eagle_config_aux_ids") and isinstance(eagle, dict) and eagle:
        value = eagle.get(nested.split(".", 1)[1])
        ids, where = (as_list(value), nested) if value else (None, "")
    return ids, where


def _aux_ids_v2(vcfg: dict[str, Any], rel: Release) -> tuple[list[Any] | None, str]:
    """The ids Model Runner V2 of `rel` reads: the first set source it knows, shifted where vLLM shifts it."""
    for src in AUX_IDS_V2_SOURCES:
        if not _in(src.first, rel):
            continue
        value = lookup(vcfg, src.path)
        if value:
            return _shifted(as_list(value), src.offset), src.path
    return None, ""


def _aux_count(vcfg: dict[str, Any], cls: DraftClass) -> tuple[int | None, str]:
    """A as the class computes it: the first set source, else 3 (None: an invalid count)."""
    for src in cls.aux_count_from:
        value = lookup(vcfg, src)
        if value is None or value == [] or value == 0:
            continue
        if src.startswith("num_aux"):
            count = positive_int(value)
            return (count if count is None or count <= MAX_COUNT else None), src
        if isinstance(value, list):
            return len(value), f"len({src})"
    return 3, "vLLM's default (3)"


@dataclass(frozen=True)
class VllmDraftConfig:
    """What vLLM builds from a draft config.json (method eagle3) in the release `release`."""

    config: dict[str, Any] = field(repr=False)  # config.json as written
    vcfg: dict[str, Any] = field(repr=False)  # the config the draft class reads
    speculators: bool
    speculators_kind: str | None
    architecture: str | None  # name looked up in the registry; None when the config names none
    draft_class: DraftClass | None  # None when the architecture is not a registered EAGLE-3 draft
    mtp_rewrite: str | None  # why vLLM rewrites the draft into another model (plain path only)
    flags: dict[str, bool]  # fc_norm, norm_output, norm_before_fc, norm_before_residual, use_aux
    aux_ids_v1: list[Any] | None  # None also where the release has no V1 runner (0.34.0 on)
    aux_ids_v1_where: str
    aux_ids_v2: list[Any] | None
    aux_ids_v2_where: str
    aux_count: int | None  # A: aux hidden states the class builds fc for (0 without aux states)
    aux_count_source: str
    release: Release
    # Each flag as written anywhere in config.json (top level, transformer_layer_config, eagle_config):
    # compared with `flags` it says where a release drops a flag the producer set.
    written: dict[str, bool] = field(default_factory=dict)

    @property
    def fc_norm_applied(self) -> bool:
        """Whether the class applies fc_norm (0.22.x builds and loads the MLA fc_norm, never applies it)."""
        if not self.flags.get("fc_norm"):
            return False
        return self.attention != "mla" or self.release.has("mla_fc_norm_applied")

    @property
    def lost_flags(self) -> list[str]:
        """Flags written true somewhere that this release's class does not switch on."""
        return [f for f in ("fc_norm", "norm_output") if self.written.get(f) and not self.flags.get(f)]

    @property
    def builds_eagle3(self) -> bool:
        """Whether vLLM builds an EAGLE-3 draft class from this config at all."""
        return self.draft_class is not None and self.mtp_rewrite is None

    @property
    def attention(self) -> str | None:
        return self.draft_class.attention if self.draft_class else None

    @property
    def aux_ids(self) -> list[Any] | None:
        """The ids the verdict judges: V1's where the release has V1 (the CPU runner, the fallback), else V2's."""
        return self.aux_ids_v1 if self.release.has_v1 else self.aux_ids_v2

    @property
    def aux_ids_where(self) -> str:
        return self.aux_ids_v1_where if self.release.has_v1 else self.aux_ids_v2_where

    def runtime_aux_ids(self, num_target_layers: int | None, *, runner: str | None = None) -> tuple[int, ...] | None:
        """Ids the runner captures: the configured ones, else the target's default (needs its depth).

        `runner` "v1" or "v2"; None: V1 where the release has it, else V2 (the only runner from 0.34.0).
        """
        ids = self.aux_ids if runner is None else self.aux_ids_v1 if runner == "v1" else self.aux_ids_v2
        if ids is not None:
            return tuple(ids)
        return default_aux_ids(num_target_layers) if num_target_layers else None


def read_config(config: dict[str, Any], rel: Release) -> VllmDraftConfig:
    """Read `config` (a draft's config.json) the way vLLM release `rel` does; never raises on odd values.

    The release is the caller's (each command resolves it once at its entry: `versions.default_release`).
    """
    speculators = "speculators_model_type" in config
    kind = config.get("speculators_model_type") if speculators else None
    vcfg = flatten_speculators(config, rel) if speculators else dict(config)
    architecture = resolve_architecture(vcfg, speculators)
    cls = DRAFT_CLASSES.get(registered(architecture, rel) or "")
    eagle = eagle_section(vcfg)
    defaults = (
        (SPECULATORS_FLAG_DEFAULTS.get(kind, {}) if speculators_kind_in(kind, rel) else {})
        if isinstance(kind, str)
        else PLAIN_FLAG_DEFAULTS
    )
    flags = {f: bool(vcfg.get(f, defaults.get(f, False))) for f in FLAG_NAMES}
    if not rel.has("fc_norm"):  # <= 0.21: no class reads fc_norm or norm_output
        flags["fc_norm"] = flags["norm_output"] = False
    # llama_eagle3.py / qwen3_eagle3.py LlamaModel.__init__: eagle_config wins for these two (#42143).
    if rel.has("eagle_config_norm_before_fc"):
        flags["norm_before_fc"] = bool(eagle.get("norm_before_fc", flags["norm_before_fc"]))
    flags["use_aux"] = bool(eagle.get("use_aux_hidden_state", True))
    if cls is not None and not cls.reads_norm_before_fc:
        flags["norm_before_fc"] = False
    if cls is not None and not cls.reads_use_aux_hidden_state:
        flags["use_aux"] = True
    count: int | None
    if not flags["use_aux"]:
        count, count_src = 0, "use_aux_hidden_state is false"
    elif not rel.has("fc_width_from_config"):
        count, count_src = 3, f"vLLM {rel} always builds fc for 3 aux states"
    else:
        count, count_src = _aux_count(vcfg, cls or DRAFT_CLASSES["Eagle3LlamaForCausalLM"])
    v1, v1_where = _aux_ids_v1(vcfg, rel)
    v2, v2_where = _aux_ids_v2(vcfg, rel)
    written = {
        f: any(bool(src.get(f)) for src in (config, inner_config(config), eagle_section(config))) for f in FLAG_NAMES
    }
    return VllmDraftConfig(
        config=config,
        vcfg=vcfg,
        speculators=speculators,
        speculators_kind=kind if isinstance(kind, str) else None,
        architecture=architecture,
        draft_class=cls,
        mtp_rewrite=None if speculators else mtp_rewrite(config, rel),
        flags=flags,
        aux_ids_v1=v1,
        aux_ids_v1_where=v1_where,
        aux_ids_v2=v2,
        aux_ids_v2_where=v2_where,
        aux_count=count,
        aux_count_source=count_src,
        release=rel,
        written=written,
    )
