"""`diff_checkpoints(a, b, opts)`: tensors added / removed / renamed / changed, and the config diff.

Tensors are matched by name, then leftover names by canonical (vLLM-native) name, which is how a
rename (`midlayer.` → `layers.0.`, NeMo's `model.`) shows up. Data is compared in bounded chunks
read from byte ranges; only chunks that differ are decoded (numpy) for the max abs difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from eagle_convert.draft import Checkpoint, canonical_name, open_checkpoint
from eagle_convert.errors import UsageError
from eagle_convert.io import TensorInfo
from eagle_convert.jsonable import dump
from eagle_convert.optionspec import check, option

CHUNK_ELEMS = 4 << 20  # elements per compared chunk (16 MiB of F32)


@dataclass(frozen=True)
class DiffOptions:
    """What `diff` compares and how it answers (the `diff` command's options, declared once)."""

    as_json: bool = option(False, flag="--json", help="Print the diff as JSON.")
    headers_only: bool = option(False, help="Compare names, dtypes and shapes only; read no tensor data.")
    exit_code: bool = option(False, help="Exit with 1 when the checkpoints differ (like git diff --exit-code).")
    served: bool = option(
        False,
        help="Also say whether A and B compute the same function as vLLM serves them (configs read as vLLM "
        "reads them, missing norms as ones, the dtype the target's); with --exit-code, exit 1 when that differs.",
    )

    def __post_init__(self) -> None:
        check(self)
        if self.served and self.headers_only:
            raise UsageError("{served} compares tensor values: drop {headers_only}", options=("served", "headers_only"))


@dataclass
class ConfigDiff:
    added: dict[str, Any] = field(default_factory=dict)  # dotted path -> value in B
    removed: dict[str, Any] = field(default_factory=dict)  # dotted path -> value in A
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # dotted path -> (A, B)

    def paths(self) -> list[str]:
        return sorted({*self.added, *self.removed, *self.changed})

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return dump(self, changed={k: {"a": a, "b": b} for k, (a, b) in self.changed.items()})


def config_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> ConfigDiff:
    """Difference of two configs; objects present on both sides are compared key by key (dotted paths)."""
    out = ConfigDiff()
    for key in a.keys() | b.keys():
        path = f"{prefix}{key}"
        if key not in b:
            out.removed[path] = a[key]
        elif key not in a:
            out.added[path] = b[key]
        elif isinstance(a[key], dict) and isinstance(b[key], dict):
            sub = config_diff(a[key], b[key], path + ".")
            out.added.update(sub.added)
            out.removed.update(sub.removed)
            out.changed.update(sub.changed)
        elif a[key] != b[key] or type(a[key]) is not type(b[key]):
            out.changed[path] = (a[key], b[key])
    for part in (out.added, out.removed, out.changed):
        ordered = dict(sorted(part.items()))
        part.clear()
        part.update(ordered)
    return out


@dataclass
class TensorChange:
    """A tensor present on both sides (same name, or renamed) whose dtype, shape or bytes differ."""

    a: str
    b: str
    dtype: tuple[str, str]
    shape: tuple[list[int], list[int]]
    max_abs_diff: float | None  # None when shapes differ or data was not compared
    differing_elements: int | None = None


@dataclass
class CheckpointDiff:
    """Two checkpoints compared: tensors added, removed, renamed and changed, and the config diff."""

    a: str
    b: str
    added: list[dict[str, Any]]  # tensors only in B: name, dtype, shape
    removed: list[dict[str, Any]]  # tensors only in A
    renamed: list[tuple[str, str]]  # (name in A, name in B), same canonical name
    changed: list[TensorChange]
    identical: int  # tensors whose dtype, shape and bytes are equal (renamed ones included)
    config: ConfigDiff
    compared_data: bool = True

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.renamed or self.changed or self.config)

    def to_dict(self) -> dict[str, Any]:
        renamed = [{"a": a, "b": b} for a, b in self.renamed]
        return dump(self, "a b same compared_data added removed renamed changed identical config", renamed=renamed)


