"""What one output safetensors file holds, and the exact header bytes written for it.

An :class:`OutFile` lists :class:`OutTensor` entries in data order; each says where its bytes
come from: a :class:`ByteRange` of an existing file (copied, never decoded), ``bytes`` (small
new tensors: ``d2t``, a renamed norm, ...) or a re-iterable :class:`StreamSource` (large
generated tensors, synthetic benchmarks).

The on-disk format follows the safetensors README and the reference crate: an 8-byte
little-endian header length, a JSON header (``__metadata__`` first, then one entry per tensor
with ``dtype``, ``shape`` and ``data_offsets`` relative to the data section) padded with
spaces to a multiple of 8 bytes, then the tensor data back to back in the order given.
:func:`file_header` computes that header without opening any file, so planners can predict
offsets; :mod:`eagle_convert.io.writer` writes it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from types import MappingProxyType
from typing import Any

from eagle_convert.errors import EagleConvertError

MiB = 1 << 20
#: Default unit of work (and of ``progress`` calls) for copying.
COPY_CHUNK_BYTES = 64 * MiB
#: Default size of each of the two reused buffers ``verify_file`` compares (and of the
#: read/write fallback's buffer). Small on purpose: both buffers then stay in L2 cache
#: between the read and the compare; on a 0.79 GiB draft 1 MiB verified ~3x faster than
#: 16 MiB (0.28 s vs 0.85 s) and 64 MiB was slower still.
VERIFY_CHUNK_BYTES = 1 * MiB
#: Alignment unit for ``write_file(align_data=True)``.
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: Unit of the data-start alignment ``write_file(align_data=True)`` pads the header to. Copied bytes
#: must sit at the same offset modulo 64 KiB in the output as in their source, not only modulo the
#: page: Linux 6.x copy_file_range moves 64 KiB (a 16-page pipe) per step and writes into large
#: page-cache folios; with only page congruence a 0.79 GiB copy took 0.40-0.44 s, with 64 KiB
#: congruence 0.36 s, as fast as `cp` copying the file from offset 0 (ext4, warm cache). Costs at
#: most 64 KiB of header spaces per file.
COPY_ALIGN_BYTES = max(PAGE_BYTES, 64 << 10)
#: The safetensors crate refuses headers above this size.
MAX_HEADER_BYTES = 100_000_000
SINGLE_FILENAME = "model.safetensors"
INDEX_FILENAME = "model.safetensors.index.json"
#: Per-shard metadata transformers expects on PyTorch checkpoints.
FORMAT_PT_METADATA: Mapping[str, str] = MappingProxyType({"format": "pt"})

#: Bits per element of every safetensors dtype (sub-byte float formats included).
DTYPE_BITS: Mapping[str, int] = MappingProxyType(
    {
        "BOOL": 8,
        "U8": 8,
        "I8": 8,
        "F8_E5M2": 8,
        "F8_E4M3": 8,
        "F8_E8M0": 8,
        "I16": 16,
        "U16": 16,
        "F16": 16,
        "BF16": 16,
        "I32": 32,
        "U32": 32,
        "F32": 32,
        "C64": 64,
        "F64": 64,
        "I64": 64,
        "U64": 64,
        "F4": 4,
        "F6_E2M3": 6,
        "F6_E3M2": 6,
    }
)


class WriterError(EagleConvertError, ValueError):
    """Invalid writer input (tensor spec, byte range, shard plan) or an inconsistent source."""


def log_rare(logger: str, level: int, msg: str, *args: object) -> None:
    """A log record from a path taken rarely (a copy method's fallback, a leftover left alone): `logging`
    is imported only then, not on every output's start-up (~9 ms of a 0.3 s CPU start, loaded host)."""
    import logging

    logging.getLogger(logger).log(level, msg, *args)


@dataclass(frozen=True)
class ByteRange:
    """``nbytes`` bytes at absolute ``offset`` of the file at ``path`` (in an upgrade plan, the
    file's name inside the input checkpoint; the writer only ever sees local paths)."""

    path: Path
    offset: int
    nbytes: int

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):  # a Path is kept: building one per tensor was ~5% of a 200k-tensor plan
            object.__setattr__(self, "path", Path(self.path))
        for field_name in ("offset", "nbytes"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise WriterError(f"ByteRange {field_name} must be a non-negative int, got {value!r} ({self.path})")


@dataclass(frozen=True)
class StreamSource:
    """Tensor bytes produced by ``chunks()``, a callable returning a fresh iterable of bytes.

    It must yield exactly ``nbytes`` bytes, the same ones on every call: ``verify_file``
    calls it again to compare.
    """

    nbytes: int
    chunks: Callable[[], Iterable[bytes]]

    def __post_init__(self) -> None:
        if not isinstance(self.nbytes, int) or isinstance(self.nbytes, bool) or self.nbytes < 0:
            raise WriterError(f"StreamSource nbytes must be a non-negative int, got {self.nbytes!r}")


Source = ByteRange | bytes | StreamSource


def source_nbytes(source: Source) -> int:
    """Number of bytes a tensor source provides."""
    if isinstance(source, (ByteRange, StreamSource)):
        return source.nbytes
    return len(source)


def tensor_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes a tensor of ``dtype`` and ``shape`` occupies in a safetensors file."""
    try:
        bits = DTYPE_BITS[dtype]
    except KeyError:
        raise WriterError(f"unknown safetensors dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BITS))})") from None
    total_bits = prod(shape) * bits
    if total_bits % 8:
        raise WriterError(f"{dtype} tensor of shape {list(shape)} does not fill whole bytes")
    return total_bits // 8


@dataclass(frozen=True)
class OutTensor:
    """One tensor of an output file: its header entry and where its bytes come from.

    The one output-tensor record: the writer, `verify_file` and upgrade's plan (whose carried
    tensors' `ByteRange.path` names a file inside the input checkpoint until `apply` resolves
    it) all use it. Input tensors are `TensorInfo`s: see there why the two stay apart.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    source: Source
    # The source's size, checked once: every pass over a plan reads it per tensor (6 per tensor in an upgrade).
    _nbytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name == "__metadata__":
            raise WriterError(f"invalid tensor name {self.name!r}")
        try:
            shape = tuple(self.shape)
        except TypeError:
            raise WriterError(f"{self.name}: shape must be a sequence of ints") from None
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise WriterError(f"{self.name}: shape must hold non-negative ints, got {shape!r}")
        object.__setattr__(self, "shape", shape)
        if isinstance(self.source, (bytearray, memoryview)):
            object.__setattr__(self, "source", bytes(self.source))
        elif not isinstance(self.source, (ByteRange, bytes, StreamSource)):
            raise WriterError(
                f"{self.name}: source must be ByteRange, bytes or StreamSource, got {type(self.source).__name__}"
            )
        expected = tensor_nbytes(self.dtype, shape)
        got = source_nbytes(self.source)
        if got != expected:
            raise WriterError(f"{self.name}: {self.dtype}{list(shape)} needs {expected} bytes, source provides {got}")
        object.__setattr__(self, "_nbytes", got)

    @property
    def nbytes(self) -> int:
        return self._nbytes


