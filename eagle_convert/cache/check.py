"""Whether a capture cache serves a draft and a target: refused before anything trains on it.

A cache holds the target's features at the aux layer ids and on the draft vocabulary it was
captured for (`cache/store.py`'s plan). Training or calibrating another draft from it is fine when
those agree (capture once, then fine-tune the EAGLE-3 draft, its upgrade, ... from one cache); a
mismatch is one line naming the manifest field and the fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eagle_convert.cache.store import MANIFEST, Manifest, read_manifest
from eagle_convert.errors import UsageError

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release


def check_cache(
    folder: str | Path,
    *,
    target: Path,
    aux_ids: Sequence[int],
    draft: Path | None = None,
    release: Release | None = None,
) -> Manifest:
    """The cache's manifest, once it is known to serve a draft (its aux ids and vocabulary) on `target`.

    Args:
        folder: the cache folder.
        target: the target folder the user named.
        aux_ids: the draft's aux layer ids (as the trainer reads them).
        draft: the draft folder that will train from it: its vocabulary must be the cache's (the
            logits are stored on it); None skips that check (calibration reads only aux states).
        release: with `draft`, the vLLM release whose reading of the draft the check follows (the
            command's entry resolves it; no default below the entry).

    Returns:
        The manifest.

    Raises:
        UsageError: not a cache, incomplete, or captured for another target, aux ids or vocabulary.
    """
    folder = Path(folder)
    man = read_manifest(folder)
    where = folder / MANIFEST
    fix = f"capture for it (eagle-convert capture --target {target} --draft {draft or 'DRAFT'} --out NEW_CACHE)"
    if Path(man.plan.target).resolve() != Path(target).resolve():
        raise UsageError(
            f"{where}: target is {man.plan.target}, not {{target={target}}}; {fix}", options=("target",), file=where
        )
    if list(man.plan.aux_ids) != sorted(set(int(i) for i in aux_ids)):
        raise UsageError(
            f"{where}: aux_ids {list(man.plan.aux_ids)} differ from the draft's aux layer ids "
            f"{sorted(set(aux_ids))}; {fix}"
        )
    if draft is not None:
        assert release is not None, "check_cache: a draft's vocabulary is read for a release; pass it"
        from eagle_convert.cache.capture import draft_features_spec
        from eagle_convert.draft import load_target

        _, rows = draft_features_spec(draft, int(load_target(target).num_layers or 0), release)
        if hashlib.sha256(json.dumps(rows).encode()).hexdigest() != man.plan.rows_sha256:
            raise UsageError(f"{where}: rows_sha256 is another draft vocabulary than {draft}'s (d2t); {fix}")
    if not man.complete():
        missing = len(list(man.plan.shards())) - len(man.shards)
        raise UsageError(f"{where}: capture incomplete ({missing} shards missing); run the same capture again")
    return man
