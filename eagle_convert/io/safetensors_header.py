"""Parse safetensors headers from a `Source` with two small reads; tensor data is never touched.

Format: 8-byte little-endian header length N, N bytes of JSON mapping tensor name to
{dtype, shape, data_offsets: [begin, end]} relative to the end of the header, plus an optional
"__metadata__" string map.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.outfile import DTYPE_BITS, MAX_HEADER_BYTES, WriterError, tensor_nbytes
from eagle_convert.io.source import Source
from eagle_convert.io.source import where as _where

# One home for dtype widths and the header cap: the writer's (outfile.py) tables.
DTYPE_BYTES: dict[str, int] = {d: bits // 8 for d, bits in DTYPE_BITS.items() if bits % 8 == 0}


@dataclass(frozen=True)
class TensorInfo:
    """A tensor that exists in an input checkpoint: `nbytes` at absolute `offset` of `file` (its
    name inside the checkpoint's `Source`, local or hub), with dtype and shape.

    The one input-tensor record: safetensors headers and `.bin` archives (`io.binranges`) both
    yield it. Kept apart from `io.outfile.OutTensor` (a tensor to be written) for one essential
    difference: every input tensor has a location that readers (validate, diff, the deep scan,
    the reference drafter) rely on, while an output tensor's bytes may not exist anywhere yet
    (new `fc_norm` ones, streamed data); merging them would make every reader narrow its source.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    offset: int  # absolute offset of the first data byte in `file`
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class SafetensorsHeader:
    file: str
    tensors: dict[str, TensorInfo]  # in data order
    metadata: dict[str, str]
    header_bytes: int  # 8 + N


def read_header(source: Source, name: str) -> SafetensorsHeader:
    """Read and check one file's header: sizes, dtypes and offsets must be self-consistent."""
    where = _where(source, name)
    size = source.file_size(name)
    if size < 8:
        raise CheckpointReadError(
            f"{where}: truncated ({size} bytes), not a safetensors file", hint="re-download or re-export the file"
        )
    (n,) = struct.unpack("<Q", source.read_range(name, 0, 8))
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise CheckpointReadError(
            f"{where}: invalid safetensors header length {n} for a {size}-byte file",
            hint="the file is truncated or not safetensors; re-download or re-export it",
        )
    raw = source.read_range(name, 8, n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointReadError(
            f"{where}: corrupt safetensors header (not JSON)", hint="re-download or re-export the file"
        ) from exc
    if not isinstance(header, dict):
        raise CheckpointReadError(f"{where}: corrupt safetensors header (not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    base = 8 + n
    tensors: list[TensorInfo] = []
    for tname, entry in header.items():
        try:
            dtype = entry["dtype"]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointReadError(f"{where}: tensor {tname!r} has a malformed header entry") from exc
        if dtype not in DTYPE_BITS:
            raise CheckpointReadError(f"{where}: tensor {tname!r} has unknown dtype {dtype!r}")
        nbytes = end - begin
        try:
            expected = tensor_nbytes(dtype, shape)
        except WriterError:
            expected = -1
        if nbytes != expected or begin < 0:
            raise CheckpointReadError(
                f"{where}: tensor {tname!r} offsets {begin}..{end} do not match {dtype}{list(shape)}"
            )
        if base + end > size:
            raise CheckpointReadError(
                f"{where}: truncated: tensor {tname!r} ends at byte {base + end}, file has {size}",
                hint="re-download or re-export the file",
            )
        tensors.append(TensorInfo(tname, dtype, shape, name, base + begin, nbytes))
    tensors.sort(key=lambda t: t.offset)
    return SafetensorsHeader(name, {t.name: t for t in tensors}, dict(metadata), base)
