"""Check a command's real `--json` output against its published schema in `schemas/`.

The schemas refer to each other by `$id` (`../validate-report/1#/$defs/finding`), so every
`*.schema.json` is registered before one is used.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    from eagle_convert.draft.schemas import _REPO_SCHEMAS

    resources = []
    for path in sorted(_REPO_SCHEMAS.glob("*.schema.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


def check_schema(data: Any, name: str) -> None:
    """Raise jsonschema.ValidationError unless `data` (a parsed `--json` output) matches `schemas/<name>`."""
    import jsonschema

    from eagle_convert.draft import schemas

    schema = schemas.load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema, registry=_registry()).validate(json.loads(json.dumps(data)))
