"""The model card (`README.md`) every `upgrade` and `finetune` output carries, with Hugging Face metadata.

A draft on the hub is useless without three facts its config does not state plainly: which target it
speculates for, how to serve it, and how well it drafts (speculators issue 1055 asks for exactly
that). The card is rendered from the draft's `config.json` alone (flags and aux ids as vLLM reads
them, `vllm_model.read_config`; the provenance chain eagle-convert records under `_eagle_convert`),
plus what the caller knows: the target and, when measured, an acceptance table (`acceptance_from_smoke`
reads `smoke --json` output, the shape `report` also writes). The front matter is what
huggingface_hub's `ModelCardData` writes (tests/test_card.py), so `huggingface_hub.ModelCard` parses it.

`push` points the card's `vllm serve` command at the hub repo (`retarget_card`).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from eagle_convert.draft.card_acceptance import (
    AcceptanceTable,
    acceptance_lines,
    sweep_label,
)
from eagle_convert.draft.card_serve import NUM_SPECULATIVE_TOKENS, engine_lines, serve_command, serving_lines
from eagle_convert.draft.card_sweep import k_sweep_lines
from eagle_convert.draft.checkpoint import CheckpointRef, open_checkpoint
from eagle_convert.errors import CheckpointNotFoundError, UsageError
from eagle_convert.io import write_text_atomic
from eagle_convert.vllm_model import NEWEST_RELEASE, Release, read_config

# A card says what the draft is as written (sizes, variant, dtype): the newest known release's
# reading, never the installed vLLM's (a card must not change with the machine that wrote it).
_CARD_READING = Release(NEWEST_RELEASE)

CARD_FILE = "README.md"
PROVENANCE_KEY = "_eagle_convert"  # the config.json entry where eagle-convert records what it did
CARD_MARKER = "<!-- model card written by eagle-convert -->"
LIBRARY_NAME = "vllm"  # the library that loads the draft: it has no transformers class of its own
_SERVE_MODEL = re.compile(r'("model": )"(?:[^"\\]|\\.)*"')
_SGLANG_DRAFT = re.compile(r"(--speculative-draft-model-path )(?:'[^']*'|\S+)")
_FLAG_MEANING = {
    "fc_norm": "one RMSNorm per auxiliary target hidden state (`fc_norm.{i}.weight`) before `fc` (EAGLE-3.1)",
    "norm_output": "the next draft step reads the post-`norm` state instead of the pre-norm one (EAGLE-3.1)",
    "norm_before_residual": "layer 0 normalises the fused hidden state before it becomes the residual",
    "norm_before_fc": "one RMSNorm over all concatenated aux states before `fc` (a pre-3.1 variant)",
}


#: safetensors dtype names -> the torch names a config's torch_dtype uses (floating types only).
_TORCH_DTYPE_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "BF16": "bfloat16",
    "F16": "float16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}


class _HasDtype(Protocol):
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...


def hub_repo_id(ref: str | os.PathLike[str] | None) -> str | None:
    """`org/name` when `ref` names a hub repo (also a folder inside the HF cache), else None."""
    if ref is None:
        return None
    text = str(ref)
    m = re.search(r"models--([^/\\]+?)--([^/\\]+)", text)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    try:
        return CheckpointRef.parse(text).repo
    except UsageError:  # a malformed hf:// reference names no repo
        return None


def provenance_chain(config: dict[str, Any]) -> list[dict[str, Any]]:
    """eagle-convert's provenance entries, newest first (each one's input nests as `previous`)."""
    chain: list[dict[str, Any]] = []
    entry = config.get(PROVENANCE_KEY)
    while isinstance(entry, dict) and len(chain) < 32:
        chain.append(entry)
        entry = entry.get("previous")
    return chain


def _variant(flags: dict[str, bool]) -> str:
    if flags["norm_before_fc"]:
        return "norm_before_fc"
    return "EAGLE-3.1" if flags["fc_norm"] or flags["norm_output"] else "EAGLE-3"


def weights_dtype(tensors: Iterable[_HasDtype]) -> str | None:
    """The floating dtype holding most weight elements, as a torch name (`bfloat16`), or None.

    What the card shows when config.json states no torch_dtype/dtype: the integer d2t/t2d maps
    do not count, and a draft whose fc_norm is F32 beside BF16 layers is still a BF16 draft.
    """
    counts: dict[str, int] = {}
    for t in tensors:
        name = _TORCH_DTYPE_NAMES.get(t.dtype)
        if name is not None:
            counts[name] = counts.get(name, 0) + math.prod(t.shape)
    return max(counts, key=lambda k: counts[k]) if counts else None


def recorded_target(config: dict[str, Any]) -> str | None:
    """The target a draft's config records (eagle-convert's provenance, or a speculators
    `speculators_config.verifier.name_or_path`), if any."""
    return _target_of(config, provenance_chain(config))


def _target_of(config: dict[str, Any], chain: list[dict[str, Any]]) -> str | None:
    """The target recorded by a provenance entry or a speculators verifier, if any."""
    for entry in chain:
        if isinstance(entry.get("target"), str):
            return entry["target"]
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    name = verifier.get("name_or_path")
    return name if isinstance(name, str) and name else None


def _metadata(base_model: str | None, variant: str) -> str:
    """The card's YAML block as huggingface_hub's `ModelCardData(...).to_yaml()` writes it (its
    `yaml_dump`, None fields dropped), without importing huggingface_hub and filelock on upgrade's path."""
    import yaml

    tags = [
        "eagle3",
        *(["eagle3.1"] if variant == "EAGLE-3.1" else []),
        "speculative-decoding",
        "draft-model",
        "eagle-convert",
    ]
    data = {"base_model": base_model, "library_name": LIBRARY_NAME, "tags": tags}
    text = yaml.dump({k: v for k, v in data.items() if v is not None}, sort_keys=False, allow_unicode=True)
    return f"---\n{text.strip()}\n---\n"


