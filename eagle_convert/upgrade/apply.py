"""`apply_upgrade(plan, out)`: execute an `UpgradePlan` atomically, streamed, and verify the result.

Carried-over tensors are copied as byte ranges of their input files (`writer.write_file`, which
uses `os.copy_file_range`); nothing is decoded, so memory does not grow with the checkpoint. The
output is built in a hidden temp sibling of `out` and renamed into place only after verification,
so an error, Ctrl-C or SIGTERM leaves neither a partial output nor a changed input.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from eagle_convert.draft import CARD_FILE, describe, open_checkpoint
from eagle_convert.errors import CheckpointReadError, EagleConvertError, OutputError, VerificationError
from eagle_convert.io import (
    INDEX_FILENAME,
    ByteRange,
    LocalSource,
    OutFile,
    OutputExistsError,
    OutTensor,
    TrailingVerifier,
    WriterError,
    atomic_output_dir,
    check_output_dir,
    flush_early,
    read_json,
    verify_file,
    write_file,
    write_index,
)
from eagle_convert.jsonable import dump
from eagle_convert.upgrade.outfiles import index_json
from eagle_convert.upgrade.plan import UpgradePlan
from eagle_convert.upgrade.preflight import refuse_invalid_output


class Progress(Protocol):
    """Receives byte counts: `start(phase, total)` once per phase ("write", "verify"), then `advance(n)`."""

    def start(self, phase: str, total: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...


@dataclass
class UpgradeResult:
    """What `apply_upgrade` wrote: the output folder, each file's bytes, the verification and timings."""

    out: Path
    files: dict[str, int]  # file name -> bytes written
    verified: bool
    write_seconds: float
    verify_seconds: float
    links: dict[str, str] = field(default_factory=dict)  # --link: file -> reflink | hardlink | copy
    link_notes: dict[str, str] = field(default_factory=dict)  # file -> why a preferred method failed

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    def to_dict(self) -> dict[str, object]:
        links = {"links": self.links, "link_notes": self.link_notes} if self.links else {}
        return dump(self, "out files total_bytes verified write_seconds:3 verify_seconds:3") | links


def check_output(plan: UpgradePlan, out: Path, *, force: bool = False) -> Path:
    """Refuse an output that is the input, inside it, contains it, or exists without `force`."""
    root = getattr(plan.checkpoint.source, "root", None)  # None for hub inputs
    return check_output_dir(out, {"input checkpoint": root}, force=force)


@contextmanager
def write_errors(out: str | Path, source: object) -> Iterator[None]:
    """Map failures while writing an upgrade's output to one-line errors (copy and link writers share it)."""
    try:
        yield
    except OutputExistsError as exc:
        raise OutputExistsError(out) from exc  # named as the caller gave it (io names the absolute path)
    except WriterError as exc:
        raise CheckpointReadError(f"{source}: {exc}", hint="the input changed while upgrading; retry") from exc
    except EagleConvertError:
        raise
    except OSError as exc:
        where = exc.filename or out
        raise OutputError(
            f"{where}: cannot write the output ({exc.strerror or exc})", hint="check free space and permissions"
        ) from exc


def apply_upgrade(
    plan: UpgradePlan,
    out: str | Path,
    *,
    force: bool = False,
    verify: bool = True,
    progress: Progress | None = None,
    fsync: bool = True,
) -> UpgradeResult:
    """Write the plan to `out` (atomically) and, unless `verify=False`, check it before publishing.

    With `fsync` (the default) the output is on stable storage when this returns
    (`io.atomic.atomic_output_dir`); `fsync=False` is for scratch outputs.

    Args:
        plan: the plan `plan_upgrade` made.
        out: the output folder (new, or replaced with `force`).
        force: replace an existing `out` (atomically, after the new one is verified).
        verify: compare every output byte with its source and re-describe the output.
        progress: receives the bytes written.
        fsync: flush every file and folder before publishing.

    Returns:
        What was written (files and sizes, timings, the verification).

    Raises:
        UpgradeRefusedError: `validate` would reject the output (`upgrade.preflight`).
        OutputError: `out` exists without `force`, is the input, inside it or contains it, cannot be
            written, or another run is writing it (`OutputLockedError`).
        VerificationError: the written output differs from the plan (nothing is published).
    """
    refuse_invalid_output(plan)
    final = check_output(plan, Path(out), force=force)
    files = _out_files(plan)
    t0 = time.perf_counter()
    written: dict[str, int] = {}
    compared: dict[str, set[int]] = {}  # file -> tensors compared equal while written
    with write_errors(out, plan.source):
        with atomic_output_dir(final, force=force, fsync=fsync) as tmp:
            if progress:
                progress.start("write", sum(f.data_bytes for f in files))
            for f in files:
                # Verified: each carried tensor is compared as soon as it is written (io.trailing).
                with TrailingVerifier(tmp / f.filename, f) if verify else nullcontext() as trailing:
                    path = write_file(tmp, f, progress=_progress(progress, trailing))
                    flush_early(path)  # to disk while the next file is written and the output verified
                compared[f.filename] = trailing.verified if trailing else set()
                written[f.filename] = path.stat().st_size
            if plan.sharded:
                written[INDEX_FILENAME] = write_index(tmp, files).stat().st_size
            (tmp / "config.json").write_text(plan.config_json(), encoding="utf-8")
            written["config.json"] = (tmp / "config.json").stat().st_size
            (tmp / CARD_FILE).write_text(plan.readme, encoding="utf-8")
            written[CARD_FILE] = (tmp / CARD_FILE).stat().st_size
            t1 = time.perf_counter()
            if verify:
                _verify(plan, tmp, files, written, progress, compared)
            t2 = time.perf_counter()
    return UpgradeResult(final, written, verify, t1 - t0, t2 - t1)


