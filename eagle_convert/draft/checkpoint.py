"""Open a draft checkpoint (folder, single file, sharded, .bin, hub repo) into one value object.

`Checkpoint` holds the config and a `TensorInfo` per on-disk tensor name, resolved from headers
only (safetensors headers, or the `.bin` zip's pickle read without torch). Every reader (inspect,
validate, upgrade, diff, and the reference drafter behind smoke and finetune) goes through it, so
file-layout resolution lives in exactly one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.errors import (
    CheckpointNotFoundError,
    CheckpointReadError,
    ConfigError,
    HubOfflineError,
)
from eagle_convert.io import (
    INDEX_FILENAME,
    MAX_INDEX_BYTES,
    SINGLE_FILENAME,
    JsonLimits,
    LocalSource,
    Source,
    TensorInfo,
    brief,
    looks_like_path,
    read_header,
    read_json,
    tensor_bytes,
    where,
)

CONFIG_FNAME = "config.json"
BIN_FNAME = "pytorch_model.bin"
#: The shard index: Python's json.load rules (transformers' and vLLM's reader), capped.
INDEX_LIMITS = JsonLimits(max_bytes=MAX_INDEX_BYTES, what="shard index")
# NeMo Automodel may put the consolidated weights one or two folders down.
WEIGHT_SUBDIRS = ("", "model", "model/consolidated")


@dataclass(frozen=True)
class CheckpointRef:
    """What the user typed, resolved to a local path or a hub repo (+ revision)."""

    text: str
    local: Path | None = None
    repo: str | None = None
    revision: str | None = None

    @classmethod
    def parse(cls, text: str | os.PathLike[str]) -> CheckpointRef:
        """An existing path, or text that can only be a path (`io.localpath.looks_like_path`), is
        local; `hf://...` and other valid repo ids (huggingface_hub's `validate_repo_id`) are hub
        repos; anything else is a local path that `open_checkpoint` reports as missing."""
        text = os.fspath(text)
        path = Path(text).expanduser()
        if not text.startswith("hf://") and (path.exists() or looks_like_path(text)):
            return cls(text, local=path)
        from eagle_convert.io import parse_hub_ref  # lazy: huggingface_hub costs import time

        parsed = parse_hub_ref(text)
        if parsed is None:
            return cls(text, local=path)
        return cls(text, repo=parsed[0], revision=parsed[1])

    @property
    def is_hub(self) -> bool:
        return self.repo is not None


@dataclass
class Checkpoint:
    """A draft checkpoint: config plus header-level facts about every tensor."""

    source: Source
    config: dict[str, Any]
    tensors: dict[str, TensorInfo]
    storage: str  # "single" | "sharded" | "bin"
    weight_files: list[str]
    prefix: str = ""  # sub-folder holding the weights ("" or e.g. "model/consolidated")
    file_metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    has_config: bool = True
    config_name: str = CONFIG_FNAME

    @property
    def description(self) -> str:
        return self.source.description

    @property
    def config_where(self) -> str:
        """How to name the config file in messages."""
        return where(self.source, self.config_name)

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    def read_tensor_bytes(self, name: str) -> bytes:
        """Raw little-endian bytes of one tensor (safetensors and .bin alike: one byte range)."""
        return tensor_bytes(self.source, self.tensors[name])


def open_checkpoint(ref: str | Path | CheckpointRef, *, require_config: bool = False) -> Checkpoint:
    """Resolve a path or hub reference and read config + tensor headers (no tensor data).

    Args:
        ref: a folder, a `.safetensors`/`.bin` file, or a hub repo (`org/name[@revision]`, `hf://...`).
        require_config: refuse a checkpoint without `config.json` instead of reading an empty config.

    Returns:
        The checkpoint: its config and every tensor's name, dtype, shape and byte range.

    Raises:
        CheckpointNotFoundError: no such file or folder (with a did-you-mean when one is close).
        CheckpointReadError: weights that cannot be read (a bad header, a tensor stored twice).
        ConfigError: no `config.json` although `require_config`.
        HubError: the hub refused or could not be reached (`HubNotFoundError`, `HubOfflineError`, ...).
    """
    if not isinstance(ref, CheckpointRef):
        ref = CheckpointRef.parse(str(ref))
    if not ref.is_hub:
        return load_from_source(LocalSource(ref.local), require_config=require_config)  # type: ignore[arg-type]
    from eagle_convert.io import HubSource

    try:
        return load_from_source(HubSource(ref.repo, ref.revision), require_config=require_config)  # type: ignore[arg-type]
    except HubOfflineError as exc:  # the cache has no such repo: and `a/b` is no folder either, say so
        if not ref.text.startswith("hf://"):
            exc.message = f"{exc.message}; there is no local folder {ref.text} either"
        raise


def load_from_source(source: Source, *, require_config: bool = False) -> Checkpoint:
    files = source.list_files()
    fileset = set(files)
    prefix, storage, weight_files, weight_map = _resolve_weights(source, fileset)
    cfg_name = _join(prefix, CONFIG_FNAME) if _join(prefix, CONFIG_FNAME) in fileset else CONFIG_FNAME
    has_config = cfg_name in fileset
    if not has_config and require_config:
        raise ConfigError(
            f"{source.description}: no config.json", hint="copy the draft's config.json next to the weights"
        )
    config = read_json(source, cfg_name) if has_config else {}
    tensors: dict[str, TensorInfo] = {}
    metadata: dict[str, dict[str, str]] = {}
    if storage == "bin":
        for fname in weight_files:
            from eagle_convert.io import read_bin_tensors  # pickle, zipfile: only for .bin

            tensors |= read_bin_tensors(source, fname)
    else:
        for fname in weight_files:
            header = read_header(source, fname)
            metadata[fname] = header.metadata
            for name, info in header.tensors.items():
                if name in tensors:
                    raise CheckpointReadError(
                        f"{source.description}: tensor {name!r} appears in both {tensors[name].file} and {fname}"
                    )
                tensors[name] = info
        if weight_map is not None:
            _check_index(source, prefix, tensors, weight_map)
    return Checkpoint(source, config, tensors, storage, weight_files, prefix, metadata, has_config, cfg_name)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _resolve_weights(source: Source, fileset: set[str]) -> tuple[str, str, list[str], dict[str, Any] | None]:
    """(prefix, storage, weight files, the index's weight_map when an index lists the shards)."""
    single = getattr(source, "single_file", None)
    if single:
        if single.endswith(".safetensors"):
            return "", "single", [single], None
        if single.endswith((".bin", ".pt", ".pth")):
            return "", "bin", [single], None
        raise CheckpointReadError(f"{source.description}: not a .safetensors or .bin file")
    for prefix in WEIGHT_SUBDIRS:
        index = _join(prefix, INDEX_FILENAME)
        if index in fileset:
            weight_map = read_json(source, index, limits=INDEX_LIMITS).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise CheckpointReadError(
                    f"{source.description}/{index}: missing or empty 'weight_map'",
                    hint="regenerate the index or merge the shards",
                )
            bad = next((k for k, v in weight_map.items() if not isinstance(v, str) or not v), None)
            if bad is not None:
                raise CheckpointReadError(
                    f"{source.description}/{index}: weight_map[{brief(bad)}] is a {type(weight_map[bad]).__name__}, "
                    "not a file name",
                    hint="regenerate the index",
                )
            shards = sorted({_join(prefix, str(f)) for f in weight_map.values()})
            missing = [s for s in shards if s not in fileset]
            if missing:
                raise CheckpointNotFoundError(
                    f"{source.description}/{missing[0]}: listed in {INDEX_FILENAME} but missing",
                    hint="download every shard",
                )
            return prefix, "sharded", shards, weight_map
        level = sorted(f for f in fileset if f.endswith(".safetensors") and f.rpartition("/")[0] == prefix)
        if len(level) == 1:
            return prefix, "single", level, None
        if len(level) > 1:
            return prefix, "sharded", level, None
        bins = sorted(f for f in fileset if f == _join(prefix, BIN_FNAME))
        if bins:
            return prefix, "bin", bins, None
    raise CheckpointNotFoundError(
        f"{source.description}: no weights found",
        hint=f"expected {SINGLE_FILENAME}, {INDEX_FILENAME} with shards, or {BIN_FNAME}",
    )


def _check_index(source: Source, prefix: str, tensors: dict[str, TensorInfo], weight_map: dict[str, Any]) -> None:
    """Every tensor the index maps lies in the file it names, and every tensor is mapped."""
    index = _join(prefix, INDEX_FILENAME)
    for name, fname in weight_map.items():
        info = tensors.get(name)
        if info is None or info.file != _join(prefix, fname):
            raise CheckpointReadError(
                f"{source.description}/{index}: tensor {name!r} is mapped to {fname} but is not in that file",
                hint="regenerate the index",
            )
    extra = sorted(set(tensors) - set(weight_map))
    if extra:
        raise CheckpointReadError(
            f"{source.description}/{index}: tensor {extra[0]!r} is in a shard but missing from weight_map",
            hint="regenerate the index",
        )
