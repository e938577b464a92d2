"""`HubSource`: a checkpoint in a Hugging Face Hub model repo, read through `huggingface_hub`'s public API.

Reads only what is asked for: the file listing comes from one model-info call (`?blobs=1` for
sizes), small non-weight files (config.json, index json) are downloaded into the normal HF cache
with `hf_hub_download` (so they are available offline later), and everything else — safetensors
headers, `.bin` zip directories, small tensors such as d2t/t2d — is fetched with HTTP `Range`
requests against the `resolve` URL of the pinned commit. Files already in the local HF cache are
read from disk.

Why a hand-written range reader (`_fetch_range`, on the client's `http_stream_backoff`) remains,
as measured with huggingface_hub 2.4.0 against `tests/hubserver.py`:
- `HfApi.get_safetensors_metadata` / `parse_safetensors_file_metadata` only talk to the network
  (offline: `OfflineModeIsEnabled`; the HF cache is never read), only find `model.safetensors` or
  `model.safetensors.index.json` (not a NeMo sub-folder, not `.bin`), first ask for bytes
  0..100000 however small the header (100,001 bytes served for a 152-byte header), and give
  tensor offsets relative to the data section without the header length, so the bytes of
  d2t/t2d cannot be addressed from their answer.
- `HfFileSystem` serves ranges against the test server only when opened with
  `cache_type="none"` (its default read-ahead block, and `cat_file(start=, end=)`, downloaded the
  whole 3 MiB file for an 8-byte read); it never reads the HF cache (offline:
  `OfflineModeIsEnabled`); it folds missing repo/revision/file into `FileNotFoundError`; and when
  a server or proxy answers a Range request with 200 and the whole file, it returns the wrong
  bytes (asked for bytes 100..108, got bytes 0..8). `_fetch_range` checks the answer (206 with
  the asked `Content-Range` start, or 200 skipped to the start) and stops after `length` bytes.

The environment is read on every call, not at import time like `huggingface_hub.constants`:
`HF_ENDPOINT`, `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`), `HF_HOME` / `HF_HUB_CACHE`, and
`HF_TOKEN` (through the client's own `get_token`).

Every failure leaves as one of `HubNotFoundError`, `HubGatedError`, `HubOfflineError` or
`CheckpointReadError` with a one-line message; no `huggingface_hub` / `httpx2` exception escapes.

The environment is read in `hub_env`, the local cache in `hub_cache`, and client failures are
mapped in `hub_errors`.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path

from eagle_convert.errors import CheckpointReadError, EagleConvertError, HubNotFoundError, HubOfflineError, UsageError
from eagle_convert.io.hub_cache import cached_file, cached_listing, known_missing, pread_cached
from eagle_convert.io.hub_env import OFFLINE_REASON as _OFFLINE_REASON
from eagle_convert.io.hub_env import default_cache_dir as _default_cache_dir
from eagle_convert.io.hub_env import endpoint as _endpoint
from eagle_convert.io.hub_env import endpoint_display as _endpoint_display
from eagle_convert.io.hub_env import offline as _offline
from eagle_convert.io.hub_errors import OFFLINE_HINT, file_not_found, not_cached, translated, unreachable_errors

#: Files at most this large that are not weights are downloaded whole (and cached) on first read.
SMALL_FILE_BYTES = 4 << 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")

_LIBRARY_NAME = "eagle-convert"
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
        raise UsageError(f"{text}: not a valid hub reference", hint="use hf://org/name or hf://org/name@revision")
    return None


def _valid_repo_id(repo_id: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


# -- the source -------------------------------------------------------------------------------


_RANGE_CACHE_ITEM = 1 << 20  # cache a fetched range up to 1 MiB ...
_RANGE_CACHE_TOTAL = 16 << 20  # ... and at most 16 MiB per source


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
        # Small ranges fetched once per source (headers, d2t/t2d): the preflight, the model card's
        # matrix and validate read the same bytes of one revision, which never change under it.
        self._ranges: dict[tuple[str, int, int], bytes] = {}
        self._ranges_bytes = 0

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
        key = (name, start, length)
        if key in self._ranges:
            return self._ranges[key]
        data = self._fetch_range(name, start, length)
        if length <= _RANGE_CACHE_ITEM and self._ranges_bytes + length <= _RANGE_CACHE_TOTAL:
            self._ranges[key] = data
            self._ranges_bytes += length
        return data

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
        from huggingface_hub import HfApi
        from huggingface_hub.errors import OfflineModeIsEnabled

        api = HfApi(endpoint=_endpoint(), token=self._token, library_name=_LIBRARY_NAME)
        fallback: tuple[type[BaseException], ...] = (*unreachable_errors(), OfflineModeIsEnabled)
        with self._errors(None):
            try:
                info = api.model_info(self.repo_id, revision=self.revision, files_metadata=True)
            except fallback as exc:
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
        found = cached_listing(self._cache(), self.repo_id, self.revision)
        if found is None:
            return False
        self._commit, self._sizes, self._complete = found
        self._from_cache = True
        self._cache_reason = reason
        return True

    def _missing(self, name: str) -> EagleConvertError:
        if self._from_cache and not self._complete:
            if not known_missing(self._cache(), self.repo_id, name, self._commit):
                return self._not_cached(name)
        return self._file_not_found(name)

    # -- bytes ------------------------------------------------------------------------------

    def _cache(self) -> Path:
        return self._cache_dir if self._cache_dir is not None else _default_cache_dir()

    def _cached(self, name: str) -> Path | None:
        """The file in the local HF cache for the pinned commit, without any network call."""
        return cached_file(self._cache(), self.repo_id, name, self._commit or self.revision)

    def _pread(self, path: Path, name: str, start: int, length: int) -> bytes:
        return pread_cached(path, self.description, name, start, length)

    def _url(self, name: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, name, revision=self._commit or self.revision, endpoint=_endpoint())

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        headers = build_hf_headers(token=self._token, library_name=_LIBRARY_NAME)
        headers["Accept-Encoding"] = "identity"
        return headers

    def _fetch_range(self, name: str, start: int, length: int) -> bytes:
        """`length` bytes at `start` with one HTTP Range request (redirects to a CDN are followed).

        Not `HfFileSystem`: it returns the wrong bytes when a server ignores Range (see the module docstring).
        """
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
        return file_not_found(self.description, name)

    def _not_cached(self, name: str) -> HubOfflineError:
        return not_cached(self.description, name, (self._from_cache and self._cache_reason) or _OFFLINE_REASON)

    def _errors(self, name: str | None) -> AbstractContextManager[None]:
        """Translate huggingface_hub / httpx2 failures into the library's hub errors."""
        return translated(self.repo_id, self.revision, self.description, name)
