"""Load the data files under `schemas/`: layout rules, key maps, tensor specs, finding codes.

In a checkout they are read from the repository's `schemas/`; an installed wheel carries them as
the package data `eagle_convert._schemas` (pyproject maps that package onto `schemas/`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_REPO_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def schema_path(name: str) -> Path:
    """Path of a schema file: the repo's `schemas/` in a checkout, the package data when installed."""
    candidate = _REPO_SCHEMAS / name
    if candidate.is_file():
        return candidate
    from importlib import resources  # tempfile, shutil: only in an installed wheel, not a checkout

    return Path(str(resources.files("eagle_convert") / "_schemas" / name))


@cache
def load_schema(name: str) -> Any:
    """Parsed JSON of `schemas/<name>`, cached for the process."""
    with open(schema_path(name), encoding="utf-8") as fh:
        return json.load(fh)
