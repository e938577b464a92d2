"""The output files of an upgrade: which tensors go in which file, each file's exact size, the index.

Sharded in, the same shards out (the new `fc_norm.{i}.weight` join fc's shard); a single file or
`.bin` in, one model.safetensors out. Sizes are exact (the real header is built), so `--dry-run`
and `apply` agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.draft import Checkpoint, canonical_name
from eagle_convert.errors import CheckpointReadError
from eagle_convert.io import (
    DTYPE_BITS,
    SINGLE_FILENAME,
    ByteRange,
    OutFile,
    OutTensor,
    Source,
    TensorInfo,
    file_header,
    index_text,
)

FC_NORM = "fc_norm.{i}.weight"


@dataclass
class PlannedFile:
    """One output file. Its tensors are the writer's own `OutTensor`s: a carried tensor's source is
    a `ByteRange` whose `path` is the file's name inside the input checkpoint (`apply` resolves it
    to a local path, downloading hub files only then); a new one's source is its bytes."""

    filename: str
    tensors: list[OutTensor]
    metadata: dict[str, str] | None
    header_bytes: int

    @property
    def data_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def total_bytes(self) -> int:
        return self.header_bytes + self.data_bytes


def index_json(files: list[PlannedFile]) -> str:
    """The model.safetensors.index.json text `writer.write_index` produces for these files."""
    return index_text({t.name: f.filename for f in files for t in f.tensors}, sum(f.data_bytes for f in files))


def norm_name(i: int, fc_name: str, layout: str) -> str:
    """New fc_norm name: canonical, or (keep) spelled like the input's fc (NeMo: `model.fc_norm.i.weight`)."""
    canon = FC_NORM.format(i=i)
    if layout != "keep" or not fc_name.endswith("fc.weight"):
        return canon
    name = fc_name[: -len("fc.weight")] + canon
    return name if canonical_name(name) == canon else canon


def plan_files(
    ckpt: Checkpoint, rename: Callable[[str], str], fc_name: str, additions: list[OutTensor]
) -> list[PlannedFile]:
    """Sharded in, the same shards out (norms join fc's shard); single or .bin in, one model.safetensors out."""
    by_file: dict[str, list[TensorInfo]] = {f: [] for f in ckpt.weight_files}
    for t in ckpt.tensors.values():
        by_file[t.file].append(t)
    if ckpt.storage == "sharded":
        names = [f.rpartition("/")[2] for f in ckpt.weight_files]
        if len(set(names)) != len(names):
            names = [f"model-{i + 1:05d}-of-{len(names):05d}.safetensors" for i in range(len(names))]
        groups = [(name, sorted(by_file[f], key=lambda t: t.offset), f) for f, name in zip(ckpt.weight_files, names)]
    else:
        infos = list(ckpt.tensors.values())  # .bin: pickle order; safetensors: data order
        groups = [(SINGLE_FILENAME, infos, ckpt.weight_files[0])]
    out: list[PlannedFile] = []
    paths = {f: Path(f) for f in ckpt.weight_files}  # one Path per file, not per tensor
    for filename, infos, src_file in groups:
        tensors: list[OutTensor] = []
        for t in infos:
            tensors.append(OutTensor(rename(t.name), t.dtype, t.shape, ByteRange(paths[t.file], t.offset, t.nbytes)))
        if any(t.name == fc_name for t in infos):
            # After the carried tensors, not beside fc: the carried bytes then keep one shift against
            # their source, so all of them can sit congruent modulo 64 KiB (`io.file_header`). Beside
            # fc, fc's 100 MB of a 0.85 GB draft was copied incongruent, at the kernel's slower speed.
            tensors.extend(additions)
        # Widest dtypes first keeps every tensor aligned to its element size (stable: input order otherwise).
        tensors.sort(key=lambda t: -DTYPE_BITS[t.dtype])
        meta = dict(ckpt.file_metadata.get(src_file) or {})
        meta.setdefault("format", "pt")
        f = PlannedFile(filename, tensors, meta, 0)
        # The writer may align the data start to the carried tensors' source offsets: exact size.
        f.header_bytes = len(file_header(OutFile(filename, tensors, meta)))
        out.append(f)
    return out


NEW = "<new tensor>/"  # file-name prefix of the planned output's new tensors inside `PlannedSource`


@dataclass(frozen=True)
class PlannedSource:
    """The planned output as a `Source`: the input's files, plus one in-memory file per new tensor."""

    input: Source
    new: dict[str, bytes]

    @property
    def description(self) -> str:
        return f"{self.input.description} (upgraded, as planned)"

    def list_files(self) -> list[str]:
        return self.input.list_files()

    def file_size(self, name: str) -> int:
        return len(self.new[name]) if name in self.new else self.input.file_size(name)

    def read_range(self, name: str, start: int, length: int) -> bytes:
        if name not in self.new:
            return self.input.read_range(name, start, length)
        data = self.new[name][start : start + length]
        if len(data) != length:
            raise CheckpointReadError(f"{name}: {length} bytes at {start} past its end")
        return data

    def local_path(self, name: str) -> Path:
        if name in self.new:
            raise CheckpointReadError(f"{name}: a planned tensor has no file yet")
        return self.input.local_path(name)


def planned_output(ckpt: Checkpoint, files: list[PlannedFile], config: dict[str, Any], *, sharded: bool) -> Checkpoint:
    """The output an upgrade of `ckpt` into `files` with `config` would write, as validate reads a
    checkpoint (no bytes copied): the preflight's and the model card's matrix's input."""
    new: dict[str, bytes] = {}
    tensors: dict[str, TensorInfo] = {}
    posix: dict[Path, str] = {}  # one as_posix per weight file, not per tensor
    for f in files:
        for t in f.tensors:
            if isinstance(t.source, ByteRange):
                path = t.source.path
                file = posix.get(path) or posix.setdefault(path, path.as_posix())
                offset = t.source.offset
            else:
                file, offset = NEW + t.name, 0
                if isinstance(t.source, bytes):  # a StreamSource is never read by the static rules
                    new[file] = t.source
            tensors[t.name] = TensorInfo(t.name, t.dtype, tuple(t.shape), file, offset, t.nbytes)
    return Checkpoint(
        source=PlannedSource(ckpt.source, new),
        config=config,
        tensors=tensors,
        storage="sharded" if sharded else "single",
        # The input's weight files hold the carried bytes. Listing the input's other files keeps E409
        # (a vocab map beside the weights, which vLLM never reads and the upgrade does not carry) in view.
        weight_files=ckpt.weight_files,
        file_metadata={f.filename: dict(f.metadata or {}) for f in files},
    )
