"""`push_draft`: upload a draft folder to the Hugging Face Hub, refusing one that fails validation.

Through huggingface_hub's public API: `HfApi.create_repo` (exist_ok), `create_branch` for a
`revision` other than main (exist_ok), then one `create_commit` with every file of the folder, as
`upload_folder` does, so the upload is one commit (or one pull request with `create_pr`). One file
is not sent as it lies: an eagle-convert model card names the local folder in its `vllm serve`
command, and the pushed card names the repo instead (`draft.card.retarget_card`); a folder without
a README.md gets the card `write_model_card` would write, generated for the repo
(`draft.card.folder_card`). A README.md of the user's own is sent as it is.

A draft with validation errors (`validate.run.validate_checkpoint`, static checks, with the target
when given) is refused unless `allow_invalid`: a broken draft on the hub is what `validate` exists to stop.

`plan_push` decides all of that (files, sizes, the card, the commit message, the verdict) without a
hub request; `push --dry-run` renders it. Both take `PushOptions`, the `push` command's options.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eagle_convert.draft import CARD_FILE, folder_card, local_folder, retarget_card
from eagle_convert.errors import (
    EagleConvertError,
    HubError,
    HubOfflineError,
    PushRefusedError,
    UsageError,
)
from eagle_convert.io import OFFLINE_REASON, endpoint, endpoint_display, offline, translate
from eagle_convert.jsonable import dump, key
from eagle_convert.optionspec import check, option
from eagle_convert.validate import serving_summary, validate_checkpoint

_LOCAL = "push uploads a local draft folder"
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
WRITE_HINT = "push needs a token with write access to the namespace: set HF_TOKEN or run `hf auth login`"
PUSH_OFFLINE_HINT = "unset HF_HUB_OFFLINE to upload; {dry_run} shows what would be sent"
PUSH_UNREACHABLE_HINT = "check the network connection and HF_ENDPOINT; {dry_run} shows what would be sent"


@dataclass(frozen=True)
class PushOptions:
    """Where the commit goes, how the repo is made, whether an invalid draft may go, and how the command
    answers (`dry_run`: `plan_push` instead of `push_draft`; `as_json`)."""

    revision: str | None = option(
        None, metavar="BRANCH", help="Branch to commit to (created from main when missing). Default: main."
    )
    create_pr: bool = option(False, help="Open a pull request against the branch instead of committing to it.")
    private: bool | None = option(None, help="Create the repo private (an existing repo keeps its visibility).")
    target: str | None = option(
        None, metavar="PATH_OR_REPO", help="Also cross-check the draft against its target while validating."
    )
    allow_invalid: bool = option(False, help="Push a draft that fails validation anyway.")
    commit_message: str | None = option(
        None, flag="--message", help="Commit message (default: Upload FOLDER with eagle-convert)."
    )
    dry_run: bool = option(
        False,
        help="Validate and show what would be sent (repo, files and sizes, commit message, verdict); send "
        "nothing. Works offline; exits 1 when the push would be refused.",
    )
    as_json: bool = option(False, flag="--json", help="Print the result (or, with --dry-run, the plan) as JSON.")

    def __post_init__(self) -> None:
        check(self)


@dataclass
class PushPlan:
    """What `push_draft` would send, decided without any hub request (`push --dry-run` shows it)."""

    folder: Path = field(metadata=key(dump=False))
    repo_id: str
    revision: str  # the branch committed to (the PR's base with create_pr)
    create_pr: bool
    private: bool | None
    commit_message: str
    files: dict[str, int]  # path in the repo -> bytes that would be sent
    card_retargeted: bool  # the model card's `vllm serve` would name the repo
    endpoint: str
    allow_invalid: bool = field(metadata=key(dump=False))
    validation_errors: list[tuple[str, str]] = field(default_factory=list)  # (code, message)
    validation_warnings: int = 0
    # the retargeted (or generated) card, sent instead of the local README.md
    card_bytes: bytes | None = field(default=None, metadata=key(dump=False))
    card_generated: bool = False  # the folder has no README.md: an eagle-convert card is generated for the repo

    @property
    def refused(self) -> bool:
        """The draft fails validation and `allow_invalid` was not given: nothing would be sent."""
        return bool(self.validation_errors) and not self.allow_invalid

    def to_dict(self) -> dict[str, Any]:
        codes, size = [code for code, _ in self.validation_errors], sum(self.files.values())
        return dump(
            self, _PLAN_KEYS, dry_run=True, total_bytes=size, validation_errors=codes, would_push=not self.refused
        )


@dataclass
class PushResult:
    """A finished push: the repo, the branch, the commit (or pull request) and the files sent."""

    repo_id: str
    revision: str  # the branch the commit went to (the PR's base with create_pr)
    commit_oid: str
    commit_url: str
    pr_url: str | None
    files: dict[str, int]  # path in the repo -> bytes sent
    card_retargeted: bool  # the model card's `vllm serve` now names the repo
    endpoint: str
    validation_errors: list[str] = field(default_factory=list)  # codes pushed anyway (allow_invalid)
    validation_warnings: int = 0
    card_generated: bool = False  # README.md was generated: the folder had none

    def to_dict(self) -> dict[str, Any]:
        return dump(
            self, "repo_id revision commit_oid commit_url pr_url " + _KEYS, total_bytes=sum(self.files.values())
        )


_KEYS = "files total_bytes card_retargeted card_generated endpoint validation_errors validation_warnings"
_PLAN_KEYS = "dry_run repo_id revision create_pr private commit_message " + _KEYS + " would_push"


def push_files(folder: Path) -> list[str]:
    """The files `push_draft` uploads: everything under `folder` except hidden names (`.git`,
    `.cache`, the temp folders of an interrupted write), as posix paths, sorted."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