def _row(t: TensorInfo) -> dict[str, Any]:
    return {"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}


def diff_checkpoints(a: str | Checkpoint, b: str | Checkpoint, opts: DiffOptions | None = None) -> CheckpointDiff:
    """Compare two checkpoints (paths, hub refs or opened `Checkpoint`s).

    Args:
        a: the first checkpoint (e.g. the EAGLE-3 input of an upgrade).
        b: the second (e.g. the upgrade's output).
        opts: `headers_only` compares names, dtypes and shapes only; otherwise tensor values too
            (in bounded chunks). `served` is `served_diff.served_diff`'s, beside this.

    Returns:
        Tensors added, removed, renamed (same vLLM-native name) and changed, and the config diff.

    Raises:
        CheckpointNotFoundError: a path that does not exist.
        CheckpointReadError: weights that cannot be read.
    """
    compare_data = not (opts or DiffOptions()).headers_only
    ca = a if isinstance(a, Checkpoint) else open_checkpoint(a)
    cb = b if isinstance(b, Checkpoint) else open_checkpoint(b)
    only_a = [n for n in ca.tensors if n not in cb.tensors]
    only_b = [n for n in cb.tensors if n not in ca.tensors]
    canon_b: dict[str, str] = {}
    for n in only_b:
        canon_b.setdefault(canonical_name(n), n)
    pairs = [(n, n) for n in ca.tensors if n in cb.tensors]
    renamed: list[tuple[str, str]] = []
    for n in only_a:
        match = canon_b.pop(canonical_name(n), None)
        if match is not None:
            renamed.append((n, match))
    matched_a = {x for x, _ in renamed}
    matched_b = {y for _, y in renamed}
    changed: list[TensorChange] = []
    identical = 0
    for na, nb in pairs + renamed:
        ta, tb = ca.tensors[na], cb.tensors[nb]
        if compare_data:
            change = compare_tensor(ca, cb, ta, tb)
        elif (ta.dtype, ta.shape) != (tb.dtype, tb.shape):
            change = TensorChange(na, nb, (ta.dtype, tb.dtype), (list(ta.shape), list(tb.shape)), None)
        else:
            change = None
        if change is None:
            identical += 1
        else:
            changed.append(change)
    return CheckpointDiff(
        a=ca.description,
        b=cb.description,
        added=[_row(cb.tensors[n]) for n in only_b if n not in matched_b],
        removed=[_row(ca.tensors[n]) for n in only_a if n not in matched_a],
        renamed=renamed,
        changed=changed,
        identical=identical,
        config=config_diff(ca.config, cb.config),
        compared_data=compare_data,
    )


def compare_tensor(ca: Checkpoint, cb: Checkpoint, ta: TensorInfo, tb: TensorInfo) -> TensorChange | None:
    """None when the bytes are equal; otherwise the change, with the max abs difference when shapes
    match (0.0 over 0 elements: the same values in another dtype)."""
    shapes = (list(ta.shape), list(tb.shape))
    if ta.shape != tb.shape:
        return TensorChange(ta.name, tb.name, (ta.dtype, tb.dtype), shapes, None)
    import numpy as np

    from eagle_convert.io import DECODABLE, decode, tensor_bytes

    if ta.dtype not in DECODABLE or tb.dtype not in DECODABLE:  # sub-byte floats: compare bytes only
        step = CHUNK_ELEMS * 4
        same = ta.dtype == tb.dtype and all(
            tensor_bytes(ca.source, ta, i, min(step, ta.nbytes - i))
            == tensor_bytes(cb.source, tb, i, min(step, ta.nbytes - i))
            for i in range(0, ta.nbytes, step)
        )
        return None if same else TensorChange(ta.name, tb.name, (ta.dtype, tb.dtype), shapes, None)
    n = ta.numel
    sa, sb = ta.nbytes // max(n, 1), tb.nbytes // max(n, 1)
    max_diff, count, same_bytes = 0.0, 0, ta.dtype == tb.dtype
    for start in range(0, n, CHUNK_ELEMS):
        k = min(CHUNK_ELEMS, n - start)
        raw_a = tensor_bytes(ca.source, ta, start * sa, k * sa)
        raw_b = tensor_bytes(cb.source, tb, start * sb, k * sb)
        if same_bytes and raw_a == raw_b:
            continue
        same_bytes = False
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: a difference, below
            va = decode(raw_a, ta.dtype, (k,)).astype(np.float64)
            vb = decode(raw_b, tb.dtype, (k,)).astype(np.float64)
            both_nan = np.isnan(va) & np.isnan(vb)
            delta = np.where(both_nan, 0.0, np.abs(va - vb))
        delta = np.where(np.isnan(delta), math.inf, delta)
        count += int(np.count_nonzero(delta))
        max_diff = max(max_diff, float(delta.max()) if k else 0.0)
    if same_bytes:
        return None
    return TensorChange(ta.name, tb.name, (ta.dtype, tb.dtype), shapes, max_diff, count)
