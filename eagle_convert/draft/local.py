"""The local folder of a draft or target a command runs: one policy, one set of one-line errors.

Every command that loads weights from a folder (smoke, drift, report, finetune, upgrade --init
calibrated, check's engine stages) asks `local_checkpoint`; push, which uploads the folder as it is,
asks `local_folder`. A draft's config.json may sit where the checkpoint reader
finds it (root, `model/`, `model/consolidated/`); a target's sits at its root. The draft must be
one the command handles and the target must not be a draft (`kind.py`), so swapped arguments read
the same everywhere. Only commands that take a hub repo (check) download one, into the normal
Hugging Face cache (`io.HubSource`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from eagle_convert.draft.checkpoint import CheckpointRef, open_checkpoint
from eagle_convert.draft.kind import ensure_draft, ensure_target_config
from eagle_convert.errors import CheckpointNotFoundError
from eagle_convert.io import missing_path_error, suggestion


def local_folder(ref: str | Path, name: str, fix: str) -> Path:
    """`ref` (`~` expanded) as a folder that holds config.json at its root, for a command that reads the
    folder as it is (push uploads it); the two refusals name `name` and hint `fix`.

    Raises:
        CheckpointNotFoundError: `name: no such folder` (hint: a near-miss sibling, else `fix`) or
            `name: no config.json`.
    """
    p = _folder(ref, name, fix, ())
    if not (p / "config.json").is_file():
        raise CheckpointNotFoundError(f"{name}: no config.json", hint=fix)
    return p


def local_checkpoint(
    ref: str | Path,
    role: str,
    command: str,
    *,
    hub: bool = False,
    fix: str | None = None,
    options: Sequence[str] = (),
) -> Path:
    """The resolved local folder of `ref`, the `role` ("draft", "target", "baseline") of `command`.

    Args:
        ref: a folder as the user gave it (`~` expanded), or with `hub` a repo `org/name[@revision]`.
        role: how the messages name it; "target" is checked as a target, any other role as a draft.
        command: the command (`ensure_draft`'s refusals, and the fix a missing folder names).
        hub: whether a hub repo is accepted (downloaded whole).
        fix: the command's own hint for both refusals, where the generic one misleads (upgrade
            `--init calibrated` runs a target the rest of upgrade never reads); `options` are those it names.

    Raises:
        CheckpointNotFoundError: `role ref: no such folder`, `role ref: no config.json`, or (with
            `hub`) what `inspect` says of a missing path.
        NotADraftError: a draft role that is no draft `command` handles, or a target that is a draft.
    """
    parsed = CheckpointRef.parse(str(ref)) if hub else None
    if parsed is not None and parsed.is_hub:
        return _downloaded(parsed, role)
    if hub and not Path(ref).expanduser().is_dir():
        raise missing_path_error(Path(ref).expanduser())
    p = _folder(ref, f"{role} {ref}", fix or f"{command} needs a local checkpoint folder", options)
    if role == "target":
        has_config = (p / "config.json").is_file()
        if has_config:
            ensure_target_config(json.loads((p / "config.json").read_text()), f"target {ref}")
    else:
        ckpt = open_checkpoint(p)
        has_config = ckpt.has_config
        if has_config:  # a target, MTP head, Medusa ... or a draft this command cannot handle: one line, exit 1
            ensure_draft(ckpt, command)
    if not has_config:
        raise CheckpointNotFoundError(f"{role} {ref}: no config.json", hint=fix, options=options)
    return p.resolve()


def _folder(ref: str | Path, name: str, fix: str | None, options: Sequence[str]) -> Path:
    """`ref` with `~` expanded, refused unless it is a folder (every command's one-line message)."""
    p = Path(ref).expanduser()
    if not p.is_dir():
        raise CheckpointNotFoundError(f"{name}: no such folder", hint=suggestion(p) or fix, options=options)
    return p


def _downloaded(ref: CheckpointRef, role: str) -> Path:
    """Every file of hub repo `ref` in the Hugging Face cache; the folder of its root config.json."""
    from eagle_convert.io import HubSource

    src = HubSource(ref.repo, ref.revision)  # type: ignore[arg-type]
    names = src.list_files()
    if "config.json" not in names:
        raise CheckpointNotFoundError(f"{role} {ref.text}: the repo has no config.json at its root")
    folder = None
    for name in names:
        path = src.local_path(name)
        if name == "config.json":
            folder = path.parent
    assert folder is not None  # list_files() named config.json, so local_path() fetched it
    return folder
