"""`io.safetensors_header.read_header` accepts a file exactly when the installed safetensors library
(the Rust crate vLLM loads with) does: each crafted header is opened by both and the verdicts compared.

The cases are the crate's rules one at a time (safetensors 0.8 `SafeTensors::read_metadata`,
`Metadata::validate`): offsets tile the data (no gap, overlap or trailing byte), integer types,
`__metadata__` a string map given once, duplicate fields refused, duplicate tensor names keep the
last entry, serde_json's syntax (no NaN, no BOM, no trailing NUL, whitespace allowed, nesting below
128, a struct as a 3-element array, an enum as a one-key map), sub-byte dtypes on byte boundaries.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from safetensors import safe_open

from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.safetensors_header import read_header
from eagle_convert.io.source import LocalSource


def _file(header: object = None, data: bytes = b"", raw: bytes | None = None) -> bytes:
    body = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


def _t(begin: int, end: int, shape: list | None = None, dtype: object = "F32", **extra: object) -> dict:
    return {"dtype": dtype, "shape": [1] if shape is None else shape, "data_offsets": [begin, end], **extra}


A = b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
CASES = {
    "one tensor": _file({"a": _t(0, 4)}, b"\0" * 4),
    "trailing bytes": _file({"a": _t(0, 4)}, b"\0" * 8),
    "gap between tensors": _file({"a": _t(0, 4), "b": _t(8, 12)}, b"\0" * 12),
    "gap at the start": _file({"a": _t(4, 8)}, b"\0" * 8),
    "overlap": _file({"a": _t(0, 4), "b": _t(0, 4)}, b"\0" * 4),
    "end before begin": _file({"a": _t(4, 0)}, b"\0" * 4),
    "size not dtype x shape": _file({"a": _t(0, 8)}, b"\0" * 8),
    "duplicate name, different entries": _file(
        raw=b"{" + A + b',"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', data=b"\0" * 8
    ),
    "duplicate name, same entry": _file(raw=b"{" + A + b"," + A + b"}", data=b"\0" * 4),
    "duplicate field": _file(
        raw=b'{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4
    ),
    "duplicate __metadata__": _file(raw=b'{"__metadata__":{},' + A + b',"__metadata__":{}}', data=b"\0" * 4),
    "duplicate metadata key": _file(raw=b'{"__metadata__":{"k":"a","k":"b"},' + A + b"}", data=b"\0" * 4),
    "metadata empty": _file({"__metadata__": {}, "a": _t(0, 4)}, b"\0" * 4),
    "metadata null": _file({"__metadata__": None, "a": _t(0, 4)}, b"\0" * 4),
    "metadata int value": _file({"__metadata__": {"k": 1}, "a": _t(0, 4)}, b"\0" * 4),
    "metadata null value": _file({"__metadata__": {"k": None}, "a": _t(0, 4)}, b"\0" * 4),
    "metadata nested": _file({"__metadata__": {"k": {"x": "y"}}, "a": _t(0, 4)}, b"\0" * 4),
    "metadata list": _file({"__metadata__": [], "a": _t(0, 4)}, b"\0" * 4),
    "metadata string": _file({"__metadata__": "pt", "a": _t(0, 4)}, b"\0" * 4),
    "shape float": _file({"a": _t(0, 4, [1.0])}, b"\0" * 4),
    "shape string": _file({"a": _t(0, 4, ["1"])}, b"\0" * 4),
    "shape negative": _file({"a": _t(0, 4, [-1])}, b"\0" * 4),
    "shape bool": _file({"a": _t(0, 4, [True])}, b"\0" * 4),
    "shape -0": _file(raw=b'{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}'),
    "shape 1e0": _file(raw=b'{"a":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}', data=b"\0" * 4),
    "shape over u64": _file(
        raw=b'{"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}', data=b"\0" * 4
    ),
    "shape overflows": _file({"a": _t(0, 4, [2**32, 2**32])}, b"\0" * 4),
    "shape empty (scalar)": _file({"a": _t(0, 4, [])}, b"\0" * 4),
    "offsets float": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}}, b"\0" * 4),
    "offsets string": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}}, b"\0" * 4),
    "offsets three": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}}, b"\0" * 4),
    "missing shape": _file({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4),
    "extra field": _file({"a": _t(0, 4, x=1)}, b"\0" * 4),
    "extra field nested 127": _file(
        raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + b"[" * 125 + b"]" * 125 + b"}}",
        data=b"\0" * 4,
    ),
    "extra field nested 128": _file(
        raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + b"[" * 126 + b"]" * 126 + b"}}",
        data=b"\0" * 4,
    ),
    "extra field NaN": _file(raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":NaN}}', data=b"\0" * 4),
    "entry as an array": _file(raw=b'{"a":["F32",[1],[0,4]]}', data=b"\0" * 4),
    "dtype as a one-key map": _file({"a": _t(0, 4, dtype={"F32": None})}, b"\0" * 4),
    "dtype list": _file({"a": _t(0, 4, dtype=["F32"])}, b"\0" * 4),
    "dtype unknown": _file({"a": _t(0, 4, dtype="X32")}, b"\0" * 4),
    "dtype lower case": _file({"a": _t(0, 4, dtype="f32")}, b"\0" * 4),
    "F4 whole byte": _file({"a": _t(0, 1, [2], "F4")}, b"\0"),
    "F4 half byte": _file({"a": _t(0, 1, [1], "F4")}, b"\0"),
    "zero-size tensors": _file({"a": _t(0, 0, [0]), "b": _t(0, 4), "c": _t(4, 4, [0])}, b"\0" * 4),
    "no tensors": _file({}),
    "metadata only": _file({"__metadata__": {"format": "pt"}}),
    "BOM": _file(raw=b"\xef\xbb\xbf{" + A + b"}", data=b"\0" * 4),
    "leading and trailing whitespace": _file(raw=b" \t\n{" + A + b"}\r\n  ", data=b"\0" * 4),
    "trailing NUL": _file(raw=b"{" + A + b"}\0\0", data=b"\0" * 4),
    "lone surrogate name": _file(raw=b'{"\\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4),
    "surrogate pair name": _file(
        raw=b'{"\\ud83d\\ude00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4
    ),
    "escaped control name": _file(raw=b'{"a\\u001b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4),
    "raw control in name": _file(raw=b'{"a\x01":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4),
    "not UTF-8": _file(raw=b'{"\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data=b"\0" * 4),
    "top level list": _file([]),
    "header length 0": struct.pack("<Q", 0),
    "header length past the end": struct.pack("<Q", 100) + b"{}",
    "empty object header": _file(raw=b"{}"),
}


def _library_accepts(path: Path) -> bool:
    try:
        with safe_open(str(path), "np") as f:
            list(f.keys())
    except Exception:  # the library raises SafetensorError, or others on odd input
        return False
    return True


def _we_accept(path: Path) -> bool:
    try:
        read_header(LocalSource(path), path.name)
    except CheckpointReadError:
        return False
    return True


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_verdict_as_the_safetensors_library(case: str, tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(CASES[case])
    assert _we_accept(path) == _library_accepts(path)


def test_the_cases_cover_both_verdicts(tmp_path: Path) -> None:
    """A table of only refusals (or only acceptances) would prove nothing about the rules."""
    verdicts = []
    for i, raw in enumerate(CASES.values()):
        path = tmp_path / f"{i}.safetensors"
        path.write_bytes(raw)
        verdicts.append(_library_accepts(path))
    assert sum(verdicts) >= 15 and len(verdicts) - sum(verdicts) >= 30
