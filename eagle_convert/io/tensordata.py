"""Decode small tensors (d2t, t2d, norm weights) into numpy arrays from their raw bytes.

Validation reads only these few vocab/norm tensors, so numpy is enough and torch stays unloaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from eagle_convert.draft.checkpoint import Checkpoint

_NUMPY_DTYPES = {
    "BOOL": "bool", "U8": "<u1", "I8": "<i1", "I16": "<i2", "U16": "<u2", "I32": "<i4", "U32": "<u4",
    "I64": "<i8", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8",
}


def decode(raw: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Array for raw safetensors bytes; BF16 is widened to float32 (exactly representable)."""
    import numpy as np

    if dtype == "BF16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return halves.view(np.float32).reshape(shape)
    if dtype not in _NUMPY_DTYPES:
        raise ValueError(f"cannot decode dtype {dtype}")
    return np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).reshape(shape)


def read_array(ckpt: Checkpoint, name: str) -> np.ndarray:
    """One tensor of a checkpoint as a numpy array (read its bytes only)."""
    info = ckpt.tensors[name]
    return decode(ckpt.read_tensor_bytes(name), info.dtype, info.shape)