def _fmt(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _entry_lines(entry: dict[str, Any]) -> list[str]:
    """One provenance entry as a list item plus indented details."""
    head = f"- **{entry.get('operation', 'unknown operation')}** (eagle-convert {entry.get('version', '?')})"
    if entry.get("source"):
        head += f" from `{entry['source']}`"
        if entry.get("source_revision"):
            head += f" @ `{entry['source_revision']}`"
    out = [head]
    skip = {"tool", "version", "operation", "source", "source_revision", "previous", "config_changes"}
    for key, value in entry.items():
        if key in skip or value in (None, [], {}):
            continue
        if key == "stages" and isinstance(value, list):
            value = "; ".join(
                f"{s.get('name')} {s.get('steps')} steps, lr {_fmt(s.get('lr'))}" for s in value if isinstance(s, dict)
            )
        elif key == "data" and isinstance(value, dict):
            value = ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
        elif isinstance(value, dict):
            value = "; ".join(
                f"{k.replace('_', ' ')} "
                + (", ".join(f"{a} {_fmt(b)}" for a, b in v.items()) if isinstance(v, dict) else _fmt(v))
                for k, v in value.items()
            )
        out.append(f"  - {key.replace('_', ' ')}: {_fmt(value)}")
    return out


def model_card(
    config: dict[str, Any],
    *,
    model_ref: str,
    target: str | None = None,
    acceptance: AcceptanceTable | None = None,
    title: str | None = None,
    dtype: str | None = None,
    serving: str | None = None,
    engines: Sequence[str] = (),
) -> str:
    """README.md text for the draft whose config.json is `config`.

    Args:
        config: the draft's config.json.
        model_ref: what `vllm serve` loads (the output folder, or the hub repo after `push`).
        target: the target model (folder or hub id; else the one the provenance or a speculators
            verifier records). `base_model` is set only when the target is a hub repo id.
        acceptance: a measured acceptance table (`acceptance_from_smoke`).
        title: the card's heading.
        dtype: the weights' dtype (`weights_dtype`, or a safetensors name such as BF16), shown
            when the config states none.
        serving: the compatibility matrix's sentence for the written draft
            (`validate.matrix.serving_summary`: which vLLM releases serve it as trained,
            differently, or not at all); without it the card says how to get it.
        engines: engines besides vLLM to list serving instructions for ("sglang", "trtllm":
            `upgrade --for`), each with its own serve command.

    Returns:
        The card's Markdown, with Hugging Face metadata.
    """
    dtype = _TORCH_DTYPE_NAMES.get(dtype, dtype) if dtype else None
    view = read_config(config, _CARD_READING)
    cfg = view.vcfg
    chain = provenance_chain(config)
    target = target or _target_of(config, chain)
    base_model = hub_repo_id(target)
    shown_target = base_model or target
    variant = _variant(view.flags)
    name = title or Path(model_ref.rstrip("/")).name or model_ref

    lines = [_metadata(base_model, variant), CARD_MARKER, "", f"# {name}", ""]
    lines.append(
        f"An **{variant}** speculative-decoding draft for "
        + (f"**{shown_target}**" if shown_target else "its target model (not recorded)")
        + ". It is not a language model on its own: vLLM runs it beside the target, it proposes "
        f"{NUM_SPECULATIVE_TOKENS} tokens per step from the target's hidden states, and the target "
        "verifies them in one forward pass, so the output is exactly the target's."
    )
    lines += [
        "",
        "## Serve with vLLM",
        "",
        "```bash",
        serve_command(shown_target, model_ref),
        "```",
        "",
        *serving_lines(serving),
    ]
    for engine in dict.fromkeys(e for e in engines if e != "vllm"):
        lines += engine_lines(config, shown_target, model_ref, engine)

    hidden, th = cfg.get("hidden_size"), cfg.get("target_hidden_size") or cfg.get("hidden_size")
    ids = view.aux_ids
    rows = [
        ("variant", variant),
        ("architecture", view.architecture or "not set"),
        ("vLLM class", view.draft_class.name if view.draft_class else "none (not a registered EAGLE-3 draft)"),
        ("draft layers", cfg.get("num_hidden_layers")),
        ("hidden size", f"{hidden} (target {th})"),
        ("aux hidden states", f"{view.aux_count}, target layer ids {ids if ids else 'vLLM default (2, N//2, N-3)'}"),
        (
            "vocabulary",
            (
                f"{_fmt(cfg.get('vocab_size'))} target, "
                f"{_fmt(cfg.get('draft_vocab_size') or cfg.get('vocab_size'))} draft"
            ),
        ),
        ("dtype", _config_dtype(config, cfg) or (f"{dtype} (the weights')" if dtype else "not set")),
    ]
    lines += ["", "## What it is", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in rows]
    lines += ["", "## Flags", "", "| flag | value | effect |", "|---|---|---|"]
    lines += [f"| `{f}` | {_fmt(view.flags[f])} | {m} |" for f, m in _FLAG_MEANING.items()]

    lines += ["", "## Provenance", ""]
    if chain:
        lines.append("Newest first, from `config.json` → `_eagle_convert`:")
        lines.append("")
        for entry in chain:
            lines += _entry_lines(entry)
    else:
        lines.append("No eagle-convert provenance recorded in `config.json`.")
    if acceptance is not None and acceptance.rows:
        lines += ["", "## Measured acceptance", "", *acceptance_lines(acceptance)]
        sweeps = [(sweep_label(r), r.k_sweep) for r in acceptance.rows if r.k_sweep]
        if sweeps:
            lines += ["", "### Which k to serve with", "", *k_sweep_lines(sweeps)]
    return "\n".join(lines).rstrip() + "\n"


def _config_dtype(config: dict[str, Any], vcfg: dict[str, Any]) -> Any:
    """torch_dtype/dtype as vLLM reads it, or the top level's (a speculators config keeps it there)."""
    for c in (vcfg, config):
        value = c.get("torch_dtype") or c.get("dtype")
        if value:
            return value
    return None


def retarget_card(text: str, model_ref: str) -> str:
    """The card with its `vllm serve` command loading `model_ref` (a hub repo after `push`);
    text that is not an eagle-convert card comes back unchanged."""
    if CARD_MARKER not in text:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("vllm serve "):
            line = _SERVE_MODEL.sub(lambda m: m.group(1) + json.dumps(model_ref), line, count=1)
        elif line.startswith("python -m sglang.launch_server "):
            line = _SGLANG_DRAFT.sub(lambda m: m.group(1) + shlex.quote(model_ref), line, count=1)
        elif line.startswith("  speculative_model_dir: "):
            line = f"  speculative_model_dir: {json.dumps(model_ref)}" + ("\n" if line.endswith("\n") else "")
        out.append(line)
    return "".join(out)


def write_model_card(
    folder: str | Path,
    *,
    model_ref: str | None = None,
    target: str | None = None,
    acceptance: AcceptanceTable | None = None,
    serving: str | None = None,
) -> Path:
    """(Re)write `folder/README.md` from `folder/config.json` (replace-by-rename, never half-written).

    Args:
        folder: the draft folder.
        model_ref: as for `model_card` (default: the folder).
        target: as for `model_card`.
        acceptance: as for `model_card`.
        serving: as for `model_card`.

    Returns:
        The card's path.
    """
    folder = Path(folder)
    text = folder_card(folder, model_ref=model_ref, target=target, acceptance=acceptance, serving=serving)
    path = folder / CARD_FILE
    write_text_atomic(path, text)
    return path


def folder_card(
    folder: str | Path,
    *,
    model_ref: str | None = None,
    target: str | None = None,
    acceptance: AcceptanceTable | None = None,
    serving: str | None = None,
) -> str:
    """The card `write_model_card` writes for `folder` (its config.json, the weights' dtype from the
    headers), as text: what `push` sends for a draft folder that has no README.md."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    dtype = None
    if not _config_dtype(config, read_config(config, _CARD_READING).vcfg):
        try:
            dtype = weights_dtype(open_checkpoint(folder).tensors.values())  # headers only
        except CheckpointNotFoundError:  # a card for a config-only folder
            dtype = None
    return model_card(
        config, model_ref=model_ref or str(folder), target=target, acceptance=acceptance, dtype=dtype, serving=serving
    )
