"""The gate's policy, `eagle-check.toml`: load, validate against schemas/check-policy.schema.json.

A table per stage; a key's name never changes, so a policy written for one version keeps working.
Every problem is one line naming the key and what is wrong (exit 2). Validation is done here, with
the schema as data (the subset of JSON Schema it uses), so `check` needs no jsonschema at run time.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.draft import load_schema
from eagle_convert.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as the `tomli` package
    import tomli as tomllib

if TYPE_CHECKING:
    from eagle_convert.measure import MeasureOptions

POLICY_FILE = "eagle-check.toml"
SCHEMA = "check-policy.schema.json"
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


@dataclass(frozen=True)
class Policy:
    """The policy, validated when built (a bad key is a UsageError naming `source` and the key, exit 2):
    `data` holds what the file says, `get` adds the schema's defaults, `acceptance` is the typed
    [acceptance] table."""

    data: dict[str, Any] = field(default_factory=dict)
    source: str = "(defaults)"
    base_dir: Path = field(default_factory=Path.cwd)

    def __post_init__(self) -> None:
        problem = validate_policy(self.data)
        if problem:
            what, fix = problem
            raise UsageError(f"{self.source}: {what}", hint=f"{fix}; schemas/check-policy.schema.json, docs/check.md")

    def has(self, name: str) -> bool:
        return name in self.data

    def get(self, table: str, key: str, default: Any = None) -> Any:
        """The key's value, else the schema's default, else `default`."""
        t = self.data.get(table) or {}
        if key in t:
            return t[key]
        prop = load_schema(SCHEMA)["properties"][table]["properties"][key]
        return prop.get("default", default)

    def prompts(self, table: str) -> str | None:
        """A table's prompts: a file or folder beside the policy file, else as written (a suite name)."""
        value = self.get(table, "prompts")
        path = None if value is None else self.base_dir / value
        return str(path) if path is not None and path.exists() else value

    @cached_property
    def acceptance(self) -> MeasureOptions | None:
        """[acceptance] as the measuring options every command shares (None without the table): vLLM,
        the prompts (a path relative to the policy file, else a suite name), k as written (None: the
        served k, else 3; `MeasureOptions.resolve` decides it)."""
        if not self.has("acceptance"):
            return None
        from eagle_convert.measure import NATURAL, MeasureOptions

        return MeasureOptions(
            engine="vllm",
            prompts=self.prompts("acceptance"),
            categories=tuple(self.get("acceptance", "categories") or ()),
            limit=self.get("acceptance", "limit"),
            k=self.data["acceptance"].get("num_speculative_tokens"),
            max_new_tokens=int(self.get("acceptance", "max_new_tokens")),
            temperature=float(self.get("acceptance", "temperature")),
            seed=int(self.get("acceptance", "seed")),
            buckets=tuple(NATURAL if b == "natural" else int(b) for b in self.get("acceptance", "buckets")),
            chat_template=self.get("acceptance", "chat_template"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "tables": self.data}


def _where(path: list[str | int]) -> str:
    if not path:
        return "the policy"
    head, *rest = path
    text = f"[{head}]"
    for p in rest:
        text += f"[{p}]" if isinstance(p, int) else f" {p}"
    return text


def _key(path: list[str | int]) -> str:
    """How the fix names the value: `key` (an array item as `key[1]`)."""
    named = [p for p in path if isinstance(p, str)]
    tail = "".join(f"[{p}]" for p in path[path.index(named[-1]) + 1 :]) if named else ""
    return (named[-1] if len(named) > 1 else f"[{named[0]}]" if named else "the policy") + tail


def _assign(path: list[str | int], example: str) -> str:
    """`key = example`, or for an array item `key = [example]` (what to type in the file)."""
    if path and isinstance(path[-1], int):
        return f"{_key(path[:-1])} = [{example}]"
    return f"{_key(path)} = {example}"


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _toml(value: Any) -> str:
    """A value as TOML writes it (the fixes show what to type)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return _fmt(value)


def _example(schema: dict[str, Any]) -> str:
    """A value the schema accepts, as TOML: its default, a bound, or the example its form names."""
    if "anyOf" in schema:
        return " or ".join(_example(s) for s in schema["anyOf"])
    if "const" in schema:
        return _toml(schema["const"])
    if "enum" in schema:
        return _toml(schema["enum"][0])
    if "default" in schema and schema["default"] not in ([], None):
        return _toml(schema["default"])
    t = schema.get("type")
    if t in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 1))
        return _fmt(low if "minimum" in schema else low + (1 if t == "integer" else 0.5))
    if t == "string" and "x-form" in schema:
        return _toml(schema["x-form"].split()[-1])
    if t == "array":
        return "[" + _example(schema.get("items", {})) + "]"
    if t == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "{NAME = " + _example(schema["additionalProperties"]) + "}"
    return {"boolean": "true", "object": "{...}", "string": '"..."'}.get(t or "", "...")


def _is_type(value: Any, t: str) -> bool:
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def _unquoted(value: Any, schema: dict[str, Any]) -> Any:
    """`value` without its quotes when that is what the schema wanted ("2" for a number), else None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return None
    branches = schema.get("anyOf", [schema])
    return parsed if any("type" in b and _is_type(parsed, b["type"]) for b in branches) else None


def _type_fix(value: Any, schema: dict[str, Any], path: list[str | int]) -> str:
    bare = _unquoted(value, schema)
    if bare is not None:
        return f"drop the quotes: {_assign(path, _toml(bare))}"
    if schema.get("type") == "object" and len(path) == 1:
        return f"write it as a table: a line [{path[0]}], then its keys under it"
    return f"for example {_assign(path, _example(schema))}"


# A problem: what is wrong, naming the key, and the fix.
Problem = tuple[str, str]


def _check(value: Any, schema: dict[str, Any], path: list[str | int]) -> Problem | None:
    """The first problem of `value` against `schema` (the subset the policy schema uses), or None."""
    where = _where(path)
    if "anyOf" in schema:
        problems = [_check(value, s, path) for s in schema["anyOf"]]
        if all(problems):
            typed = [p for s, p in zip(schema["anyOf"], problems) if "type" in s and _is_type(value, s["type"])]
            if typed:  # the value has a branch's type but breaks one of its constraints: say which
                return typed[0]
            kinds = " or ".join(_describe(s) for s in schema["anyOf"])
            return f"{where} must be {kinds}, not {_fmt(value)} ({_type_name(value)})", _type_fix(value, schema, path)
        return None
    if "const" in schema and value != schema["const"]:
        return f"{where} must be {_fmt(schema['const'])}", f"write {_key(path)} = {_toml(schema['const'])}"
    if "enum" in schema:
        if not any(value == e and type(value) is type(e) for e in schema["enum"]):
            choices = ", ".join(_fmt(e) for e in schema["enum"])
            names = [e for e in schema["enum"] if isinstance(e, str)]
            close = difflib.get_close_matches(str(value), names, n=1) if isinstance(value, str) else []
            fix = f"write {_toml(close[0])}" if close else f"write one of them, e.g. {_assign(path, _example(schema))}"
            return f"{where} must be one of {choices}, not {_fmt(value)}", fix
        return None
    t = schema.get("type")
    if t and not _is_type(value, t):
        return (
            f"{where} must be {_describe(schema)}, not {_fmt(value)} ({_type_name(value)})",
            _type_fix(value, schema, path),
        )
    if t == "object":
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                problem = _check(item, props[key], [*path, key])
            elif extra is False:
                close = difflib.get_close_matches(key, list(props), n=1)
                kind = "table" if not path else "key"
                fix = f"rename it to {close[0]}" if close else f"remove it; known: {', '.join(props)}"
                return f"unknown {kind} {_where([*path, key])}", fix
            elif isinstance(extra, dict):
                problem = _check(item, extra, [*path, key])
            else:
                problem = None
            if problem:
                return problem
    if t == "array":
        for i, item in enumerate(value):
            problem = _check(item, schema.get("items", {}), [*path, i])
            if problem:
                return problem
    if t in ("number", "integer"):
        for key, ok, word, fix in (
            ("minimum", lambda v, m: v >= m, ">=", "to {} or more"),
            ("maximum", lambda v, m: v <= m, "<=", "to {} or less"),
            ("exclusiveMinimum", lambda v, m: v > m, ">", "above {}"),
        ):
            if key in schema and not ok(value, schema[key]):
                bound = _fmt(schema[key])
                return f"{where} must be {word} {bound}, not {_fmt(value)}", f"set {_key(path)} {fix.format(bound)}"
    if t == "string" and "pattern" in schema:
        import re

        if not re.match(schema["pattern"], value):
            form = schema.get("x-form", "of the form " + schema["pattern"])
            return f"{where} must be {form}, not {_fmt(value)}", f"for example {_assign(path, _example(schema))}"
    return None


def _describe(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return _fmt(schema["const"])
    t = schema.get("type", "a value")
    return {
        "object": "a table",
        "array": "an array",
        "integer": "an integer",
        "number": "a number",
        "string": "a string",
        "boolean": "true or false",
    }.get(t, t)


def validate_policy(data: dict[str, Any]) -> Problem | None:
    """The first problem of a parsed policy: (what is wrong, naming the key; the fix), or None."""
    problem = _check(data, load_schema(SCHEMA), [])
    if problem:
        return problem
    acc = data.get("acceptance") or {}
    return k_problem(acc, acc.get("num_speculative_tokens", 3))


def k_problem(acc: dict[str, Any], k: int, said: str = "num_speculative_tokens") -> Problem | None:
    """The [acceptance] floor that k cannot meet: more position floors than k, or an AL above k + 1;
    `said` names where k comes from (the served config, or the policy's own key)."""
    floors = acc.get("min_per_position")
    if floors is not None and len(floors) > k:
        return (
            f"[acceptance] min_per_position has {len(floors)} floors but {said} is {k} (one floor per draft position)",
            f"give {k} floor(s), or set num_speculative_tokens = {len(floors)}",
        )
    al = acc.get("min_acceptance_length")
    if al is not None and al > k + 1:
        whose = "" if said == "num_speculative_tokens" else f" ({said})"
        return (
            f"[acceptance] min_acceptance_length {al} is above k + 1 = {k + 1}{whose}, the most a draft can reach",
            f"set min_acceptance_length to {k + 1} or less, or raise num_speculative_tokens",
        )
    return None


def load_policy(path: str | Path | None = None, *, cwd: Path | None = None) -> Policy:
    """The policy at `path`, else `eagle-check.toml` in `cwd` (default: the working directory), else
    the defaults. Raises UsageError (exit 2) naming the file and the bad key."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if path is None:
        found = cwd / POLICY_FILE
        if not found.is_file():
            return Policy(base_dir=cwd)
        path = found
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{{policy}} {path}: no such file", options=("policy",), file=path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{path}: not valid TOML: {exc}", hint="a table is a line [name], a key is name = value (https://toml.io)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    return Policy(data, str(path), path.resolve().parent)
