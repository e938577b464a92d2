"""The one `pytorch_model.bin` reader: every tensor's dtype, shape and absolute byte range, without torch.

`torch.save` writes a zip archive: `data.pkl` (the pickled dict, whose tensors reference storages
by key) and one uncompressed record `data/<key>` per storage. Unpickling `data.pkl` with a
restricted unpickler that only records (storage key, dtype, offset, shape, stride) gives every
tensor's absolute byte range inside the zip, so a `.bin` is read like a safetensors file: by byte
range, never decoded by torch, and inspect/validate/upgrade of a `.bin` work without torch.

Refusing arbitrary pickled objects (what `torch.load(weights_only=True)` guarantees): pickle can
only call what `find_class` hands it, and `_Unpickler.find_class` hands out nothing but
recording stand-ins for torch's tensor-rebuild functions, storage classes and dtypes, plus
`collections.OrderedDict`; every other global (`builtins.object`, `os.system`, a custom class...)
raises before anything runs. The loaded value must then be a flat `{str: tensor}` dict.

What `torch.load` reads but this reader refuses, each with a one-line error: the legacy
(pre-1.6, non-zip) format, which `torch.load(mmap=True)` refused too; big-endian archives;
compressed records; tensors saved as non-contiguous views (re-save with `.contiguous()`).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.bounded import brief, open_regular
from eagle_convert.io.picklescan import MAX_PICKLE_BYTES, PickleBombError, scan_pickle
from eagle_convert.io.safetensors_header import DTYPE_BYTES, TensorInfo
from eagle_convert.io.source import Source, where
from eagle_convert.io.tensordata import TORCH_DTYPE_NAMES

# torch dtype name -> (safetensors dtype, bytes per element): the torch dtype table read backwards,
# plus the legacy names torch still pickles; the legacy typed storages map onto the same pairs.
_DTYPES = {t: (st, DTYPE_BYTES[st]) for st, t in TORCH_DTYPE_NAMES.items()}
_DTYPES |= {
    old: _DTYPES[new]
    for old, new in {
        "half": "float16",
        "float": "float32",
        "double": "float64",
        "long": "int64",
        "int": "int32",
        "short": "int16",
    }.items()
}
_STORAGES = {
    "BFloat16Storage": _DTYPES["bfloat16"],
    "HalfStorage": _DTYPES["float16"],
    "FloatStorage": _DTYPES["float32"],
    "DoubleStorage": _DTYPES["float64"],
    "LongStorage": _DTYPES["int64"],
    "IntStorage": _DTYPES["int32"],
    "ShortStorage": _DTYPES["int16"],
    "CharStorage": _DTYPES["int8"],
    "ByteStorage": _DTYPES["uint8"],
    "BoolStorage": _DTYPES["bool"],
    "UntypedStorage": _DTYPES["uint8"],
}


class _Refused(pickle.UnpicklingError):
    """A global outside the allow-list: the archive holds something other than plain tensors."""


class _Unreadable(ValueError):
    """A well-formed archive this reader cannot map to byte ranges (message says why)."""


class _NotFlat(ValueError):
    """The pickle is allowed but is not a flat {str: tensor} dict."""


@dataclass(frozen=True)
class _Dtype:
    dtype: str
    itemsize: int


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: _Dtype


@dataclass(frozen=True)
class _TensorRef:
    storage: _Storage
    dtype: _Dtype
    offset: int  # in elements of `dtype`
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Unreadable("a tensor's offset, shape or stride is not a non-negative integer")
    return value


def _ints(values: Any) -> tuple[int, ...]:
    if not isinstance(values, tuple):
        raise _Unreadable("a tensor's shape or stride is not a tuple")
    return tuple(_int(v) for v in values)


def _rebuild_tensor_v2(storage: _Storage, offset: int, size: tuple, stride: tuple, *_: Any) -> _TensorRef:
    if not isinstance(storage, _Storage):
        raise _Refused("tensor without a storage")
    return _TensorRef(storage, storage.dtype, _int(offset), _ints(size), _ints(stride))


def _rebuild_tensor_v3(
    storage: _Storage, offset: int, size: tuple, stride: tuple, _grad: Any, _hooks: Any, dtype: _Dtype, *_: Any
) -> _TensorRef:
    """Dtypes without a typed storage class (float8, uint16...): untyped bytes plus a dtype."""
    if not isinstance(dtype, _Dtype) or not isinstance(storage, _Storage):
        raise _Refused("unexpected storage or dtype argument")  # never repr: it may nest 200k deep
    return _TensorRef(storage, dtype, _int(offset), _ints(size), _ints(stride))


def _rebuild_parameter(data: _TensorRef, *_: Any) -> _TensorRef:
    return data


class _Unpickler(pickle.Unpickler):
    _ALLOWED = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("collections", "OrderedDict"): OrderedDict,
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        if module in ("torch", "torch.storage") and name in _STORAGES:
            return _StorageType(name)
        if module == "torch" and name in _DTYPES:
            return _Dtype(*_DTYPES[name])
        raise _Refused(f"{module}.{name} is not allowed")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (
            isinstance(pid, tuple)
            and len(pid) >= 3
            and isinstance(pid[0], str)
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
            and isinstance(pid[2], str)
        ):
            raise _Refused("unsupported persistent id")  # never repr: it may nest 200k deep
        return _Storage(pid[2], _Dtype(*_STORAGES[pid[1].name]))


def _valid_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        raise _Unreadable(f"bad zip local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _record(zf: zipfile.ZipFile, name: str, cap: int) -> bytes:
    """One archive record, refused unread when it would inflate past `cap` bytes."""
    info = zf.getinfo(name)
    if info.file_size > cap:
        raise PickleBombError(f"record {name} inflates to {info.file_size} bytes, more than {cap}")
    with zf.open(info) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise PickleBombError(f"record {name} inflates past {cap} bytes")
    return data


def _ranges(fh: Any, fname: str) -> dict[str, TensorInfo]:
    with zipfile.ZipFile(fh) as zf:
        names = zf.namelist()
        prefix = names[0].split("/", 1)[0] if names else ""
        if f"{prefix}/data.pkl" not in names:
            raise _Unreadable("no data.pkl record")
        if f"{prefix}/byteorder" in names and _record(zf, f"{prefix}/byteorder", 64).strip() != b"little":
            raise _Unreadable("big-endian byte order")
        pkl = _record(zf, f"{prefix}/data.pkl", MAX_PICKLE_BYTES)
        scan_pickle(pkl)
        state = _Unpickler(io.BytesIO(pkl)).load()
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, _TensorRef) for k, v in state.items()
        ):
            raise _NotFlat("expected a flat dict of tensors")
        bad = next((k for k in state if not _valid_name(k)), None)
        if bad is not None:
            raise _Unreadable(f"tensor name {brief(bad)} is not valid Unicode (a lone surrogate)")
        out: dict[str, TensorInfo] = {}
        for name, ref in state.items():
            if not _contiguous(ref.shape, ref.stride):
                raise _Unreadable(f"tensor {brief(name)} is saved as a non-contiguous view")
            info = zf.getinfo(f"{prefix}/data/{ref.storage.key}")
            if info.compress_type != zipfile.ZIP_STORED:
                raise _Unreadable(f"record {info.filename} is compressed")
            nbytes = math.prod(ref.shape) * ref.dtype.itemsize
            start = ref.offset * ref.dtype.itemsize
            if start < 0 or start + nbytes > info.file_size:
                raise _Unreadable(f"tensor {brief(name)} lies outside its storage record")
            out[name] = TensorInfo(name, ref.dtype.dtype, ref.shape, fname, _data_offset(fh, info) + start, nbytes)
        return out


def read_bin_tensors(source: Source, fname: str) -> dict[str, TensorInfo]:
    """name -> `TensorInfo` (absolute byte range in `fname`) of every tensor, in pickle order.

    Raises `CheckpointReadError` naming the file and the fix for anything but a flat dict of
    contiguous tensors in a little-endian torch zip archive.
    """
    path, shown = source.local_path(fname), where(source, fname)
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb") as fh:
            return _ranges(fh, fname)
    except PickleBombError as exc:
        raise CheckpointReadError(
            f"{shown}: refuses a pickle that would take unbounded memory ({exc})",
            hint="re-save the state dict with torch.save or convert it to safetensors",
        ) from exc
    except _Refused as exc:
        raise CheckpointReadError(
            f"{shown}: refuses to unpickle non-tensor objects (weights_only=True)",
            hint="re-save the state dict as plain tensors or convert it to safetensors",
        ) from exc
    except _NotFlat as exc:
        raise CheckpointReadError(
            f"{shown}: expected a flat dict of tensors",
            hint="re-save the state dict as plain tensors or convert it to safetensors",
        ) from exc
    except _Unreadable as exc:
        raise CheckpointReadError(
            f"{shown}: cannot read PyTorch checkpoint ({exc})",
            hint="re-save it with torch.save({k: v.contiguous() ...}) or convert it to safetensors",
        ) from exc
    except (
        zipfile.BadZipFile,
        pickle.UnpicklingError,
        KeyError,
        ValueError,
        TypeError,
        EOFError,
        OSError,
        AttributeError,
        IndexError,
        RecursionError,
    ) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, zipfile.BadZipFile):
            reason = "not a zip archive: truncated, corrupt, or the pre-1.6 torch format"
        raise CheckpointReadError(
            f"{shown}: cannot read PyTorch checkpoint ({reason})", hint="re-download or re-export the file"
        ) from exc
