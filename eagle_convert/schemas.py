"""Load the data files under `schemas/`: layout rules, key maps, tensor specs, finding codes.

The JSON files ship inside the package (`eagle_convert/schemas` is a symlink-free copy made at
build time is avoided: we resolve the repository folder first, then the installed package data).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

_REPO_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def schema_path(name: str) -> Path:
    """Path of a schema file: the repo's `schemas/` in a checkout, the package data when installed."""
    candidate = _REPO_SCHEMAS / name
    if candidate.is_file():
        return candidate
    return Path(str(resources.files("eagle_convert").joinpath("_schemas", name)))


@cache
def load(name: str) -> Any:
    """Parsed JSON of `schemas/<name>`, cached for the process."""
    with open(schema_path(name), encoding="utf-8") as fh:
        return json.load(fh)