def _out_files(plan: UpgradePlan) -> list[OutFile]:
    """The plan's files with each carried byte range pointing at a local file: the plan names
    files inside the checkpoint; hub inputs download their weight files (only those) here."""
    ckpt = plan.checkpoint
    paths = {name: ckpt.source.local_path(name) for name in ckpt.weight_files}

    def local(t: OutTensor) -> OutTensor:
        if not isinstance(t.source, ByteRange):
            return t
        return replace(t, source=replace(t.source, path=paths[str(t.source.path)]))

    return [OutFile(f.filename, [local(t) for t in f.tensors], f.metadata) for f in plan.files]


def _progress(progress: Progress | None, trailing: TrailingVerifier | None) -> Callable[[int], None] | None:
    """The writer's byte callback: the progress bar's, and the trailing verifier's."""
    if trailing is None:
        return progress.advance if progress else None
    if progress is None:
        return trailing.advanced

    def both(nbytes: int) -> None:
        trailing.advanced(nbytes)
        progress.advance(nbytes)

    return both


def _verify(
    plan: UpgradePlan,
    tmp: Path,
    files: list[OutFile],
    written: dict[str, int],
    progress: Progress | None,
    compared: dict[str, set[int]],
) -> None:
    """Every byte of every file, the index and the config against the plan; then re-describe the output."""
    if progress:
        progress.start("verify", sum(f.data_bytes for f in files))
    # The last written file first, while it is in the page cache (io.samebytes); problems in file order.
    found = {
        f.filename: verify_file(
            tmp / f.filename, f, progress=progress.advance if progress else None, compared=compared[f.filename]
        )
        for f in files[::-1]
    }
    problems = [p for f in files for p in found[f.filename]]
    verify_against_plan(
        plan,
        tmp,
        problems,
        index=index_json(plan.files) if plan.sharded else None,
        config=plan.config_after,
        sizes=plan.output_files,
        written=written,
    )


def verify_against_plan(
    plan: UpgradePlan,
    tmp: Path,
    problems: list[str],
    *,
    index: str | None,
    config: dict[str, Any],
    sizes: dict[str, int],
    written: dict[str, int],
    what: str = "upgraded output",
) -> None:
    """What every upgrade output is checked for after its weight files (`problems` so far): the index
    text (None: no index), config and model card against the plan, each file's size, then the output
    re-described. Raises `VerificationError` with the first problem, naming files, not the temp dir."""
    if index is not None and (tmp / INDEX_FILENAME).read_text(encoding="utf-8") != index:
        problems.append(f"{INDEX_FILENAME}: weight map differs from the plan")
    if read_json(LocalSource(tmp), "config.json") != config:
        problems.append("config.json differs from the plan")
    if (tmp / CARD_FILE).read_text(encoding="utf-8") != plan.readme:
        problems.append(f"{CARD_FILE} differs from the plan")
    for name, size in sizes.items():
        if written.get(name) != size:
            problems.append(f"{name}: {written.get(name)} bytes written, plan said {size}")
    if not problems:
        problems += _recheck(plan, tmp)
    problems = [p.replace(f"{tmp}/", "") for p in problems]
    if problems:
        raise VerificationError(
            f"{plan.source}: {what} failed verification: {problems[0]}"
            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
            hint="nothing was written; report this as a bug",
        )


def _recheck(plan: UpgradePlan, tmp: Path) -> list[str]:
    """Describe the written output like any input: it must now be EAGLE-3.1 as planned."""
    info = describe(open_checkpoint(tmp), plan.release, read_vocab=False)
    want = {
        "variant": "EAGLE-3.1",
        "num_aux": plan.num_aux,
        "fc_norm": True,
        "norm_output": plan.norm_output,
        "norm_before_fc": False,
        "aux_layer_ids": list(plan.aux.ids),
    }
    got = {
        "variant": info.variant,
        "num_aux": info.num_aux,
        "fc_norm": info.flags["fc_norm"].value,
        "norm_output": info.flags["norm_output"].value,
        "norm_before_fc": info.flags["norm_before_fc"].value,
        "aux_layer_ids": info.aux_layer_ids,
    }
    problems = [f"{k} is {got[k]!r}, plan said {v!r}" for k, v in want.items() if got[k] != v]
    planned = {t.name for f in plan.files for t in f.tensors}
    if set(info.canonical) != planned:
        problems.append(f"tensor names differ from the plan: {sorted(set(info.canonical) ^ planned)[:3]}")
    return problems
