"""The output files of an upgrade: which tensors go in which file, each file's exact size, the index.

Sharded in, the same shards out (the new `fc_norm.{i}.weight` join fc's shard); a single file or
`.bin` in, one model.safetensors out. Sizes are exact (the real header is built), so `--dry-run`
and `apply` agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.draft.layout import canonical_name
from eagle_convert.io.outfile import SINGLE_FILENAME, ByteRange, OutFile, OutTensor, file_header
from eagle_convert.io.safetensors_header import DTYPE_BYTES, TensorInfo
from eagle_convert.io.writer import index_text

__all__ = ["FC_NORM", "PlannedFile", "index_json", "norm_name", "plan_files"]

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
    for filename, infos, src_file in groups:
        tensors: list[OutTensor] = []
        for t in infos:
            tensors.append(OutTensor(rename(t.name), t.dtype, t.shape, ByteRange(Path(t.file), t.offset, t.nbytes)))
            if t.name == fc_name:
                tensors.extend(additions)
        # Widest dtypes first keeps every tensor aligned to its element size (stable: input order otherwise).
        tensors.sort(key=lambda t: -DTYPE_BYTES[t.dtype])
        meta = dict(ckpt.file_metadata.get(src_file) or {})
        meta.setdefault("format", "pt")
        f = PlannedFile(filename, tensors, meta, 0)
        # The writer may align the data start to the carried tensors' source offsets: exact size.
        f.header_bytes = len(file_header(OutFile(filename, tensors, meta)))
        out.append(f)
    return out
