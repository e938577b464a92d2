"""The capture cache on disk: safetensors shards and a manifest, written one shard at a time.

    CACHE/manifest.json           what was asked (the plan) and every finished shard with its sha256
    CACHE/sequences.json          (`capture` only) the rendered prompts' continuations it generated, with
                                  the key of what made them: a resumed capture reuses them
    CACHE/shard-00000.safetensors ``{key}.ids`` [T] int64, ``{key}.aux`` [T, A*H] (the engine's dtype),
                                  ``{key}.logits`` [T, Vd] fp32 on the draft vocabulary,
                                  ``{key}.argmax`` [T] int64 (the target's argmax over its whole vocab)

A shard is written to a ``.tmp`` name, fsynced and renamed, then the manifest (rewritten atomically)
lists it, so a kill leaves only whole shards listed. A re-run with the same plan keeps every listed
shard whose bytes still hash to the manifest's sha256 and captures the rest; a different plan
(other target, draft, aux ids, sequences or shard size) is refused unless forced, so a cache never
mixes two captures. The shard boundaries follow from the plan alone, so a resumed cache equals an
uninterrupted one shard for shard.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.io import write_text_atomic

CACHE_FORMAT = "eagle-convert-capture/1"
MANIFEST = "manifest.json"
SEQUENCES = "sequences.json"  # `capture`'s generated data, kept so a resumed capture does not regenerate it


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 8 MiB blocks (bounded memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 23):
            h.update(block)
    return h.hexdigest()


def sequences_sha256(sequences: list[list[int]]) -> str:
    """One hash over every sequence's token ids, in order: the plan's identity."""
    h = hashlib.sha256()
    for s in sequences:
        h.update(json.dumps(s).encode())
        h.update(b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class CachePlan:
    """What a capture is asked for; equal plans make equal caches."""

    target: str
    draft: str
    engine: str  # "vllm" or "reference"
    dtype: str
    aux_ids: list[int]
    rows_sha256: str  # the draft vocabulary (target id of every draft id)
    sequences_sha256: str
    num_sequences: int
    shard_size: int  # sequences per shard

    def shards(self) -> Iterator[tuple[int, range]]:
        """(shard index, the sequence indices it holds)."""
        for n, start in enumerate(range(0, self.num_sequences, self.shard_size)):
            yield n, range(start, min(start + self.shard_size, self.num_sequences))


@dataclass
class ShardEntry:
    file: str
    sequences: list[int]
    tokens: int
    bytes: int
    sha256: str
    seconds: float


@dataclass
class Manifest:
    plan: CachePlan
    shards: dict[int, ShardEntry] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)  # per sequence index: where it came from
    engine_info: dict[str, Any] = field(default_factory=dict)  # vLLM version, dtype the states came in

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "format": CACHE_FORMAT,
                    "plan": asdict(self.plan),
                    "engine_info": self.engine_info,
                    "provenance": self.provenance,
                    "shards": {str(k): asdict(v) for k, v in sorted(self.shards.items())},
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )

    def save(self, folder: Path) -> None:
        write_text_atomic(folder / MANIFEST, self.to_json())

    def complete(self) -> bool:
        return len(self.shards) == len(list(self.plan.shards()))

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards.values())

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards.values())


def shard_name(n: int) -> str:
    return f"shard-{n:05d}.safetensors"


def read_manifest(folder: Path) -> Manifest:
    """The manifest of an existing cache.

    Raises:
        UsageError: no manifest, or not one of this format.
    """
    path = folder / MANIFEST
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(
            f"{folder}: not a capture cache (no {MANIFEST}); create it with eagle-convert capture"
        ) from None
    except ValueError as exc:
        raise UsageError(
            f"{path}: not valid JSON ({exc}); capture again with {{force}}", options=("force",), file=path
        ) from None
    if not isinstance(d, dict) or d.get("format") != CACHE_FORMAT:
        raise UsageError(
            f"{path}: format is not {CACHE_FORMAT}; capture again with {{force}}", options=("force",), file=path
        )
    shards = {int(k): ShardEntry(**v) for k, v in d.get("shards", {}).items()}
    return Manifest(CachePlan(**d["plan"]), shards, d.get("provenance", {}), d.get("engine_info", {}))


def open_manifest(folder: Path, plan: CachePlan, *, force: bool = False) -> tuple[Manifest, list[int]]:
    """The manifest to continue (its verified shards kept) and the shard indices still to capture.

    A listed shard that is missing or whose sha256 differs is dropped and captured again.

    Raises:
        UsageError: the folder holds a cache of another plan (and not ``force``), or something else.
    """
    folder.mkdir(parents=True, exist_ok=True)
    man = Manifest(plan)
    if (folder / MANIFEST).exists():
        old = read_manifest(folder) if not force else None
        if old is not None and old.plan != plan:
            diff = sorted(k for k, v in asdict(plan).items() if asdict(old.plan)[k] != v)
            raise UsageError(
                f"{folder}: holds a capture of another plan ({', '.join(diff)} differ); "
                "use another {out}, or {force} to start over",
                options=("out", "force"),
                file=folder,
            )
        if old is not None:
            for n, entry in old.shards.items():
                f = folder / entry.file
                if f.is_file() and f.stat().st_size == entry.bytes and file_sha256(f) == entry.sha256:
                    man.shards[n] = entry
            man.provenance, man.engine_info = old.provenance, old.engine_info
    elif any(p.name not in (MANIFEST, SEQUENCES) for p in folder.iterdir() if not p.name.endswith(".tmp")):
        raise UsageError(
            f"{folder}: exists and is not a capture cache; use another {{out}}", options=("out",), file=folder
        )
    for tmp in folder.glob("*.tmp"):  # a killed run's half-written shard
        tmp.unlink()
    todo = [n for n, _ in plan.shards() if n not in man.shards]
    return man, todo
