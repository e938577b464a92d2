"""What the local Hugging Face cache already holds for a hub repo, read without any network call.

The cache layout is the client's: `models--org--name/refs/<revision>` holds the commit,
`snapshots/<commit>/` the downloaded files, and (written by `snapshot_download`) a private
tree listing with every file's size. Used by `hub.HubSource` when offline or when the hub is
unreachable, and for every read of a file that is already cached.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from eagle_convert.errors import CheckpointReadError

__all__ = ["cached_file", "cached_listing", "known_missing", "pread_cached"]

_COMMIT_RE = re.compile(r"[0-9a-f]{40}")


def cached_listing(
    cache: Path, repo_id: str, revision: str | None
) -> tuple[str, dict[str, int | None], bool] | None:
    """`(commit, sizes, complete)` of `revision` from the cache (snapshot folder + tree listing).

    `complete` says the listing is known to hold every file of the revision (it came from the
    tree listing). None when the cache knows nothing of the revision.
    """
    from huggingface_hub.file_download import repo_folder_name

    storage = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    revision = revision or "main"
    commit: str | None = revision if _COMMIT_RE.fullmatch(revision) else None
    ref = storage / "refs" / revision
    if ref.is_file():
        try:
            commit = ref.read_text().strip()
        except OSError:
            commit = None
    if commit is None:
        return None
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
        return None
    return commit, sizes, complete


def known_missing(cache: Path, repo_id: str, name: str, commit: str | None) -> bool:
    """The cache recorded that `name` does not exist at `commit`."""
    from huggingface_hub import _CACHED_NO_EXIST, try_to_load_from_cache

    return try_to_load_from_cache(repo_id, name, cache_dir=cache, revision=commit) is _CACHED_NO_EXIST


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