def plan_push(
    folder: str | Path, repo_id: str, opts: PushOptions | None = None, *, force: bool | None = None
) -> PushPlan:
    """Validate `folder` and list what a push to `repo_id` would send; no hub request, so it works offline.

    Args:
        folder: the draft folder.
        repo_id: the hub model repo, `org/name`.
        opts: the branch, pull request, visibility, target to cross-check against, `allow_invalid`
            and commit message (`PushOptions`; default: main, a commit, the hub's visibility).
        force: the old name of `allow_invalid` (deprecated: a DeprecationWarning).

    Returns:
        The repo and branch, every file with its size, the commit message and the validation verdict.

    Raises:
        CheckpointNotFoundError: `folder` has no config.json.
        UsageError: `repo_id` is not `org/name`, or the two are given the other way round.
    """
    o = opts or PushOptions()
    allow_invalid, target = _allow_invalid(o.allow_invalid, force), o.target
    _refuse_swapped(folder, repo_id)
    path = local_folder(folder, str(folder), _LOCAL)  # uploaded as is: its config.json must sit at its root
    if not _REPO_ID.fullmatch(repo_id):
        raise UsageError(f"{repo_id!r} is not a hub repo id", hint="use org/name (or user/name)")
    report = validate_checkpoint(path, target=target)
    sizes: dict[str, int] = {}
    card, retargeted = None, False
    names = push_files(path)
    for name in names:
        if name == CARD_FILE:
            text = (path / name).read_text(encoding="utf-8")
            moved = retarget_card(text, repo_id)
            card, retargeted = moved.encode(), moved != text
            sizes[name] = len(card)
        else:
            sizes[name] = (path / name).stat().st_size
    generated = CARD_FILE not in names
    if generated:  # a plain draft: the card it would have had from upgrade, for the repo
        target_ref = None if target is None else str(target)
        card = folder_card(path, model_ref=repo_id, target=target_ref, serving=serving_summary(path)).encode()
        sizes[CARD_FILE] = len(card)
    return PushPlan(
        folder=path,
        repo_id=repo_id,
        revision=o.revision or "main",
        create_pr=o.create_pr,
        private=o.private,
        commit_message=o.commit_message or f"Upload {path.resolve().name} with eagle-convert",
        files=sizes,
        card_retargeted=retargeted,
        endpoint=endpoint_display(),
        allow_invalid=allow_invalid,
        validation_errors=[(f.code, f.message) for f in report.errors],
        validation_warnings=len(report.warnings),
        card_bytes=card,
        card_generated=generated,
    )