@dataclass(frozen=True)
class OutFile:
    """One output safetensors file: tensors in data order, optional ``__metadata__``."""

    filename: str
    tensors: list[OutTensor]
    metadata: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.filename or Path(self.filename).name != self.filename:
            raise WriterError(f"output filename must be a bare file name, got {self.filename!r}")
        check_unique(self.tensors, where=self.filename)
        if self.metadata is not None:
            bad = [k for k, v in self.metadata.items() if not (isinstance(k, str) and isinstance(v, str))]
            if bad:
                raise WriterError(f"{self.filename}: metadata keys and values must be str: {bad}")

    @property
    def data_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def check_unique(tensors: Iterable[OutTensor], *, where: str) -> None:
    seen: set[str] = set()
    dups: list[str] = []
    for t in tensors:
        if t.name in seen:
            dups.append(t.name)
        seen.add(t.name)
    if dups:
        raise WriterError(f"{where}: duplicate tensor names: {', '.join(sorted(set(dups)))}")


# --------------------------------------------------------------------------- header


def header_layout(f: OutFile) -> dict[str, Any]:
    """The header dict of ``f``: ``__metadata__`` first, then tensors in data order."""
    header: dict[str, Any] = {}
    if f.metadata is not None:
        header["__metadata__"] = dict(f.metadata)
    offset = 0
    for t in f.tensors:
        end = offset + t.nbytes
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, end]}
        offset = end
    return header


def encode_header(f: OutFile, *, data_start_residue: int | None = None) -> bytes:
    """8-byte LE length + compact JSON, space-padded so the data section starts 8-aligned.

    Without ``data_start_residue`` the padding is the crate's (to a multiple of 8), so the
    same tensors in the same order give a byte-identical file. With it (a multiple of 8), the
    padding is extended (spaces, which the format allows) until the data section starts at
    an offset congruent to ``data_start_residue`` modulo ``COPY_ALIGN_BYTES``.
    """
    body = json.dumps(header_layout(f), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    body += b" " * (-len(body) % 8)
    if data_start_residue is not None:
        if data_start_residue % 8:
            raise WriterError(f"data_start_residue must be a multiple of 8, got {data_start_residue}")
        body += b" " * ((data_start_residue - 8 - len(body)) % COPY_ALIGN_BYTES)
    if len(body) > MAX_HEADER_BYTES:
        raise WriterError(f"{f.filename}: header of {len(body)} bytes exceeds {MAX_HEADER_BYTES}")
    return len(body).to_bytes(8, "little") + body


def file_header(f: OutFile, *, align_data: bool = True) -> bytes:
    """The exact header bytes (length prefix included) ``write_file`` writes for ``f``.

    Pure (opens no file): planners use ``len(file_header(f))`` to predict offsets and sizes.
    """
    return encode_header(f, data_start_residue=_best_residue(f) if align_data else None)


def _best_residue(f: OutFile) -> int | None:
    """Data-start offset (mod ``COPY_ALIGN_BYTES``) that puts the most ByteRange bytes congruent.

    A tensor at data-relative offset ``rel`` copied from absolute source offset ``src`` is
    congruent when the data section starts at ``src - rel`` (mod the unit). Only 8-aligned starts
    are candidates, so every tensor stays 8-byte aligned as the crate guarantees.
    """
    weight: dict[int, int] = {}
    rel = 0
    for t in f.tensors:
        if isinstance(t.source, ByteRange) and t.nbytes:
            residue = (t.source.offset - rel) % COPY_ALIGN_BYTES
            if residue % 8 == 0:
                weight[residue] = weight.get(residue, 0) + t.nbytes
        rel += t.nbytes
    if not weight:
        return None
    return max(weight, key=lambda r: (weight[r], -r))
