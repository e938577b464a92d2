"""Parse safetensors headers from a `Source` with two small reads; tensor data is never touched.

Format: 8-byte little-endian header length N, N bytes of JSON mapping tensor name to
{dtype, shape, data_offsets: [begin, end]} relative to the end of the header, plus an optional
"__metadata__" string map.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.bounded import JsonLimits, brief, depth_problem, parse_json
from eagle_convert.io.outfile import DTYPE_BITS, MAX_HEADER_BYTES
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


#: The header as the safetensors crate parses it: serde_json (no NaN/Infinity, nesting below 128).
_FIX = "re-download or re-export the file"
HEADER_LIMITS = JsonLimits(
    max_bytes=MAX_HEADER_BYTES, what="safetensors header", allow_constants=False, max_depth=127, fix=_FIX, walk=False
)
_U64 = 1 << 64
_ENTRY_FIELDS = ("dtype", "shape", "data_offsets")


class _Obj(dict[str, Any]):
    """A JSON object that remembers its duplicated keys (serde refuses some, keeps the last of others)."""

    dups: frozenset[str] = frozenset()


def _pairs(pairs: list[tuple[str, Any]]) -> _Obj:
    obj = _Obj(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.dups = frozenset(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return obj


def _parse_int(text: str) -> int | float:
    """serde_json reads `-0` and integers beyond 64 bits as floats, which a usize field refuses."""
    if text == "-0" or len(text) > 20:
        return -0.0
    return int(text)


def _dtype(value: Any) -> Any:
    """A dtype as serde reads an enum: the variant's name, or a one-key map {name: null}."""
    if isinstance(value, dict) and len(value) == 1:
        ((name, unit),) = value.items()
        return name if unit is None else None
    return value


def _entry(where: str, tname: str, entry: Any) -> tuple[int, int, str, tuple[int, ...], str]:
    """(begin, end, dtype, shape, name) of one header entry, typed exactly as the crate's `TensorInfo`."""
    if isinstance(entry, list) and len(entry) == 3:  # serde also reads a struct from a sequence
        entry = _Obj(zip(_ENTRY_FIELDS, entry, strict=True))
    if type(entry) is not _Obj:
        raise _bad_entry(where, tname, "has a malformed header entry (not an object)")
    dup = sorted(set(_ENTRY_FIELDS) & entry.dups)
    missing = [f for f in _ENTRY_FIELDS if f not in entry]
    if dup or missing:
        what = f"duplicate field {dup[0]!r}" if dup else f"no {missing[0]!r}"
        raise _bad_entry(where, tname, f"has a malformed header entry ({what})")
    if len(entry) > 3:
        for key, value in entry.items():  # fields serde ignores, but still parses (depth < 128)
            if key not in _ENTRY_FIELDS and (problem := depth_problem(value, HEADER_LIMITS.max_depth, 3)):
                raise CheckpointReadError(f"{where}: corrupt safetensors header: {problem}", hint=_FIX)
    dtype, shape, offsets = _dtype(entry["dtype"]), entry["shape"], entry["data_offsets"]
    if type(dtype) is not str or dtype not in DTYPE_BITS:
        raise _bad_entry(where, tname, f"has unknown dtype {brief(entry['dtype'])}")
    if type(shape) is not list or not all(type(d) is int and 0 <= d < _U64 for d in shape):
        raise _bad_entry(where, tname, "has a malformed shape (not a list of non-negative integers)")
    if type(offsets) is not list or len(offsets) != 2 or not all(type(x) is int and 0 <= x < _U64 for x in offsets):
        raise _bad_entry(where, tname, "has malformed data_offsets (not two non-negative integers)")
    return offsets[0], offsets[1], dtype, tuple(shape), tname


def _bad_entry(where: str, tname: str, what: str) -> CheckpointReadError:
    return CheckpointReadError(f"{where}: tensor {brief(tname)} {what}", hint=_FIX)


def read_header(source: Source, name: str) -> SafetensorsHeader:
    """Read one file's header and accept exactly what the safetensors crate (and so vLLM) accepts.

    The crate's rules (safetensors 0.8 `SafeTensors::read_metadata` and `Metadata::validate`,
    checked against the installed library in tests/test_safetensors_rules.py): a header of at most
    100 MB of UTF-8 JSON; `__metadata__` null or a string-to-string map, given once; each entry's
    dtype, shape and data_offsets present once, integers only; sorted by offsets, the tensors tile
    the data exactly (no gap, overlap or trailing byte); sizes match dtype x shape, sub-byte
    dtypes end on a byte. Duplicate tensor names keep the last entry, as serde's map does.

    Raises:
        CheckpointReadError: naming the file, the tensor and the broken rule.
    """
    where = _where(source, name)
    size = source.file_size(name)
    if size < 8:
        raise CheckpointReadError(f"{where}: truncated ({size} bytes), not a safetensors file", hint=_FIX)
    (n,) = struct.unpack("<Q", source.read_range(name, 0, 8))
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise CheckpointReadError(
            f"{where}: invalid safetensors header length {n} for a {size}-byte file",
            hint="the file is truncated or not safetensors; re-download or re-export it",
        )
    header = parse_json(
        source.read_range(name, 8, n),
        f"{where}: corrupt safetensors header",
        HEADER_LIMITS,
        object_pairs_hook=_pairs,
        parse_int=_parse_int,
    )
    if not isinstance(header, dict):
        raise CheckpointReadError(f"{where}: corrupt safetensors header (not a JSON object)", hint=_FIX)
    if "__metadata__" in getattr(header, "dups", ()):
        raise CheckpointReadError(f"{where}: corrupt safetensors header (__metadata__ given twice)", hint=_FIX)
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointReadError(
            f"{where}: __metadata__ must map strings to strings, got {_kind(metadata)}",
            hint="re-export the file; the safetensors library refuses it",
        )
    base = 8 + n
    entries = sorted((_entry(where, tname, entry) for tname, entry in header.items()), key=lambda e: (e[0], e[1]))
    tensors: dict[str, TensorInfo] = {}
    end_of_data = 0
    for begin, end, dtype, shape, tname in entries:
        if begin != end_of_data or end < begin:
            what = "overlaps the tensor before it" if begin < end_of_data else "leaves a gap before it"
            raise _bad_entry(
                where,
                tname,
                f"offsets {begin}..{end} {what if end >= begin else 'end before they begin'}; "
                "the safetensors library refuses it",
            )
        end_of_data = end
        numel = math.prod(shape)
        bits = DTYPE_BITS[dtype] * numel
        if numel >= _U64 or bits >= _U64:
            raise _bad_entry(where, tname, f"shape {list(shape)} overflows 64 bits")
        if bits % 8 or end - begin != bits // 8:
            raise _bad_entry(where, tname, f"offsets {begin}..{end} do not match {dtype}{list(shape)}")
        if base + end > size:
            raise CheckpointReadError(
                f"{where}: truncated: tensor {brief(tname)} ends at byte {base + end}, file has {size}", hint=_FIX
            )
        tensors[tname] = TensorInfo(tname, dtype, shape, name, base + begin, end - begin)
    if base + end_of_data != size:
        raise CheckpointReadError(
            f"{where}: {size - base - end_of_data} bytes after the last tensor's data",
            hint=f"{_FIX}; the safetensors library refuses files its tensors do not cover exactly",
        )
    return SafetensorsHeader(name, tensors, dict(metadata), base)


def _kind(value: Any) -> str:
    """How a JSON value's type reads in a message."""
    if isinstance(value, dict):
        return "a map with a non-string value"
    return {list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}.get(
        type(value), "null"
    )
