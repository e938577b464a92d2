"""Where each tensor's bytes lie inside a `pytorch_model.bin` (torch zip format), without torch.

`torch.save` writes a zip archive: `data.pkl` (the pickled dict, whose tensors reference storages
by key) and one uncompressed record `data/<key>` per storage. Unpickling `data.pkl` with a
restricted unpickler that only records (storage key, offset, shape, stride) gives every tensor's
absolute byte range, so a `.bin` input is byte-copied into safetensors exactly like a safetensors
input: streamed, never decoded. Anything unexpected returns None and callers fall back to torch.
"""

from __future__ import annotations

import math
import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BinRange", "bin_byte_ranges"]

# torch storage class name -> (safetensors dtype, bytes per element)
_STORAGES = {
    "BFloat16Storage": ("BF16", 2), "HalfStorage": ("F16", 2), "FloatStorage": ("F32", 4),
    "DoubleStorage": ("F64", 8), "LongStorage": ("I64", 8), "IntStorage": ("I32", 4),
    "ShortStorage": ("I16", 2), "CharStorage": ("I8", 1), "ByteStorage": ("U8", 1), "BoolStorage": ("BOOL", 1),
}


@dataclass(frozen=True)
class BinRange:
    """One tensor of a .bin: dtype, shape, and `nbytes` contiguous bytes at absolute `offset`."""

    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: str
    itemsize: int


@dataclass(frozen=True)
class _TensorRef:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor_v2(storage: _Storage, offset: int, size: tuple, stride: tuple, *_: Any) -> _TensorRef:
    return _TensorRef(storage, int(offset), tuple(int(s) for s in size), tuple(int(s) for s in stride))


def _rebuild_parameter(data: _TensorRef, *_: Any) -> _TensorRef:
    return data


class _Unpickler(pickle.Unpickler):
    _ALLOWED = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("collections", "OrderedDict"): OrderedDict,
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        dtype, itemsize = _STORAGES[pid[1].name]
        return _Storage(str(pid[2]), dtype, itemsize)


def _contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expected = 1
    for dim, st in zip(reversed(shape), reversed(stride), strict=True):
        if dim != 1 and st != expected:
            return False
        expected *= dim
    return True


def _data_offset(fh: Any, info: zipfile.ZipInfo) -> int:
    fh.seek(info.header_offset)
    local = fh.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError("bad local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def bin_byte_ranges(path: Path) -> dict[str, BinRange] | None:
    """name -> byte range of every tensor in a torch zip checkpoint, or None when not resolvable."""
    try:
        with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
            names = zf.namelist()
            if not names:
                return None
            prefix = names[0].split("/", 1)[0]
            if f"{prefix}/byteorder" in names and zf.read(f"{prefix}/byteorder").strip() != b"little":
                return None
            state = _Unpickler(zf.open(f"{prefix}/data.pkl")).load()
            if not isinstance(state, dict):
                return None
            out: dict[str, BinRange] = {}
            for name, ref in state.items():
                if not isinstance(name, str) or not isinstance(ref, _TensorRef):
                    return None
                if not _contiguous(ref.shape, ref.stride):
                    return None
                info = zf.getinfo(f"{prefix}/data/{ref.storage.key}")
                if info.compress_type != zipfile.ZIP_STORED:
                    return None
                nbytes = math.prod(ref.shape) * ref.storage.itemsize
                start = ref.offset * ref.storage.itemsize
                if start + nbytes > info.file_size:
                    return None
                out[name] = BinRange(ref.storage.dtype, ref.shape, _data_offset(fh, info) + start, nbytes)
            return out
    except (zipfile.BadZipFile, pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError, OSError,
            AttributeError):
        return None
