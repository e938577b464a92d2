"""`HubSource`: a checkpoint in a Hugging Face Hub model repo, read through `huggingface_hub`.

Reads only what is asked for: the file listing comes from one model-info call (`?blobs=1` for
sizes), small non-weight files (config.json, index json) are downloaded into the normal HF cache
with `hf_hub_download` (so they are available offline later), and everything else — safetensors
headers, small tensors — is fetched with HTTP `Range` requests against the `resolve` URL of the
pinned commit. Files already in the local HF cache are read from disk.

The environment is read on every call, not at import time like `huggingface_hub.constants`:
`HF_ENDPOINT`, `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`), `HF_HOME` / `HF_HUB_CACHE`, and
`HF_TOKEN` (through the client's own `get_token`).

Every failure leaves as one of `HubNotFoundError`, `HubGatedError`, `HubOfflineError` or
`CheckpointReadError` with a one-line message; no `huggingface_hub` / `httpx` exception escapes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import (
    CheckpointReadError,
    EagleConvertError,
    HubGatedError,
    HubNotFoundError,
    HubOfflineError,
    UsageError,
)

NOT_FOUND_HINT = "check the repo id / revision, or set HF_TOKEN if it is private"
GATED_HINT = "request access on the model page and set HF_TOKEN"
OFFLINE_HINT = "unset HF_HUB_OFFLINE or download the files first"
UNREACHABLE_HINT = "check the network connection and HF_ENDPOINT, or download the files first"

#: Files at most this large that are not weights are downloaded whole (and cached) on first read.
SMALL_FILE_BYTES = 4 << 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")

_LIBRARY_NAME = "eagle-convert"
_OFFLINE_REASON = "offline mode is on (HF_HUB_OFFLINE)"
_TRUE = {"1", "ON", "YES", "TRUE"}
_COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_REF_RE = re.compile(r"(?P<repo>[^/@\s]+/[^/@\s]+)(?:@(?P<rev>[^@\s]+))?")


# -- references -------------------------------------------------------------------------------


def parse_hub_ref(text: str) -> tuple[str, str | None] | None:
    """`org/name`, `org/name@rev`, `hf://org/name[@rev]` -> `(repo_id, revision or None)`.

    Returns None for text that is not a hub reference (callers check local paths first: an
    existing local path always wins). With the explicit `hf://` prefix a malformed reference is
    a `UsageError` rather than None. Revisions may contain `/` (`org/name@refs/pr/3`).
    """
    explicit = text.startswith("hf://")
    body = text[len("hf://") :] if explicit else text
    match = _REF_RE.fullmatch(body)
    if match is not None and _valid_repo_id(match.group("repo")):
        return match.group("repo"), match.group("rev")
    if explicit:
        raise UsageError(
            f"{text}: not a valid hub reference", hint="use hf://org/name or hf://org/name@revision"
        )
    return None


def _valid_repo_id(repo_id: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


# -- environment, read per call ---------------------------------------------------------------


def _endpoint() -> str | None:
    """HF_ENDPOINT now (None: the client's default)."""
    value = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return value or None


def _endpoint_display() -> str:
    from huggingface_hub import constants

    return _endpoint() or constants.ENDPOINT


def _offline() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE now; the client's import-time value when neither is set."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if value is not None:
        return value.strip().upper() in _TRUE
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _default_cache_dir() -> Path:
    """The HF hub cache folder now: HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > HF_HOME/hub > XDG default."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.path.expanduser(os.environ[var])))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


# -- the source -------------------------------------------------------------------------------


class HubSource:
    """Read-only access to one revision of a hub model repo (implements `source.Source`)."""

    def __init__(
        self,
        repo_id: str,
        revision: str | None = None,
        *,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if not _valid_repo_id(repo_id):
            raise UsageError(f"{repo_id}: not a valid hub repo id", hint="use org/name")
        self.repo_id = repo_id
        self.revision = revision or None
        self._token = token
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._sizes: dict[str, int | None] | None = None
        self._commit: str | None = None
        self._from_cache = False  # the listing came from the local cache (offline or hub unreachable)
        self._cache_reason = ""  # why: "offline mode is on (HF_HUB_OFFLINE)" or "the hub at ... is unreachable"
        self._complete = True  # the listing is known to hold every file of the revision

    # -- Source protocol ------------------------------------------------------------------

    @property
    def description(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id

    @property
    def commit(self) -> str | None:
        """The commit sha the revision resolved to (after the first call), if known."""
        self._listing()
        return self._commit

    def list_files(self) -> list[str]:
        return sorted(self._listing())

    def file_size(self, name: str) -> int:
        sizes = self._listing()
        if name not in sizes:
            raise self._missing(name)
        size = sizes[name]
        if size is None:
            size = sizes[name] = self._remote_size(name)
        return size

    def read_range(self, name: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise CheckpointReadError(f"{self.description}/{name}: invalid byte range {start}+{length}")
        size = self.file_size(name)
        if start + length > size:
            raise CheckpointReadError(
                f"{self.description}/{name}: truncated (wanted bytes {start}..{start + length}, file has {size})",
                hint="re-download or re-export the file",
            )
        if length == 0:
            return b""
        local = self._cached(name)
        if local is None and not self._from_cache and size <= SMALL_FILE_BYTES and not name.endswith(WEIGHT_SUFFIXES):
            local = self.local_path(name)
        if local is not None:
            return self._pread(local, name, start, length)
        if self._from_cache or _offline():
            raise self._not_cached(name)
        return self._fetch_range(name, start, length)

    def local_path(self, name: str) -> Path:
        self.file_size(name)  # existence check against the listing
        local = self._cached(name)
        if local is not None:
            return local
        if self._from_cache:
            raise self._not_cached(name)
        from huggingface_hub import hf_hub_download

        with self._errors(name):
            path = hf_hub_download(
                self.repo_id,
                name,
                revision=self.revision,
                cache_dir=self._cache(),
                endpoint=_endpoint(),
                token=self._token,
                local_files_only=_offline(),
                library_name=_LIBRARY_NAME,
            )
        return Path(path)

    # -- listing ----------------------------------------------------------------------------

    def _listing(self) -> dict[str, int | None]:
        if self._sizes is not None:
            return self._sizes
        if _offline():
            if not self._load_cached_listing(_OFFLINE_REASON):
                raise HubOfflineError(
                    f"{self.description}: not in the local cache and {_OFFLINE_REASON}", hint=OFFLINE_HINT
                )
            return self._sizes  # type: ignore[return-value]
        import httpx2
        from huggingface_hub import HfApi
        from huggingface_hub.errors import OfflineModeIsEnabled

        api = HfApi(endpoint=_endpoint(), token=self._token, library_name=_LIBRARY_NAME)
        with self._errors(None):
            try:
                info = api.model_info(self.repo_id, revision=self.revision, files_metadata=True)
            except (httpx2.TransportError, OfflineModeIsEnabled) as exc:
                # Unreachable hub (or the client's own offline switch): fall back to the cache, as
                # hf_hub_download itself does.
                reason = (
                    _OFFLINE_REASON
                    if isinstance(exc, OfflineModeIsEnabled)
                    else f"the hub at {_endpoint_display()} is unreachable"
                )
                if self._load_cached_listing(reason):
                    return self._sizes  # type: ignore[return-value]
                raise
        self._commit = info.sha
        self._sizes = {
            s.rfilename: s.size if s.size is not None else (s.lfs.size if s.lfs is not None else None)
            for s in (info.siblings or [])
        }
        self._from_cache = False
        self._complete = True
        return self._sizes

    def _load_cached_listing(self, reason: str) -> bool:
        """Fill the listing from the local HF cache (snapshot folder + tree listing); False if absent."""
        from huggingface_hub.file_download import repo_folder_name

        storage = self._cache() / repo_folder_name(repo_id=self.repo_id, repo_type="model")
        revision = self.revision or "main"
        commit: str | None = revision if _COMMIT_RE.fullmatch(revision) else None
        ref = storage / "refs" / revision
        if ref.is_file():
            try:
                commit = ref.read_text().strip()
            except OSError:
                commit = None
        if commit is None:
            return False
        snapshot = storage / "snapshots" / commit
        sizes: dict[str, int | None] = {}
        complete = False
        try:
            from huggingface_hub._tree_cache import read_tree_cache  # private; written by snapshot_download

            tree = read_tree_cache(str(storage), commit)
        except Exception:  # noqa: BLE001 - an optional, private cache format
            tree = None
        if tree:
            complete = True
            for name, entry in tree.items():
                sizes[name] = entry.lfs_size if entry.lfs_size is not None else entry.size
        if snapshot.is_dir():
            for dirpath, _dirnames, filenames in os.walk(snapshot):
                rel = Path(dirpath).relative_to(snapshot)
                for fname in filenames:
                    full = Path(dirpath) / fname
                    if full.is_file():
                        sizes[(rel / fname).as_posix() if str(rel) != "." else fname] = full.stat().st_size
        elif not tree:
            return False
        self._commit = commit
        self._sizes = sizes
        self._from_cache = True
        self._cache_reason = reason
        self._complete = complete
        return True

    def _missing(self, name: str) -> EagleConvertError:
        if self._from_cache and not self._complete:
            from huggingface_hub import _CACHED_NO_EXIST, try_to_load_from_cache

            known_missing = (
                try_to_load_from_cache(self.repo_id, name, cache_dir=self._cache(), revision=self._commit)
                is _CACHED_NO_EXIST
            )
            if not known_missing:
                return self._not_cached(name)
        return self._file_not_found(name)

    # -- bytes ------------------------------------------------------------------------------

    def _cache(self) -> Path:
        return self._cache_dir if self._cache_dir is not None else _default_cache_dir()

    def _cached(self, name: str) -> Path | None:
        """The file in the local HF cache for the pinned commit, without any network call."""
        from huggingface_hub import try_to_load_from_cache

        try:
            found = try_to_load_from_cache(
                self.repo_id, name, cache_dir=self._cache(), revision=self._commit or self.revision
            )
        except Exception:  # noqa: BLE001 - a cache probe must never fail the read
            return None
        return Path(found) if isinstance(found, str) else None

    def _pread(self, path: Path, name: str, start: int, length: int) -> bytes:
        try:
            with open(path, "rb") as fh:
                data = os.pread(fh.fileno(), length, start)
        except OSError as exc:
            raise CheckpointReadError(
                f"{self.description}/{name}: cannot read the cached copy {path} ({exc.strerror or exc})",
                hint="delete it from the HF cache and retry",
            ) from exc
        if len(data) != length:
            raise CheckpointReadError(
                f"{self.description}/{name}: cached copy {path} is truncated "
                f"(wanted bytes {start}..{start + length}, file has {start + len(data)})",
                hint="delete it from the HF cache and retry",
            )
        return data

    def _url(self, name: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, name, revision=self._commit or self.revision, endpoint=_endpoint())

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        headers = build_hf_headers(token=self._token, library_name=_LIBRARY_NAME)
        headers["Accept-Encoding"] = "identity"
        return headers

    def _fetch_range(self, name: str, start: int, length: int) -> bytes:
        """`length` bytes at `start` with one HTTP Range request (redirects to a CDN are followed)."""
        from huggingface_hub import constants
        from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

        headers = self._headers()
        headers["Range"] = f"bytes={start}-{start + length - 1}"
        chunks: list[bytes] = []
        got = 0
        with self._errors(name):
            with http_stream_backoff(
                "GET",
                self._url(name),
                headers=headers,
                timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                max_retries=2,
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                skip = 0
                if response.status_code == 200:
                    skip = start  # the server ignored Range: skip to the wanted bytes
                elif response.status_code == 206:
                    m = re.match(r"\s*bytes\s+(\d+)-", response.headers.get("Content-Range", ""))
                    if m is not None and int(m.group(1)) != start:
                        raise CheckpointReadError(
                            f"{self.description}/{name}: the hub answered a range request for byte {start} "
                            f"with byte {m.group(1)}"
                        )
                else:
                    raise CheckpointReadError(
                        f"{self.description}/{name}: unexpected HTTP {response.status_code} for a range request"
                    )
                for chunk in response.iter_bytes():
                    if skip:
                        drop = min(skip, len(chunk))
                        chunk, skip = chunk[drop:], skip - drop
                    if chunk:
                        chunks.append(chunk[: length - got])
                        got += len(chunks[-1])
                    if got >= length:
                        break
        data = b"".join(chunks)
        if len(data) != length:
            raise CheckpointReadError(
                f"{self.description}/{name}: truncated download (wanted bytes {start}..{start + length}, "
                f"got {len(data)} bytes)",
                hint="retry; if it persists the remote file is shorter than its listed size",
            )
        return data

    def _remote_size(self, name: str) -> int:
        """Size from a HEAD request, for listings that came without sizes."""
        from huggingface_hub import get_hf_file_metadata

        with self._errors(name):
            meta = get_hf_file_metadata(self._url(name), token=self._token, endpoint=_endpoint())
        if meta.size is None:
            raise CheckpointReadError(f"{self.description}/{name}: the hub reports no size for this file")
        return meta.size

    # -- errors -----------------------------------------------------------------------------

    def _file_not_found(self, name: str) -> HubNotFoundError:
        return HubNotFoundError(f"{self.description}/{name}: file not found in the repository", hint=NOT_FOUND_HINT)

    def _not_cached(self, name: str) -> HubOfflineError:
        reason = (self._from_cache and self._cache_reason) or _OFFLINE_REASON
        return HubOfflineError(
            f"{self.description}/{name}: not in the local cache and {reason}",
            hint=OFFLINE_HINT if reason == _OFFLINE_REASON else UNREACHABLE_HINT,
        )

    @contextmanager
    def _errors(self, name: str | None) -> Iterator[None]:
        """Translate huggingface_hub / httpx failures into the library's hub errors."""
        try:
            yield
        except EagleConvertError:
            raise
        except Exception as exc:  # noqa: BLE001 - filtered by _translate, re-raised otherwise
            mapped = self._translate(exc, name)
            if mapped is None:
                raise
            raise mapped from exc

    def _translate(self, exc: Exception, name: str | None) -> EagleConvertError | None:
        import httpx2
        from huggingface_hub.errors import (
            DisabledRepoError,
            EntryNotFoundError,
            FileMetadataError,
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            OfflineModeIsEnabled,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
        from huggingface_hub.utils import HFValidationError

        what = f"{self.description}/{name}" if name else self.description
        if isinstance(exc, GatedRepoError):
            return HubGatedError(f"{self.repo_id}: gated repository, access denied", hint=GATED_HINT)
        if isinstance(exc, RepositoryNotFoundError):
            return HubNotFoundError(f"{self.repo_id}: repository not found on the hub", hint=NOT_FOUND_HINT)
        if isinstance(exc, RevisionNotFoundError):
            return HubNotFoundError(
                f"{self.repo_id}@{self.revision or 'main'}: revision not found on the hub", hint=NOT_FOUND_HINT
            )
        if isinstance(exc, DisabledRepoError):
            return HubNotFoundError(f"{self.repo_id}: repository is disabled on the hub")
        if isinstance(exc, LocalEntryNotFoundError) or isinstance(exc, OfflineModeIsEnabled):
            cause = exc.__cause__
            if not _offline() and isinstance(cause, httpx2.TransportError):
                return self._unreachable(what, cause)
            if not _offline() and isinstance(cause, FileMetadataError):
                return self._not_a_hub(what)
            return HubOfflineError(f"{what}: not in the local cache and {_OFFLINE_REASON}", hint=OFFLINE_HINT)
        if isinstance(exc, EntryNotFoundError):
            return self._file_not_found(name) if name else HubNotFoundError(f"{what}: not found", hint=NOT_FOUND_HINT)
        if isinstance(exc, httpx2.TransportError):
            return self._unreachable(what, exc)
        if isinstance(exc, FileMetadataError):
            return self._not_a_hub(what)
        if isinstance(exc, HfHubHTTPError):
            status = exc.response.status_code if exc.response is not None else None
            if status in (401, 403):
                return HubGatedError(f"{what}: access denied by the hub (HTTP {status})", hint=GATED_HINT)
            if status is not None and (status >= 500 or status in (408, 429)):
                return HubOfflineError(f"{what}: the hub is unavailable (HTTP {status})", hint=UNREACHABLE_HINT)
            return CheckpointReadError(f"{what}: hub request failed (HTTP {status}: {_first_line(exc)})")
        if isinstance(exc, HFValidationError):
            return UsageError(f"{what}: {_first_line(exc)}")
        if isinstance(exc, (httpx2.HTTPError, OSError)) or type(exc).__module__.split(".")[0] in (
            "huggingface_hub",
            "httpx",
            "httpx2",
            "requests",
            "urllib3",
            "hf_xet",
        ):
            return CheckpointReadError(f"{what}: hub request failed ({type(exc).__name__}: {_first_line(exc)})")
        return None

    def _unreachable(self, what: str, exc: BaseException) -> HubOfflineError:
        return HubOfflineError(
            f"{what}: cannot reach the hub at {_endpoint_display()} ({type(exc).__name__})", hint=UNREACHABLE_HINT
        )

    def _not_a_hub(self, what: str) -> CheckpointReadError:
        return CheckpointReadError(
            f"{what}: {_endpoint_display()} does not answer like a Hugging Face Hub endpoint",
            hint="check HF_ENDPOINT",
        )
