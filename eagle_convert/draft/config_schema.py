"""Check a draft config.json against `schemas/draft-config.schema.json` before anything reads it.

A tiny interpreter for the JSON Schema subset that file uses (type, minimum, properties, items,
$ref, allOf, if/required/then), so the core needs no jsonschema dependency and every reader can
trust field types. The first problem becomes one ConfigError naming the field.
"""

from __future__ import annotations

import json
from typing import Any

from eagle_convert.draft import schemas
from eagle_convert.errors import ConfigError

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}
_NAMES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}


def _shown(value: Any) -> str:
    """A config value in a message: its JSON, cut at 60 characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _problem(value: Any, node: dict[str, Any], root: dict[str, Any], path: str) -> str | None:
    node = _resolve(node, root)
    types = node.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in allowed):
            want = " or ".join(_NAMES[t] for t in allowed)
            return f"field {path!r} must be {want}, got {_shown(value)}"
    if "minimum" in node and _TYPES["number"](value) and value < node["minimum"]:
        return f"field {path!r} must be at least {node['minimum']}, got {_shown(value)}"
    for sub in node.get("allOf", []):
        if found := _problem(value, sub, root, path):
            return found
    if isinstance(value, dict):
        prefix = f"{path}." if path else ""
        for key, sub in node.get("properties", {}).items():
            if key in value and (found := _problem(value[key], sub, root, prefix + key)):
                return found
        cond = node.get("if", {}).get("required", [])
        if cond and all(k in value for k in cond):
            for key in node.get("then", {}).get("required", []):
                if key not in value:
                    return f"field {prefix + key!r} is required when {', '.join(cond)} is set"
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            if found := _problem(item, node["items"], root, f"{path}[{i}]"):
                return found
    return None


def config_problem(config: dict[str, Any]) -> str | None:
    """The first schema violation in `config`, as text, or None."""
    root = schemas.load_schema("draft-config.schema.json")
    return _problem(config, root, root, "")


def check_config(config: dict[str, Any], where: str) -> None:
    """Raise ConfigError naming `where` (the config file) and the offending field."""
    problem = config_problem(config)
    if problem:
        raise ConfigError(f"{where}: {problem}", hint="fix the field in config.json")
