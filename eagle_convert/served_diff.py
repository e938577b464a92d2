"""`served_diff(a, b)`: whether two drafts compute the same function as vLLM serves them.

The raw diff (`diff.py`) reports every key and byte. Two drafts can differ there and still be served
identically, because vLLM reads each config through its own rules and fills what is missing:
- the config format and key spelling: speculators vs native, flags top-level or nested, `rope_theta`
  vs `rope_parameters` (both read by `vllm_model.rope_parameters`), an explicit null vs a missing key;
- the dtype a config states (`torch_dtype` vs `dtype`): vLLM 0.32.0 builds the draft's ModelConfig
  with `dtype=self.target_model_config.dtype` (config/speculative.py SpeculativeConfig.__post_init__),
  so the draft runs in the target's dtype whatever its config says; weights are compared by value;
- a missing RMSNorm weight vs an explicit one of ones (vLLM's RMSNorm starts at 1.0 and the EAGLE-3
  loaders have no strict check), tensor names that load into the same parameter, and `t2d`, which
  is never loaded (`vllm_model.vllm_name`).
Each side is read by `vllm_model.read_config` for one release; what the draft class computes with
(its class, flags as applied, aux ids per runner, sizes, rope, sliding windows, parameters) is compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.diff import compare_tensor
from eagle_convert.draft import Checkpoint, open_checkpoint
from eagle_convert.io import DECODABLE, read_array
from eagle_convert.jsonable import dump
from eagle_convert.vllm_model import (
    Release,
    VllmDraftConfig,
    default_release,
    read_config,
    rope_is_nested,
    rope_parameters,
    sliding_windows,
    vllm_name,
)

# Sizes the draft class reads from the config, with the fallbacks it applies itself
# (0.32.0 model_executor/models/llama_eagle3.py: target_hidden_size defaults to hidden_size,
# draft_vocab_size to vocab_size; transformers LlamaConfig: num_key_value_heads to num_attention_heads,
# head_dim to hidden_size // num_attention_heads). Any other missing key is its config class's default.
_SIZES = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
    "rms_norm_eps",
    "hidden_act",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "max_position_embeddings",
)
_FALLBACK = {
    "target_hidden_size": "hidden_size",
    "draft_vocab_size": "vocab_size",
    "num_key_value_heads": "num_attention_heads",
}
_NORM = re.compile(r"(^|\.)(\w*norm)(\.\d+)?\.weight$")  # RMSNorm weights: vLLM initialises them to 1.0
_SHARED = {"embed_tokens.weight": "the target's embedding", "lm_head.weight": "the target's lm_head"}
UNSET = "(class default)"


@dataclass(frozen=True)
class ServedDifference:
    """One thing the two drafts compute with differently, as served."""

    kind: str  # "config" | "tensor"
    key: str  # the served field, or the vLLM parameter (without vLLM's `model.`)
    a: Any
    b: Any
    note: str = ""


@dataclass
class ServedDiff:
    """Two drafts compared as vLLM `release` serves them."""

    a: str
    b: str
    release: str
    differences: list[ServedDifference] = field(default_factory=list)
    # Raw differences that vanish as served: "fc_norm.0.weight: missing in A, where vLLM keeps 1.0; all ones in B".
    equivalent: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return dump(self, "release same differences equivalent")


def served_diff(a: str | Checkpoint, b: str | Checkpoint, *, release: Release | None = None) -> ServedDiff:
    """Whether drafts `a` and `b` compute the same function as vLLM `release` serves them.

    Args:
        a, b: checkpoints (paths, hub refs or opened `Checkpoint`s).
        release: the vLLM release whose reading is applied (default: the installed vLLM's, else the newest).

    Returns:
        The served differences (empty: the same function) and the raw differences that vanish.

    Raises:
        CheckpointNotFoundError, CheckpointReadError: as `open_checkpoint`.
    """
    ca = a if isinstance(a, Checkpoint) else open_checkpoint(a)
    cb = b if isinstance(b, Checkpoint) else open_checkpoint(b)
    rel = default_release() if release is None else release  # the entry: the one ambient default
    va, vb = read_config(ca.config, rel), read_config(cb.config, rel)
    out = ServedDiff(ca.description, cb.description, rel.version)
    fa, fb = served_fields(va), served_fields(vb)
    for key in fa:
        if fa[key] != fb[key]:
            out.differences.append(ServedDifference("config", key, fa[key], fb[key]))
    _tensors(ca, cb, va, vb, out)
    return out


def served_fields(view: VllmDraftConfig) -> dict[str, Any]:
    """What the draft class computes with, read from a config the way `view.release` reads it."""
    vcfg = view.vcfg
    cls = view.draft_class.name if view.builds_eagle3 and view.draft_class else None
    fields: dict[str, Any] = {"draft class": cls, "mtp rewrite": view.mtp_rewrite}
    for flag, value in view.flags.items():
        fields[flag] = view.fc_norm_applied if flag == "fc_norm" else value
    fields["aux ids (V1 runner)"] = _ids(view.aux_ids_v1) if view.release.has_v1 else "(no V1 runner)"
    fields["aux ids (V2 runner)"] = _ids(view.aux_ids_v2)
    fields["aux states"] = view.aux_count
    for key in _SIZES:
        fields[key] = _size(vcfg, key)
    fields["rope"] = "per layer type" if rope_is_nested(vcfg) else rope_parameters(vcfg)
    fields["sliding windows"] = sliding_windows(view)
    return fields


def _ids(ids: list[Any] | None) -> Any:
    return list(ids) if ids else "default (2, N//2, N-3)"


def _size(vcfg: dict[str, Any], key: str) -> Any:
    value = vcfg.get(key)
    if value is None and key in _FALLBACK:
        value = vcfg.get(_FALLBACK[key])
    if value is None and key == "head_dim":
        h, n = vcfg.get("hidden_size"), vcfg.get("num_attention_heads")
        value = h // n if isinstance(h, int) and isinstance(n, int) and n > 0 else None
    return UNSET if value is None else value


def _served_names(ckpt: Checkpoint) -> dict[str, str]:
    """vLLM parameter -> on-disk name, for every tensor vLLM loads (t2d and other dropped names left out)."""
    out: dict[str, str] = {}
    for name in ckpt.tensors:
        param = vllm_name(name)
        if param is not None:
            out.setdefault(param.removeprefix("model."), name)
    return out


def _built(view: VllmDraftConfig, param: str) -> bool:
    """Whether the draft class has `param` at all (fc_norm.* and input_norm exist only with their flag)."""
    if param.startswith("fc_norm."):
        return view.flags.get("fc_norm", False)
    if param == "input_norm.weight":
        return view.flags.get("norm_before_fc", False)
    return True


def _tensors(ca: Checkpoint, cb: Checkpoint, va: VllmDraftConfig, vb: VllmDraftConfig, out: ServedDiff) -> None:
    na, nb = _served_names(ca), _served_names(cb)
    for param in sorted(na.keys() | nb.keys()):
        if param in na and param in nb:
            ta, tb = ca.tensors[na[param]], cb.tensors[nb[param]]
            if na[param] != nb[param]:
                out.equivalent.append(f"{param}: named {na[param]} in A, {nb[param]} in B")
            change = compare_tensor(ca, cb, ta, tb)
            if change is None:
                continue
            if change.max_abs_diff == 0.0 and not change.differing_elements:
                out.equivalent.append(f"{param}: {ta.dtype} in A, {tb.dtype} in B, equal values")
                continue
            if change.max_abs_diff is None:
                shapes = f"{ta.dtype}{list(ta.shape)}", f"{tb.dtype}{list(tb.shape)}"
                out.differences.append(ServedDifference("tensor", param, *shapes, "shape or dtype"))
            else:
                note = f"max abs diff {change.max_abs_diff:.6g} in {change.differing_elements} elements"
                out.differences.append(ServedDifference("tensor", param, "values", "values", note))
            continue
        side, ckpt, name = ("A", ca, na[param]) if param in na else ("B", cb, nb[param])
        missing = "B" if side == "A" else "A"
        if not _built(vb if side == "A" else va, param):
            continue  # the module does not exist there: the flag's difference above says it
        if _NORM.search(param):
            if _ones(ckpt, name):
                out.equivalent.append(f"{param}: missing in {missing}, where vLLM keeps 1.0; all ones in {side}")
                continue
            note = f"missing in {missing}: vLLM keeps 1.0 there; {side} holds trained values"
        elif param in _SHARED:
            note = f"missing in {missing}: vLLM uses {_SHARED[param]} there"
        else:
            note = f"missing in {missing}: vLLM keeps uninitialised memory there"
        a_val: str | None = name if side == "A" else None
        b_val: str | None = None if side == "A" else name
        out.differences.append(ServedDifference("tensor", param, a_val, b_val, note))


def _ones(ckpt: Checkpoint, name: str) -> bool:
    info = ckpt.tensors[name]
    if info.dtype not in DECODABLE:
        return False
    arr = read_array(ckpt, name)
    return bool(arr.size) and bool((arr == 1.0).all())
