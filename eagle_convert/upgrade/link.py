"""`apply_link(link_plan, out)`: execute a `LinkPlan` atomically and verify it without re-reading the weights.

Each input weight file is reflinked, else hard-linked, else copied (`io.links.link_or_copy`) into
the hidden temp sibling `upgrade.apply` also uses; then the new fc_norm shard, the index and the
config are written and checked, and the folder is published with one rename.

Hard links share the inode with the input. Nothing eagle-convert does afterwards writes into an
existing file: outputs are built in a fresh temp folder (`io.atomic.atomic_output_dir`, files
created with `O_EXCL`), `--force` swaps the old folder out and unlinks it (which leaves the
input's data alone), and verification opens read-only. A user's own tool that edits a weight file
in place would change the input too; the CLI says so.
"""

from __future__ import annotations

import time
from pathlib import Path

from eagle_convert.draft import CARD_FILE
from eagle_convert.io import (
    INDEX_FILENAME,
    LinkOutcome,
    OutFile,
    atomic_output_dir,
    flush_early,
    link_or_copy,
    same_bytes_cheaply,
    verify_file,
    verify_same_bytes,
    write_file,
)
from eagle_convert.upgrade.apply import Progress, UpgradeResult, check_output, verify_against_plan, write_errors
from eagle_convert.upgrade.linkplan import LinkPlan
from eagle_convert.upgrade.preflight import refuse_invalid_output


def apply_link(
    lp: LinkPlan,
    out: str | Path,
    *,
    force: bool = False,
    verify: bool = True,
    progress: Progress | None = None,
    fsync: bool = True,
) -> UpgradeResult:
    """Write `lp` to `out` (atomically; durably unless `fsync=False`) and, unless `verify=False`,
    check it before publishing."""
    plan = lp.plan
    refuse_invalid_output(plan)  # the linked output holds the plan's tensors and config
    final = check_output(plan, Path(out), force=force)
    paths = {f.filename: plan.checkpoint.source.local_path(f.source) for f in lp.linked}  # hub: downloads
    shard = OutFile(lp.shard.filename, lp.shard.tensors, lp.shard.metadata)
    t0 = time.perf_counter()
    written: dict[str, int] = {}
    links: dict[str, LinkOutcome] = {}
    with write_errors(out, plan.source):
        with atomic_output_dir(final, force=force, fsync=fsync) as tmp:
            if progress:
                progress.start("write", lp.linked_bytes + shard.data_bytes)
            for f in lp.linked:
                links[f.filename] = link_or_copy(
                    paths[f.filename], tmp / f.filename, progress=progress.advance if progress else None
                )
                if progress and links[f.filename].method != "copy":
                    progress.advance(f.bytes)
                if links[f.filename].method == "copy":
                    flush_early(tmp / f.filename)  # to disk while the rest is written and verified
                written[f.filename] = (tmp / f.filename).stat().st_size
            written[shard.filename] = write_file(tmp, shard).stat().st_size
            for name, text in (
                (INDEX_FILENAME, lp.index_json),
                ("config.json", lp.config_json()),
                (CARD_FILE, plan.readme),
            ):
                with open(tmp / name, "x", encoding="utf-8") as fh:
                    fh.write(text)
                written[name] = (tmp / name).stat().st_size
            t1 = time.perf_counter()
            if verify:
                _verify(lp, tmp, shard, paths, links, written, progress)
            t2 = time.perf_counter()
    return UpgradeResult(
        final,
        written,
        verify,
        t1 - t0,
        t2 - t1,
        links={k: v.method for k, v in links.items()},
        link_notes={k: v.why for k, v in links.items() if v.why},
    )


def _verify(
    lp: LinkPlan,
    tmp: Path,
    shard: OutFile,
    paths: dict[str, Path],
    links: dict[str, LinkOutcome],
    written: dict[str, int],
    progress: Progress | None,
) -> None:
    """Linked files by inode or extents (bytes only where neither proves it), the new shard byte for
    byte, index and config against the plan; then re-describe the output."""
    problems: list[str] = []
    compare = {
        name: paths[name] for name, o in links.items() if not same_bytes_cheaply(paths[name], tmp / name, o.method)
    }
    if progress:
        progress.start("verify", sum(written[n] for n in compare) + shard.data_bytes)
    for name, src in compare.items():
        problems += verify_same_bytes(tmp / name, src, progress=progress.advance if progress else None)
    problems += verify_file(tmp / shard.filename, shard, progress=progress.advance if progress else None)
    verify_against_plan(
        lp.plan,
        tmp,
        problems,
        index=lp.index_json,
        config=lp.config_after,
        sizes=lp.output_files,
        written=written,
        what="linked output",
    )
