"""Results whose dataclass fields say how they are written as JSON: `to_dict` and the reader derived.

A result is declared once, as a dataclass. A field's JSON facts sit in its metadata
(`field(metadata=key(...))`): its key when it differs from the field's name, floats rounded to
`ndigits` (inside lists and dicts too), left out when None, or not written at all. `dump` writes
the fields in order; a result whose JSON also holds computed values (a count, a constant) passes
them by keyword and, where they do not simply follow the fields or where it writes properties,
names its keys once, in order (`acceptance_length:4`: a property rounded to 4 digits). `load`
reads a dump back from the same declaration, each nested result or list of results through its
annotation, so a reader cannot drift from the writer. Nested values are written by `encode`: a result through its
`to_dict`, a path as text, tuples as lists.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, NamedTuple, TypeVar

META = "eagle_convert.json"  # the dataclass field metadata key
T = TypeVar("T")
_PLAIN = frozenset({str, int, bool, type(None)})  # written as they are; a list or map of only these is not copied


class JsonKey(NamedTuple):
    name: str | None = None  # None: the field's name
    ndigits: int | None = None  # floats rounded to this many digits
    omit_none: bool = False  # the key is left out when the value is None
    dump: bool = True  # False: never written (a field only the library uses)


def key(name: str | None = None, *, ndigits: int | None = None, omit_none: bool = False, dump: bool = True) -> Any:
    """A field's JSON spelling, as its metadata: `field(metadata=key(...))` (`dataclasses.field`
    itself, so type checkers still see which fields have defaults)."""
    return {META: JsonKey(name, ndigits, omit_none, dump)}


def _spec(f: dataclasses.Field[Any]) -> JsonKey:
    return f.metadata.get(META, JsonKey())


def encode(value: Any, ndigits: int | None = None) -> Any:
    """`value` as JSON data: a result through its `to_dict` (a dataclass without one through
    `dump`), a path as text, tuples as lists, floats (not bools or ints) rounded to `ndigits`."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, float):
        return value if ndigits is None else round(value, ndigits)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        if _PLAIN.issuperset(map(type, value)):
            return value if isinstance(value, list) else list(value)
        return [encode(v, ndigits) for v in value]
    if isinstance(value, dict):
        if _PLAIN.issuperset(map(type, value.values())):
            return value
        return {k: encode(v, ndigits) for k, v in value.items()}
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dump(value)
    return value


def dump(obj: Any, keys: str | None = None, **computed: Any) -> dict[str, Any]:
    """The JSON dict of the dataclass `obj`: its written fields in order, then `computed` (a
    computed value of a field's key takes its place); or, with `keys` (the JSON keys,
    space-separated), exactly those keys in that order, each a `computed` keyword, a field's key
    or a property of `obj`, `name:N` rounding its floats to N digits. A name that is none of
    these raises KeyError (a typo fails every test)."""
    fields = {(_spec(f).name or f.name): f for f in dataclasses.fields(obj) if _spec(f).dump}
    out: dict[str, Any] = {}
    for item in keys.split() if keys is not None else dict.fromkeys([*fields, *computed]):
        k, _, digits = item.partition(":")
        ndigits = int(digits) if digits else None
        if k in computed:
            out[k] = encode(computed[k], ndigits)
        elif k in fields:
            spec, value = _spec(fields[k]), getattr(obj, fields[k].name)
            if not (spec.omit_none and value is None):
                out[k] = encode(value, spec.ndigits if ndigits is None else ndigits)
        elif isinstance(getattr(type(obj), k, None), property):
            out[k] = encode(getattr(obj, k), ndigits)
        else:
            raise KeyError(f"{type(obj).__name__}: no field or computed value writes the JSON key {k!r}")
    return out


def load(cls: type[T], data: Mapping[str, Any]) -> T:
    """The `cls` that `dump` wrote `data` from: every written field read from its key (a missing
    key takes the field's default), a nested result (or a list of them, or one or None) through
    its annotation. Raises KeyError, TypeError or ValueError on a shape that does not fit."""
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        spec = _spec(f)
        name = spec.name or f.name
        if not f.init or not spec.dump:
            continue
        if name not in data and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING):
            continue
        kw[f.name] = _decode(hints[f.name], data[name])
    return cls(**kw)


def _decode(tp: Any, value: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value) if len(inner) == 1 else value
    if origin in (list, tuple) and args:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        seq = [_decode(args[0], v) for v in value]
        return seq if origin is list else tuple(seq)
    if origin is dict:
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return load(tp, value)  # type: ignore[arg-type]
    return value


class Jsonable:
    """A dataclass result whose `to_dict` and `from_dict` are its fields' JSON spelling (`key`)."""

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        return load(cls, data)
