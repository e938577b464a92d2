"""Hub failures as the library's errors: `huggingface_hub` / `httpx2` exceptions mapped to one-liners.

Every failure of a `hub.HubSource` call leaves as one of `HubNotFoundError`, `HubGatedError`,
`HubOfflineError`, `CheckpointReadError` (or `UsageError` for an invalid id) with a one-line
message and a hint; no client exception escapes. Client modules are imported lazily: they
cost import time.

Errors come from `huggingface_hub.errors` except one kind: a hub that cannot be reached. The
client raises its HTTP library's transport errors for that (`httpx2.ConnectError`,
`httpx2.TimeoutException`, ...; its own `snapshot_download` catches exactly those to fall back
to the cache), and neither `huggingface_hub.errors` nor a builtin (`OSError`,
`ConnectionError`) covers them. So `httpx2` is a declared dependency, with huggingface_hub's own
bound, and `unreachable_errors` is the one place it is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from eagle_convert.errors import (
    CheckpointReadError,
    EagleConvertError,
    HubGatedError,
    HubNotFoundError,
    HubOfflineError,
    UsageError,
)
from eagle_convert.io.hub_env import OFFLINE_REASON, endpoint_display, offline

NOT_FOUND_HINT = "check the repo id / revision, or set HF_TOKEN if it is private"
GATED_HINT = "request access on the model page and set HF_TOKEN"
OFFLINE_HINT = "unset HF_HUB_OFFLINE or download the files first"
UNREACHABLE_HINT = "check the network connection and HF_ENDPOINT, or download the files first"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def file_not_found(description: str, name: str) -> HubNotFoundError:
    return HubNotFoundError(f"{description}/{name}: file not found in the repository", hint=NOT_FOUND_HINT)


def not_cached(description: str, name: str, reason: str) -> HubOfflineError:
    """`name` is not in the local cache and the hub cannot be asked, because of `reason`."""
    return HubOfflineError(
        f"{description}/{name}: not in the local cache and {reason}",
        hint=OFFLINE_HINT if reason == OFFLINE_REASON else UNREACHABLE_HINT,
    )


def unreachable_errors() -> tuple[type[BaseException], ...]:
    """The client exceptions that mean "the hub could not be reached" (see the module docstring)."""
    import httpx2

    return (httpx2.TransportError,)


@contextmanager
def translated(repo_id: str, revision: str | None, description: str, name: str | None) -> Iterator[None]:
    """Translate huggingface_hub / httpx2 failures into the library's hub errors."""
    try:
        yield
    except EagleConvertError:
        raise
    except Exception as exc:  # noqa: BLE001 - filtered by translate, re-raised otherwise
        mapped = translate(exc, repo_id=repo_id, revision=revision, description=description, name=name)
        if mapped is None:
            raise
        raise mapped from exc


def translate(
    exc: Exception, *, repo_id: str, revision: str | None, description: str, name: str | None
) -> EagleConvertError | None:
    """The library error for a client failure reading `description` (file `name`, if any); None: not ours."""
    from huggingface_hub.errors import (
        DisabledRepoError,
        EntryNotFoundError,
        FileMetadataError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    transport = unreachable_errors()

    what = f"{description}/{name}" if name else description
    if isinstance(exc, GatedRepoError):
        return HubGatedError(f"{repo_id}: gated repository, access denied", hint=GATED_HINT)
    if isinstance(exc, RepositoryNotFoundError):
        return HubNotFoundError(f"{repo_id}: repository not found on the hub", hint=NOT_FOUND_HINT)
    if isinstance(exc, RevisionNotFoundError):
        return HubNotFoundError(f"{repo_id}@{revision or 'main'}: revision not found on the hub", hint=NOT_FOUND_HINT)
    if isinstance(exc, DisabledRepoError):
        return HubNotFoundError(f"{repo_id}: repository is disabled on the hub")
    if isinstance(exc, LocalEntryNotFoundError) or isinstance(exc, OfflineModeIsEnabled):
        cause = exc.__cause__
        if not offline() and isinstance(cause, transport):
            return unreachable(what, cause)
        if not offline() and isinstance(cause, FileMetadataError):
            return not_a_hub(what)
        return HubOfflineError(f"{what}: not in the local cache and {OFFLINE_REASON}", hint=OFFLINE_HINT)
    if isinstance(exc, EntryNotFoundError):
        if name:
            return file_not_found(description, name)
        return HubNotFoundError(f"{what}: not found", hint=NOT_FOUND_HINT)
    if isinstance(exc, transport):
        return unreachable(what, exc)
    if isinstance(exc, FileMetadataError):
        return not_a_hub(what)
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            return HubGatedError(f"{what}: access denied by the hub (HTTP {status})", hint=GATED_HINT)
        if status is not None and (status >= 500 or status in (408, 429)):
            return HubOfflineError(f"{what}: the hub is unavailable (HTTP {status})", hint=UNREACHABLE_HINT)
        return CheckpointReadError(f"{what}: hub request failed (HTTP {status}: {first_line(exc)})")
    if isinstance(exc, HFValidationError):
        return UsageError(f"{what}: {first_line(exc)}")
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "huggingface_hub",
        "httpx",
        "httpx2",
        "requests",
        "urllib3",
        "hf_xet",
    ):
        return CheckpointReadError(f"{what}: hub request failed ({type(exc).__name__}: {first_line(exc)})")
    return None


def unreachable(what: str, exc: BaseException) -> HubOfflineError:
    return HubOfflineError(
        f"{what}: cannot reach the hub at {endpoint_display()} ({type(exc).__name__})", hint=UNREACHABLE_HINT
    )


def not_a_hub(what: str) -> CheckpointReadError:
    return CheckpointReadError(
        f"{what}: {endpoint_display()} does not answer like a Hugging Face Hub endpoint",
        hint="check HF_ENDPOINT",
    )
