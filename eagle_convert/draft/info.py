"""What a draft checkpoint is: layout, variant (and why), dimensions, aux layers, vocab mapping.

`describe()` turns a `Checkpoint` into a `DraftInfo` that inspect renders, validate checks and
upgrade plans from. It reads headers and config only, plus the small d2t/t2d tensors when asked.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.draft.config_schema import check_config
from eagle_convert.draft.kind import ensure_draft
from eagle_convert.draft.layout import LayoutMatch, canonical_map, config_alias, detect_attention, detect_layout
from eagle_convert.io import read_ints, readable_vocab_map
from eagle_convert.jsonable import Jsonable, key
from eagle_convert.vllm_model import AUX_ID_LOCATIONS, FLAG_NAMES, Release, VllmDraftConfig, lookup, read_config

_LAYER_RE = re.compile(r"^layers\.(\d+)\.")
_FC_NORM_RE = re.compile(r"^fc_norm\.(\d+)\.weight$")


@dataclass
class Flag:
    value: bool  # as the producer declared it (legacy aliases such as use_aux_norm honoured)
    where: list[str]  # config locations that set it; [] means vLLM's default applies
    vllm: bool  # as vLLM applies it (it reads no legacy alias)


@dataclass
class VocabMapping:
    reduced: bool
    d2t: dict[str, Any] | None = None  # shape, dtype, and (when read) target id range, unique, monotonic
    t2d: dict[str, Any] | None = None  # length, dtype, count, consistent with d2t


@dataclass
class DraftInfo(Jsonable):
    """What a draft is and how vLLM reads it: layout, variant, dimensions, aux ids, vocabulary maps (`describe`)."""

    layout: str
    producer: str
    layout_reasons: list[str]
    attention: str
    attention_reason: str
    architectures: list[str]
    vllm_architecture: str | None  # the name vLLM looks up for method eagle3 (None: it never gets there)
    vllm_class: str | None  # the EAGLE-3 class vLLM builds, None when it builds none
    vllm_note: str | None  # why vLLM builds no EAGLE-3 class from this config
    model_type: str | None
    variant: str  # "EAGLE-3" | "EAGLE-3.1" | "norm_before_fc"
    variant_reasons: list[str]
    flags: dict[str, Flag]
    hidden_size: int | None
    target_hidden_size: int | None
    num_aux: int | None
    num_aux_source: str
    aux_layer_ids: list[int] | None
    aux_layer_ids_where: list[str]
    num_layers: int
    vocab_size: int | None
    draft_vocab_size: int | None
    vocab: VocabMapping
    has_embed: bool
    dtypes: dict[str, int]
    num_tensors: int
    total_bytes: int
    storage: str
    files: list[str]
    canonical: dict[str, str] = field(repr=False, metadata=key(dump=False))  # on-disk name -> vLLM-native name
    # The config as the one release of this description reads it: what every later step asks.
    view: VllmDraftConfig = field(repr=False, compare=False, metadata=key(dump=False))

    def disk_name(self, canonical: str) -> str | None:
        """The on-disk name of the tensor vLLM names `canonical` (`d2t`, `fc.weight`), None without one."""
        return next((name for name, canon in self.canonical.items() if canon == canonical), None)


def _declared(config: dict[str, Any], view: VllmDraftConfig, flag: str) -> bool:
    """The flag as the producer meant it: vLLM's value, unless only a legacy alias sets it or the
    release checked drops a value written true somewhere (`VllmDraftConfig.lost_flags`)."""
    alias = config_alias(flag)
    if flag not in view.vcfg and alias and alias in config:
        return bool(config[alias])
    return view.flags[flag] or flag in view.lost_flags


def _flag_locations(config: dict[str, Any], flag: str) -> list[str]:
    paths = [flag, f"eagle_config.{flag}", f"transformer_layer_config.{flag}"]
    alias = config_alias(flag)
    if alias:
        paths.append(alias)
    return [p for p in paths if lookup(config, p) is not None]


def _aux_ids(config: dict[str, Any], view: VllmDraftConfig) -> tuple[list[int] | None, list[str]]:
    """The ids vLLM uses (the V1 runner's up to 0.33.0, else V2's), else the ids the draft declares
    where no runner of the release reads them (eagle_config's on 0.34.0: the ids it was trained on,
    which upgrade moves to where vLLM reads them; W323 says what vLLM taps instead), and every
    location that holds ids."""
    where = [p for p in AUX_ID_LOCATIONS if isinstance(v := lookup(config, p), list) and v]
    used, used_where = (
        (view.aux_ids, view.aux_ids_where) if view.aux_ids is not None else (view.aux_ids_v2, view.aux_ids_v2_where)
    )
    if used is None and where:
        used, used_where = lookup(config, where[0]), where[0]
    if used is None or not all(isinstance(i, int) and not isinstance(i, bool) for i in used):
        return None, where
    if used_where in where:  # the one vLLM uses first
        where.remove(used_where)
    return [int(i) for i in used], [used_where, *where] if used_where else where


def _vllm_note(view: VllmDraftConfig) -> str | None:
    if view.mtp_rewrite:
        return f"{view.mtp_rewrite}: vLLM rewrites the draft into an MTP model (SpeculativeConfig.hf_config_override)"
    if view.architecture is None:
        return "no architectures: vLLM cannot pick a draft class"
    if view.draft_class is None:
        return f"{view.architecture} is not a registered vLLM EAGLE-3 draft architecture"
    return None


def _dim(eff: dict[str, Any], key: str) -> int | None:
    value = eff.get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Classified:
    """What a checkpoint is whatever vLLM release reads it: draft kind, layout, names, attention."""

    layout: LayoutMatch
    canon: dict[str, str]
    attention: str
    attention_reason: str
    by_canon: dict[str, Any]  # canonical name -> TensorInfo
    fc_norms: list[int]
    layers: set[int]
    flag_locations: dict[str, list[str]]
    dtypes: dict[str, int]


def classify(ckpt: Checkpoint) -> Classified:
    """The release-independent half of `describe` (most of its cost), for reuse across releases.

    Raises:
        NotADraftError: the checkpoint is no EAGLE-3 draft; UnknownLayoutError; ConfigError.
    """
    check_config(ckpt.config, ckpt.config_where)
    ensure_draft(ckpt)  # a target, MTP head, Medusa, DFlash ... is refused before any layout guess
    keys = list(ckpt.tensors)
    layout = detect_layout(keys, ckpt.config, metadata=ckpt.file_metadata, storage=ckpt.storage, where=ckpt.description)
    canon = canonical_map(keys)
    attention, attention_reason = detect_attention(canon.values())
    by_canon = {c: ckpt.tensors[k] for k, c in canon.items()}
    fc_norms = sorted(int(m.group(1)) for c in by_canon if (m := _FC_NORM_RE.match(c)))
    layers = {int(m.group(1)) for c in by_canon if (m := _LAYER_RE.match(c))}
    locations = {f: _flag_locations(ckpt.config, f) for f in FLAG_NAMES}
    dtypes = dict(Counter(t.dtype for t in ckpt.tensors.values()))
    return Classified(layout, canon, attention, attention_reason, by_canon, fc_norms, layers, locations, dtypes)


def describe(
    ckpt: Checkpoint,
    release: Release,
    *,
    read_vocab: bool = True,
    classified: Classified | None = None,
) -> DraftInfo:
    """Classify and measure a checkpoint; `read_vocab` also reads d2t/t2d values.

    Args:
        ckpt: the opened checkpoint (`open_checkpoint`).
        release: the vLLM release whose reading the vLLM fields (class, flags, aux ids) follow,
            resolved once by the command's entry; the reading is kept as `DraftInfo.view`.
        read_vocab: also read the d2t/t2d values (False: headers only).
        classified: `classify(ckpt)` when already done (the compatibility matrix describes one
            checkpoint for every release).

    Returns:
        Layout, variant, dimensions, aux ids, vocabulary maps and how vLLM reads the draft.

    Raises:
        NotADraftError: the checkpoint is no EAGLE-3 draft (`draft/kind.py`).
    """
    known = classified or classify(ckpt)
    layout, canon, attention, attention_reason = known.layout, known.canon, known.attention, known.attention_reason
    by_canon = known.by_canon
    view = read_config(ckpt.config, release)
    eff = view.vcfg
    flags = {f: Flag(_declared(ckpt.config, view, f), list(known.flag_locations[f]), view.flags[f]) for f in FLAG_NAMES}

    hidden = _dim(eff, "hidden_size")
    if hidden is None and "norm.weight" in by_canon and by_canon["norm.weight"].shape:
        hidden = by_canon["norm.weight"].shape[0]
    target_hidden = _dim(eff, "target_hidden_size") or hidden
    fc = by_canon.get("fc.weight")
    fc_norms = known.fc_norms
    aux_ids, aux_where = _aux_ids(ckpt.config, view)
    num_aux, num_aux_source = _num_aux(eff, fc, target_hidden, aux_ids, fc_norms)

    lm_head = by_canon.get("lm_head.weight")
    vocab_size = _dim(eff, "vocab_size")
    if vocab_size is None and "t2d" in by_canon and by_canon["t2d"].shape:
        vocab_size = by_canon["t2d"].shape[0]
    draft_vocab = _dim(eff, "draft_vocab_size") or (lm_head.shape[0] if lm_head and lm_head.shape else vocab_size)
    vocab = _vocab_mapping(ckpt, canon, vocab_size, draft_vocab, read_vocab)

    variant, variant_reasons = _variant(flags, fc_norms, "input_norm.weight" in by_canon)
    layers = known.layers
    return DraftInfo(
        layout=layout.id,
        producer=layout.producer,
        layout_reasons=list(layout.reasons),
        attention=attention,
        attention_reason=attention_reason,
        architectures=list(ckpt.config.get("architectures") or []),
        vllm_architecture=None if view.mtp_rewrite else view.architecture,
        vllm_class=view.draft_class.name if view.builds_eagle3 and view.draft_class else None,
        vllm_note=_vllm_note(view),
        model_type=eff.get("model_type"),
        variant=variant,
        variant_reasons=variant_reasons,
        flags=flags,
        hidden_size=hidden,
        target_hidden_size=target_hidden,
        num_aux=num_aux,
        num_aux_source=num_aux_source,
        aux_layer_ids=aux_ids,
        aux_layer_ids_where=aux_where,
        num_layers=len(layers),
        vocab_size=vocab_size,
        draft_vocab_size=draft_vocab,
        vocab=vocab,
        has_embed="embed_tokens.weight" in by_canon,
        dtypes=dict(known.dtypes),
        num_tensors=len(ckpt.tensors),
        total_bytes=ckpt.total_bytes,
        storage=ckpt.storage,
        files=list(ckpt.weight_files),
        canonical=canon,
        view=view,
    )


def _num_aux(
    eff: dict[str, Any], fc: Any, target_hidden: int | None, aux_ids: list[int] | None, fc_norms: list[int]
) -> tuple[int | None, str]:
    if fc is not None and target_hidden and len(fc.shape) == 2 and fc.shape[1] % target_hidden == 0:
        return fc.shape[1] // target_hidden, f"fc.weight width {fc.shape[1]} / target_hidden_size {target_hidden}"
    if _dim(eff, "num_aux_hidden_states"):
        return int(eff["num_aux_hidden_states"]), "config num_aux_hidden_states"
    if aux_ids:
        return len(aux_ids), "number of aux layer ids"
    if fc_norms:
        return len(fc_norms), "number of fc_norm tensors"
    return None, "unknown (no fc.weight, ids or num_aux_hidden_states)"


def _variant(flags: dict[str, Flag], fc_norms: list[int], has_input_norm: bool) -> tuple[str, list[str]]:
    reasons: list[str] = []
    if flags["norm_before_fc"].value or has_input_norm:
        if flags["norm_before_fc"].value:
            reasons.append(f"norm_before_fc is true ({', '.join(flags['norm_before_fc'].where)})")
        if has_input_norm:
            reasons.append("has input_norm.weight")
        return "norm_before_fc", reasons
    for flag in ("fc_norm", "norm_output"):
        if flags[flag].value:
            reasons.append(f"{flag} is true ({', '.join(flags[flag].where)})")
    if fc_norms:
        reasons.append(f"has {len(fc_norms)} fc_norm.i tensors")
    if reasons:
        return "EAGLE-3.1", reasons
    return "EAGLE-3", ["no fc_norm / norm_output flags or tensors, no input_norm"]


def _vocab_mapping(
    ckpt: Checkpoint, canon: dict[str, str], vocab_size: int | None, draft_vocab: int | None, read: bool
) -> VocabMapping:
    inv = {c: k for k, c in canon.items()}
    mapping = VocabMapping(reduced=bool(vocab_size and draft_vocab and draft_vocab < vocab_size))
    d2t_key, t2d_key = inv.get("d2t"), inv.get("t2d")
    targets: list[int] | None = None
    if d2t_key:
        info = ckpt.tensors[d2t_key]
        mapping.d2t = {"shape": list(info.shape), "dtype": info.dtype}
        if read and info.dtype in ("I64", "I32") and readable_vocab_map(info, draft_vocab):
            targets = [i + d for i, d in enumerate(read_ints(ckpt, d2t_key))]
            mapping.d2t.update(
                min_target_id=min(targets) if targets else None,
                max_target_id=max(targets) if targets else None,
                unique=len(set(targets)) == len(targets),
                increasing=all(a < b for a, b in zip(targets, targets[1:])),
            )
    if t2d_key:
        info = ckpt.tensors[t2d_key]
        mapping.t2d = {"shape": list(info.shape), "dtype": info.dtype}
        if read and info.dtype in ("BOOL", "U8", "I64", "I32") and readable_vocab_map(info, vocab_size):
            kept = [v != 0 for v in read_ints(ckpt, t2d_key)]
            mapping.t2d["count"] = sum(kept)
            if targets is not None:
                mapping.t2d["consistent_with_d2t"] = all(0 <= t < len(kept) and kept[t] for t in targets)
    return mapping
