"""Changed files -> the draft folders they belong to (for the pre-commit hook).

A draft folder is the nearest folder, from the file upwards, that holds a `config.json` (vLLM loads
folders, and every draft layout keeps its config at the folder's root; NeMo sub-folders such as
`model/consolidated/` sit below it). Files under no such folder are not drafts and are ignored,
and so are folders whose config.json is not a model config (no `architectures`/`model_type`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _is_model_config(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # unreadable: let validation say so (E304 / E002) rather than skip the draft
    return not isinstance(data, dict) or "architectures" in data or "model_type" in data


def draft_folders(files: Iterable[str | Path], *, root: str | Path = ".") -> list[Path]:
    """The distinct draft folders of `files` (relative paths are taken from `root`), in order."""
    base = Path(root).resolve()
    out: dict[Path, None] = {}
    for name in files:
        path = Path(name)
        path = (base / path) if not path.is_absolute() else path
        folder = path.parent
        while True:
            cfg = folder / "config.json"
            if cfg.is_file():
                if _is_model_config(cfg):
                    out.setdefault(folder.resolve(), None)
                break
            if folder == base or folder.parent == folder or base not in folder.parents:
                break
            folder = folder.parent
    return list(out)
