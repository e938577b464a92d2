"""Is a reference a local path or a hub repo id, and what to say when a local path does not exist.

A mistyped relative path (`up/specforg_bf16` beside an existing `up/`) must read as a missing
folder, not as a hub repo that offline mode cannot find. `looks_like_path` decides from the text
and the file system only; `missing_path_error` names the path and, when one sibling is a single
edit away (insert, delete, replace or swap two neighbours), suggests it.
"""

from __future__ import annotations

import os
from pathlib import Path

from eagle_convert.errors import CheckpointNotFoundError

_SEPARATORS = tuple(dict.fromkeys(("/", os.sep, "\\")))


def looks_like_path(text: str) -> bool:
    """True when `text` can only mean a local path, whether or not it exists.

    That is: it starts with `.`, `/` or `~`; contains `./` (so also `../`) or a backslash; or holds a
    separator and either its parent folder or its first component exists here. `org/name` with no
    local `org/` is left to the hub.
    """
    if not text:
        return False
    if text.startswith((".", "/", "~")) or "./" in text or ".\\" in text or "\\" in text:
        return True
    if not any(sep in text for sep in _SEPARATORS):
        return False
    path = Path(text).expanduser()
    first = Path(path.parts[0]) if path.parts else None
    return path.parent.exists() or (first is not None and first.exists())


def one_edit_apart(a: str, b: str) -> bool:
    """True when `b` is `a` with exactly one character inserted, deleted, replaced, or two
    neighbouring characters swapped (the typos a person makes)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def did_you_mean(path: Path) -> Path | None:
    """An existing path that differs from `path` by one edit in its first missing component, if
    exactly one such sibling exists (and the components after it exist beneath it)."""
    parts = path.parts
    for depth in range(len(parts)):
        here = Path(*parts[: depth + 1])
        if here.exists():
            continue
        parent = Path(*parts[:depth]) if depth else Path(".")
        try:
            siblings = sorted(p.name for p in parent.iterdir())
        except OSError:
            return None
        rest = parts[depth + 1 :]
        hits = [
            candidate
            for name in siblings
            if one_edit_apart(parts[depth], name) and (candidate := parent.joinpath(name, *rest)).exists()
        ]
        return hits[0] if len(hits) == 1 else None
    return None


def suggestion(path: Path) -> str | None:
    """`did you mean X?` for a missing `path` with one sibling a single edit away, else None."""
    guess = did_you_mean(path) if not path.exists() else None
    return f"did you mean {guess}?" if guess is not None else None


def missing_path_error(path: Path) -> CheckpointNotFoundError:
    """The one-line error for a local path that does not exist, with a suggestion when there is one."""
    guess = suggestion(path)
    if guess is not None:
        return CheckpointNotFoundError(f"{path}: no such file or folder", hint=guess)
    from eagle_convert.io.hub import parse_hub_ref  # lazy: huggingface_hub costs import time

    if parse_hub_ref(str(path)) is not None:  # e.g. org/name beside a local org/ folder
        hint = f"check the path, or write hf://{path} for the hub repo"
    else:
        hint = "check the path or pass a hub repo id as org/name"
    return CheckpointNotFoundError(f"{path}: no such file or folder", hint=hint)
