"""What the local Hugging Face cache already holds for a hub repo, read without any network call.

Everything goes through the client's public cache API: `scan_cache_dir` (refs -> commit, and the
files of that commit's snapshot), `get_cached_repo_tree` (the complete file listing with sizes,
written by `snapshot_download`) and `try_to_load_from_cache` (one file, or the client's record
that it does not exist). Used by `hub.HubSource` when offline or when the hub is unreachable, and
for every read of a file that is already cached.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from eagle_convert.errors import CheckpointReadError

if TYPE_CHECKING:  # the client is imported lazily: it costs import time
    from huggingface_hub import CachedRevisionInfo, RepoFile

_COMMIT_RE = re.compile(r"[0-9a-f]{40}")


def cached_listing(
    cache: Path, repo_id: str, revision: str | None
) -> tuple[str | None, dict[str, int | None], bool] | None:
    """`(commit, sizes, complete)` of `revision` from the cache (snapshot files + cached tree listing).

    `complete` says the listing is known to hold every file of the revision (it came from the
    tree listing). None when the cache knows nothing of the revision. The commit is None only
    when the tree listing is cached but the client's scanner cannot resolve the revision (a
    repo folder it reports as damaged); reads then go by revision name.
    """
    revision = revision or "main"
    snapshot = _cached_revision(cache, repo_id, revision)
    commit = snapshot.commit_hash if snapshot is not None else None
    if commit is None and _COMMIT_RE.fullmatch(revision):
        commit = revision
    tree = _cached_tree(cache, repo_id, commit or revision)
    if snapshot is None and tree is None:
        return None
    sizes: dict[str, int | None] = {}
    for entry in tree or ():
        sizes[entry.path] = entry.size
    if snapshot is not None:
        for file in snapshot.files:
            sizes[file.file_path.relative_to(snapshot.snapshot_path).as_posix()] = file.size_on_disk
    return commit, sizes, tree is not None


def _cached_revision(cache: Path, repo_id: str, revision: str) -> CachedRevisionInfo | None:
    """The cached snapshot of `revision` (a ref name or a commit), per the client's cache scanner.

    `scan_cache_dir` reads the whole cache folder (a stat per cached file, no network): it runs
    once per offline or unreachable listing. A repo folder the scanner reports as damaged (a ref
    to a missing snapshot, a broken link) counts as not cached.
    """
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache)
    except (CacheNotFound, OSError, ValueError):  # no cache folder yet, or not a folder
        return None
    for repo in info.repos:
        if repo.repo_type != "model" or repo.repo_id != repo_id:
            continue
        found = repo.refs.get(revision)
        if found is None:
            found = next((rev for rev in repo.revisions if rev.commit_hash == revision), None)
        return found
    return None


def _cached_tree(cache: Path, repo_id: str, revision: str) -> list[RepoFile] | None:
    """The complete listing `snapshot_download` cached for `revision`, if any."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        return get_cached_repo_tree(repo_id, revision=revision, cache_dir=cache)
    except (CachedRepoTreeNotFoundError, OSError, ValueError):  # ValueError: an unreadable ref / id
        return None


def known_missing(cache: Path, repo_id: str, name: str, commit: str | None) -> bool:
    """The cache recorded that `name` does not exist at `commit`.

    `try_to_load_from_cache` answers a path (cached), None (unknown) or its documented
    "cached as non-existent" sentinel, which is neither.
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, name, cache_dir=cache, revision=commit)
    except Exception:  # noqa: BLE001 - a cache probe must never fail the read
        return False
    return found is not None and not isinstance(found, str)


def cached_file(cache: Path, repo_id: str, name: str, revision: str | None) -> Path | None:
    """The file in the local HF cache for `revision` (a commit, preferably), if there."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, name, cache_dir=cache, revision=revision)
    except Exception:  # noqa: BLE001 - a cache probe must never fail the read
        return None
    return Path(found) if isinstance(found, str) else None


def pread_cached(path: Path, description: str, name: str, start: int, length: int) -> bytes:
    """`length` bytes at `start` of the cached copy `path` of `description`/`name`."""
    try:
        with open(path, "rb") as fh:
            data = os.pread(fh.fileno(), length, start)
    except OSError as exc:
        raise CheckpointReadError(
            f"{description}/{name}: cannot read the cached copy {path} ({exc.strerror or exc})",
            hint="delete it from the HF cache and retry",
        ) from exc
    if len(data) != length:
        raise CheckpointReadError(
            f"{description}/{name}: cached copy {path} is truncated "
            f"(wanted bytes {start}..{start + length}, file has {start + len(data)})",
            hint="delete it from the HF cache and retry",
        )
    return data
