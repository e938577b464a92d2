"""Content hashes and stage records: what lets an interrupted `report` resume.

A stage's key is the SHA-256 of its name, its options and the content hashes of its input files
(a draft: its config and weights; the target: every file). Its record (`OUT/.report/stages/
NAME.json`) holds that key, its result and the content hashes of what it wrote. A stage is
skipped when its record's key equals the key it would run with *and* its outputs still hash to
what was recorded, so an edited or deleted output, a changed input or a changed option reruns it
(and, through their content hashes, whatever reads its outputs) and nothing else.

File hashes are remembered by (path, size, mtime_ns, inode) in `OUT/.report/hashes.json`, so a
resumed report does not re-read a large target that did not change.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft import CARD_FILE
from eagle_convert.io import write_text_atomic
from eagle_convert.jsonable import Jsonable
from eagle_convert.jsonable import key as jsonkey

STATE_DIR = ".report"
CHUNK = 8 << 20
# Files a draft folder holds that are not part of the draft vLLM loads: the model card is rewritten
# with measured numbers after the draft is measured, and must not make the draft look changed.
NOT_CONTENT = (CARD_FILE,)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON by rename, so an interruption leaves the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


class HashMemo:
    """SHA-256 of file contents, remembered by (size, mtime_ns, inode) across runs."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[str, list] = {}
        self.bytes_hashed = 0
        if path is not None and path.is_file():
            try:
                self.entries = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                self.entries = {}

    def file(self, path: Path) -> str:
        st = path.stat()
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
        key = str(path.resolve())
        hit = self.entries.get(key)
        if hit and hit[:3] == stamp:
            return hit[3]
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        self.bytes_hashed += st.st_size
        self.entries[key] = [*stamp, h.hexdigest()]
        return h.hexdigest()

    def save(self) -> None:
        if self.path is not None:
            write_json_atomic(self.path, self.entries)


def folder_digest(folder: Path, memo: HashMemo, *, skip: tuple[str, ...] = NOT_CONTENT) -> str:
    """One hash over every file's relative name and content (hidden files and `skip` excluded);
    a single file hashes as itself. Missing: "missing"."""
    folder = Path(folder)
    if folder.is_file():
        return memo.file(folder)
    if not folder.is_dir():
        return "missing"
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or any(part.startswith(".") for part in rel.parts) or rel.as_posix() in skip:
            continue
        h.update(rel.as_posix().encode() + b"\0" + memo.file(p).encode() + b"\n")
    return h.hexdigest()


def stage_key(name: str, options: dict[str, Any], inputs: dict[str, str]) -> str:
    """The key a stage runs with: its name, options and input content hashes (canonical JSON)."""
    blob = json.dumps({"stage": name, "options": options, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class StageRecord(Jsonable):
    name: str
    key: str
    result: dict[str, Any]
    outputs: dict[str, str] = field(default_factory=dict)  # path (relative to OUT) -> content hash
    seconds: float = field(default=0.0, metadata=jsonkey(ndigits=3))
    command: str | None = None  # the eagle-convert command that reproduces the stage


class StageStore:
    """The records of one report folder (`OUT/.report/stages/`)."""

    def __init__(self, out: Path, memo: HashMemo) -> None:
        self.out = Path(out)
        self.dir = self.out / STATE_DIR / "stages"
        self.memo = memo

    def _path(self, name: str) -> Path:
        return self.dir / (name.replace(":", "--").replace("/", "_") + ".json")

    def lookup(self, name: str, key: str) -> StageRecord | None:
        """The record when its key matches and its outputs are unchanged, else None."""
        path = self._path(name)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            rec = StageRecord.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if rec.key != key:
            return None
        for rel, digest in rec.outputs.items():
            if folder_digest(self.out / rel, self.memo) != digest:
                return None
        return rec

    def save(self, rec: StageRecord) -> None:
        rec.outputs = {rel: folder_digest(self.out / rel, self.memo) for rel in rec.outputs}
        write_json_atomic(self._path(rec.name), rec.to_dict())
