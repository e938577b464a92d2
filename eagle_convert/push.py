"""`push_draft`: upload a draft folder to the Hugging Face Hub, refusing one that fails validation.

Through huggingface_hub's public API: `HfApi.create_repo` (exist_ok), `create_branch` for a
`revision` other than main (exist_ok), then one `create_commit` with every file of the folder, as
`upload_folder` does, so the upload is one commit (or one pull request with `create_pr`). One file
is not sent as it lies: an eagle-convert model card names the local folder in its `vllm serve`
command, and the pushed card names the repo instead (`draft.card.retarget_card`).

A draft with validation errors (`validate.run.validate_checkpoint`, static checks, with the target
when given) is refused unless `force`: a broken draft on the hub is what `validate` exists to stop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft.card import CARD_FILE, retarget_card
from eagle_convert.errors import (
    CheckpointNotFoundError,
    EagleConvertError,
    HubError,
    HubOfflineError,
    PushRefusedError,
    UsageError,
)
from eagle_convert.io.hub_env import OFFLINE_REASON, endpoint, endpoint_display, offline
from eagle_convert.io.hub_errors import OFFLINE_HINT, translate
from eagle_convert.validate.run import validate_checkpoint

__all__ = ["PushResult", "push_draft", "push_files"]

_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
WRITE_HINT = "push needs a token with write access to the namespace: set HF_TOKEN or run `hf auth login`"


@dataclass
class PushResult:
    repo_id: str
    revision: str  # the branch the commit went to (the PR's base with create_pr)
    commit_oid: str
    commit_url: str
    pr_url: str | None
    files: dict[str, int]  # path in the repo -> bytes sent
    card_retargeted: bool  # the model card's `vllm serve` now names the repo
    endpoint: str
    validation_errors: list[str] = field(default_factory=list)  # codes pushed anyway (--force)
    validation_warnings: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit_oid": self.commit_oid,
            "commit_url": self.commit_url,
            "pr_url": self.pr_url,
            "files": self.files,
            "total_bytes": sum(self.files.values()),
            "card_retargeted": self.card_retargeted,
            "endpoint": self.endpoint,
            "validation_errors": self.validation_errors,
            "validation_warnings": self.validation_warnings,
        }


def push_files(folder: Path) -> list[str]:
    """The files `push_draft` uploads: everything under `folder` except hidden names (`.git`,
    `.cache`, the temp folders of an interrupted write), as posix paths, sorted."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


def push_draft(
    folder: str | Path,
    repo_id: str,
    *,
    revision: str | None = None,
    create_pr: bool = False,
    private: bool | None = None,
    force: bool = False,
    target: str | Path | None = None,
    token: str | None = None,
    commit_message: str | None = None,
) -> PushResult:
    """Upload `folder` to the model repo `repo_id` (created when missing) in one commit.

    `revision`: the branch (created from main when missing); `create_pr`: open a pull request
    against it instead of committing; `private`: for a new repo (an existing one keeps its
    visibility). Refuses a draft with validation errors unless `force`.
    """
    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        raise CheckpointNotFoundError(f"{folder}: no config.json (push uploads a local draft folder)")
    if not _REPO_ID.fullmatch(repo_id):
        raise UsageError(f"{repo_id!r} is not a hub repo id", hint="use org/name (or user/name)")
    report = validate_checkpoint(path, target=target)
    errors = report.errors
    if errors and not force:
        first = errors[0]
        raise PushRefusedError(
            f"{folder}: fails validation with {len(errors)} error{'s' * (len(errors) > 1)} "
            f"({first.code}: {first.message}); nothing was uploaded",
            hint=f"see eagle-convert validate {folder}, or pass --force to push it anyway",
        )
    if offline():
        raise HubOfflineError(f"{repo_id}: cannot push, {OFFLINE_REASON}", hint=OFFLINE_HINT)
    names = push_files(path)
    branch = revision or "main"
    message = commit_message or f"Upload {path.resolve().name} with eagle-convert"
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint(), token=token)  # HF_ENDPOINT now, not at the client's import
    ops, sizes, retargeted = [], {}, False
    for name in names:
        data: bytes | str = str(path / name)
        if name == CARD_FILE:
            text = (path / name).read_text(encoding="utf-8")
            moved = retarget_card(text, repo_id)
            retargeted = moved != text
            data = moved.encode()
        sizes[name] = len(data) if isinstance(data, bytes) else (path / name).stat().st_size
        ops.append(CommitOperationAdd(path_in_repo=name, path_or_fileobj=data))
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        if branch != "main":
            api.create_branch(repo_id, branch=branch, exist_ok=True)
        info = api.create_commit(
            repo_id, ops, commit_message=message, revision=branch, create_pr=create_pr, repo_type="model"
        )
    except EagleConvertError:
        raise
    except Exception as exc:
        raise _hub_error(exc, repo_id, branch) from exc
    return PushResult(
        repo_id=repo_id,
        revision=branch,
        commit_oid=info.oid,
        commit_url=info.commit_url,
        pr_url=info.pr_url,
        files=sizes,
        card_retargeted=retargeted,
        endpoint=endpoint_display(),
        validation_errors=[f.code for f in errors],
        validation_warnings=len(report.warnings),
    )


def _hub_error(exc: Exception, repo_id: str, branch: str) -> Exception:
    from huggingface_hub.errors import HfHubHTTPError

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, HfHubHTTPError) and status in (401, 403):
        return HubError(f"{repo_id}: the hub refused the upload (HTTP {status})", hint=WRITE_HINT)
    mapped = translate(exc, repo_id=repo_id, revision=branch, description=repo_id, name=None)
    return mapped if mapped is not None else exc