def push_draft(
    folder: str | Path,
    repo_id: str,
    opts: PushOptions | None = None,
    *,
    token: str | None = None,
    force: bool | None = None,
) -> PushResult:
    """Upload `folder` to the model repo `repo_id` (created when missing) in one commit.

    Refuses a draft with validation errors unless `allow_invalid`. `plan_push` with the same arguments
    says what would be sent.

    Args:
        folder: the draft folder.
        repo_id: the hub model repo, `org/name`.
        opts: as `plan_push` takes them (`dry_run` is `plan_push` itself: refused here).
        token: the hub token (default: `HF_TOKEN` or the `hf auth login` one).
        force: the old name of `allow_invalid` (deprecated: a DeprecationWarning).

    Returns:
        The commit (or pull request) made and what was sent.

    Raises:
        UsageError: `dry_run` (call `plan_push`).
        PushRefusedError: the draft fails validation (and not `allow_invalid`); nothing was sent.
        HubOfflineError: offline mode is on, or the hub cannot be reached.
        HubError: the hub refused the upload (no write access).
    """
    o = opts or PushOptions()
    if o.dry_run:
        raise UsageError("{dry_run} sends nothing: call plan_push for the plan", options=("dry_run",))
    plan = plan_push(folder, repo_id, replace(o, allow_invalid=_allow_invalid(o.allow_invalid, force)))
    if plan.refused:
        code, message = plan.validation_errors[0]
        n = len(plan.validation_errors)
        raise PushRefusedError(
            f"{folder}: fails validation with {n} error{'s' * (n > 1)} ({code}: {message}); nothing was uploaded",
            hint=f"see eagle-convert validate {folder}, or pass {{allow_invalid}} to push it anyway",
            options=("allow_invalid",),
            file=str(folder),
        )
    if offline():
        raise HubOfflineError(f"{repo_id}: cannot push, {OFFLINE_REASON}", hint=PUSH_OFFLINE_HINT, options=("dry_run",))
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint(), token=token)  # HF_ENDPOINT now, not at the client's import
    ops = [
        CommitOperationAdd(
            path_in_repo=name,
            path_or_fileobj=plan.card_bytes
            if name == CARD_FILE and plan.card_bytes is not None
            else str(plan.folder / name),
        )
        for name in plan.files
    ]
    branch = plan.revision
    try:
        api.create_repo(repo_id, repo_type="model", private=o.private, exist_ok=True)
        if branch != "main":
            api.create_branch(repo_id, branch=branch, exist_ok=True)
        info = api.create_commit(
            repo_id, ops, commit_message=plan.commit_message, revision=branch, create_pr=o.create_pr, repo_type="model"
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
        files=plan.files,
        card_retargeted=plan.card_retargeted,
        endpoint=endpoint_display(),
        validation_errors=[code for code, _ in plan.validation_errors],
        validation_warnings=plan.validation_warnings,
        card_generated=plan.card_generated,
    )


def _refuse_swapped(folder: str | Path, repo_id: str) -> None:
    """`push ORG/NAME FOLDER`: the folder is missing, looks like a repo id, and the repo id is a
    local folder; say the order rather than "no such folder"."""
    given = str(folder)
    if Path(given).expanduser().exists() or not _REPO_ID.fullmatch(given):
        return
    is_dir = Path(repo_id).expanduser().is_dir()
    if is_dir or not _REPO_ID.fullmatch(repo_id):
        also = f" and {repo_id!r} is a local folder" if is_dir else f" and {repo_id!r} is not a repo id"
        raise UsageError(
            f"push takes FOLDER ORG/NAME, in that order: {given!r} is no local folder but looks like a repo id{also}",
            hint=f"eagle-convert push {repo_id} {given}",
        )


def _allow_invalid(allow_invalid: bool, force: bool | None) -> bool:
    """`allow_invalid`, or the deprecated `force` it replaced (one DeprecationWarning)."""
    if force is None:
        return allow_invalid
    warnings.warn("push: force= is deprecated; use allow_invalid=", DeprecationWarning, stacklevel=3)
    return allow_invalid or force


def _hub_error(exc: Exception, repo_id: str, branch: str) -> Exception:
    from huggingface_hub.errors import HfHubHTTPError

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, HfHubHTTPError) and status in (401, 403):
        return HubError(f"{repo_id}: the hub refused the upload (HTTP {status})", hint=WRITE_HINT)
    mapped = translate(exc, repo_id=repo_id, revision=branch, description=repo_id, name=None)
    if isinstance(mapped, HubOfflineError):  # a reader's hint ("download the files first") does not fit an upload
        return HubOfflineError(mapped.message, hint=PUSH_UNREACHABLE_HINT, options=("dry_run",))
    return mapped if mapped is not None else exc
