"""Tensor data by byte range: raw bytes, numpy arrays, or torch tensors, from any `Source`.

Every tensor a `Checkpoint` lists (safetensors or `.bin`, local or hub) is one `TensorInfo` byte
range, so one reader serves validate (numpy, a few small tensors: torch stays unloaded), diff and
the deep scan (bytes in chunks) and the torch reference drafter behind smoke and finetune.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from eagle_convert.io.safetensors_header import TensorInfo
from eagle_convert.io.source import Source

if TYPE_CHECKING:
    import numpy as np
    import torch


class TensorSet(Protocol):
    """A source and its tensors' byte ranges: what `read_array` needs of a `draft.checkpoint.Checkpoint`
    (a protocol, so that io never imports the draft layer above it)."""

    @property
    def source(self) -> Source: ...

    @property
    def tensors(self) -> Mapping[str, TensorInfo]: ...


_NUMPY_DTYPES = {
    "BOOL": "bool",
    "U8": "<u1",
    "I8": "<i1",
    "I16": "<i2",
    "U16": "<u2",
    "I32": "<i4",
    "U32": "<u4",
    "I64": "<i8",
    "U64": "<u8",
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
}
# safetensors dtype -> torch dtype attribute name (float8 and uint16+ need a recent torch); the
# `.bin` reader (io/binranges.py) reads torch's pickled dtype names back through the same table.
TORCH_DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


#: The most entries a vocabulary map (d2t, t2d) may have to be read: the largest published
#: vocabularies hold about 262k tokens; a header claiming more is not read, only reported.
MAX_VOCAB_ENTRIES = 1 << 22


def readable_vocab_map(info: TensorInfo, expected: object) -> bool:
    """Whether to read the 1-D vocabulary map `info`: no longer than `expected` (the config's
    draft_vocab_size for d2t, vocab_size for t2d) when that is a plausible integer, and never
    longer than MAX_VOCAB_ENTRIES, so a crafted header cannot make inspect read gigabytes."""
    if len(info.shape) != 1:
        return False
    bound = MAX_VOCAB_ENTRIES
    if type(expected) is int and 0 < expected < MAX_VOCAB_ENTRIES:
        bound = expected
    return info.shape[0] <= bound


def tensor_bytes(source: Source, info: TensorInfo, start: int = 0, length: int | None = None) -> bytes:
    """`length` bytes (default: to the tensor's end) starting `start` bytes into its data."""
    if length is None:
        length = info.nbytes - start
    if start < 0 or length < 0 or start + length > info.nbytes:
        raise ValueError(f"{info.name}: bytes {start}..{start + length} outside its {info.nbytes} bytes")
    return source.read_range(info.file, info.offset + start, length)


#: Dtypes `decode` turns into numbers (the sub-byte floats F4/F6 and C64 have no numpy type here).
DECODABLE = frozenset(_NUMPY_DTYPES) | {"BF16"}


def decode(raw: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Array for raw safetensors bytes; BF16 is widened to float32 (exactly representable)."""
    import numpy as np

    if dtype == "BF16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return halves.view(np.float32).reshape(shape)
    if dtype not in _NUMPY_DTYPES:
        raise ValueError(f"cannot decode dtype {dtype}")
    return np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).reshape(shape)


#: 1.0 little-endian in each float dtype (what `encode([1.0], dtype)` gives; its only bit pattern):
#: ones are written and recognised without numpy, which an upgrade otherwise never imports.
ONE = {"BF16": b"\x80\x3f", "F16": b"\x00\x3c", "F32": b"\x00\x00\x80\x3f", "F64": b"\x00" * 6 + b"\xf0\x3f"}


def encode(values: Any, dtype: str) -> bytes:
    """Little-endian bytes of float `values` in safetensors float `dtype`, rounded to nearest even
    as torch does (BF16: the top half of the float32, rounded; numpy has no bfloat16)."""
    import numpy as np

    x = np.asarray(values)
    if x.dtype != np.float32:  # float32 stays as is: widening would quiet signalling NaNs
        x = x.astype(np.float64)
    if dtype == "BF16":  # uint32 wraps only for NaN payloads: the same 16 bits as without wrapping
        u = np.ascontiguousarray(x, dtype="<f4").view("<u4")
        return ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    if dtype not in ("F16", "F32", "F64"):
        raise ValueError(f"cannot encode floats as {dtype}")
    return x.astype(_NUMPY_DTYPES[dtype]).tobytes()


def tensor_array(source: Source, info: TensorInfo) -> np.ndarray:
    """One tensor as a read-only numpy array (BF16 widened to float32)."""
    return decode(tensor_bytes(source, info), info.dtype, info.shape)


def read_array(ckpt: TensorSet, name: str) -> np.ndarray:
    """One tensor of a checkpoint as a numpy array (read its bytes only)."""
    return tensor_array(ckpt.source, ckpt.tensors[name])


#: safetensors dtype -> array type code of the same width ("q" and "i" are 8 and 4 bytes on every
#: platform CPython supports).
_INT_CODES = {"BOOL": "B", "U8": "B", "I8": "b", "I16": "h", "U16": "H", "I32": "i", "U32": "I", "I64": "q", "U64": "Q"}


def read_ints(ckpt: TensorSet, name: str) -> array[int]:
    """A 1-D integer or bool tensor's values without numpy: the vocabulary maps d2t/t2d are small,
    and importing numpy would cost `inspect` and `upgrade` more than reading them."""
    info = ckpt.tensors[name]
    values = array(_INT_CODES[info.dtype])
    values.frombytes(tensor_bytes(ckpt.source, info))
    if sys.byteorder == "big" and values.itemsize > 1:
        values.byteswap()  # safetensors is little-endian
    return values


def tensor_torch(source: Source, info: TensorInfo) -> torch.Tensor:
    """One tensor as a writable CPU torch tensor with its own dtype (BF16 stays BF16).

    The bytes are read straight into the tensor's buffer (no second copy), so loading a draft
    costs its size once, like safetensors' own loader.
    """
    import torch

    try:
        dtype = torch_dtype(info.dtype)
    except ValueError as exc:
        raise ValueError(f"{info.name}: {exc}") from None
    buf = torch.empty(info.nbytes, dtype=torch.uint8)
    if info.nbytes:
        view = memoryview(buf.numpy())
        readinto = getattr(source, "readinto", None)
        if readinto is not None:
            readinto(info.file, info.offset, view)
        else:
            view[:] = source.read_range(info.file, info.offset, info.nbytes)
    return buf.view(dtype).reshape(info.shape)


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of safetensors `dtype`; ValueError when this torch has none for it."""
    import torch

    name = TORCH_DTYPE_NAMES.get(dtype)
    found = getattr(torch, name, None) if name else None
    if found is None:
        raise ValueError(f"torch {torch.__version__} has no dtype for {dtype}")
    return found
