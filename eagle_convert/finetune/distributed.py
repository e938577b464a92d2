"""Data-parallel TTT training from a capture cache: `finetune --nproc N`, or N ranks under torchrun.

Every rank draws the same global batch from the same seeded generator, trains on its part of it
(`batch[rank::world]`) read from the cache (`cache/source.py`, `CachedTarget`: each rank reads only
the sequences of its parts, never the whole cache), and `reference/train.py` sums the scored-token
counts, the loss and the gradients over the ranks (`Ranks`): the optimizer step equals the
one-process step on the whole batch up to fp32 summation order, so one process and N processes
train the same draft. Rank 0 is the `finetune` process itself: it holds the target or the cache
for the held-out EAL and best-step selection, and writes the output; ranks 1..N-1 only train.

Why not `DistributedDataParallel`: it averages gradients over ranks, which weights each rank's
mean loss equally whatever its scored-token count; the trainer normalises by the global batch's
count instead (the one-process loss), so the gradients are summed, in one flat fp32 all-reduce
per step. The drafter runs several TTT steps per batch through the same modules, which DDP's
hooks would have to be told about; the manual all-reduce needs nothing of the sort.

Launch: `finetune --nproc N` spawns ranks 1..N-1 (torch.multiprocessing, spawn start method) and
meets them through a `FileStore` in a temporary folder: gloo on the CPU, nccl with one GPU per rank
when the drafter is on CUDA. Under `torchrun` (WORLD_SIZE set), every rank runs the same
`eagle-convert finetune` command; ranks other than 0 call `serve_torchrun` (the CLI does) and
the group is torchrun's (`env://`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from eagle_convert.errors import EagleConvertError, UsageError

LOG = logging.getLogger(__name__)
TIMEOUT = timedelta(minutes=30)  # rank 0's held-out evaluation runs while the others wait in all_reduce


@dataclass
class Job:
    """What rank 0 sends every other rank: the cache, the drafter's starting weights and the
    `train_draft` keyword arguments of every stage, so each rank makes the same calls."""

    cache: str
    cfg: Any  # the drafter's `DraftConfig`, as rank 0 resolved it (for the release its command's entry named)
    state: dict[str, Any]  # the drafter's state_dict on the CPU
    dtype: str  # the drafter's torch dtype ("float32")
    sequences: list[list[int]]
    stages: list[dict[str, Any]]


class Ranks:
    """This process's rank in the group: `reference/train.py`'s `DataParallel`."""

    def __init__(self, rank: int, world: int, device: Any) -> None:
        self.rank, self.world, self.device = rank, world, device

    def local(self, batch: list[int]) -> list[int]:
        """This rank's part of the global batch: every `world`-th sequence from position `rank`."""
        return batch[self.rank :: self.world]

    def sum(self, values: list[float]) -> list[float]:
        """`values` summed over the ranks, in float64 (token counts are exact; losses for the log)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return [float(v) for v in t.tolist()]

    def reduce_grads(self, params: list[Any]) -> None:
        """Each gradient replaced by its sum over the ranks: one flat fp32 all-reduce."""
        import torch
        import torch.distributed as dist

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1).float() for g in grads])
        dist.all_reduce(flat)
        at = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[at : at + n].view_as(g).to(g.dtype)
            at += n


def backend_for(device: Any) -> str:
    """nccl for a CUDA device, gloo otherwise."""
    import torch

    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def _init_group(device: Any, **how: Any) -> None:
    """`init_process_group` on `device`'s backend, with torch._dynamo imported first.

    torch.distributed.nn.functional and torch.distributed._shard write `group=group.WORLD` as
    default arguments, evaluated when imported; torch._dynamo imports them, and AdamW's constructor
    imports torch._dynamo. Imported after the group exists (a spawned rank's first optimizer), they
    hold it past `destroy_process_group`, whose gloo worker threads are then not joined: one still
    releasing the last all-reduce's tensors when the interpreter shuts down takes the GIL, Python
    ends that thread, and the rank aborts (exit -6, "terminate called without an active exception").
    """
    import torch._dynamo  # noqa: F401  (see above)
    import torch.distributed as dist

    dist.init_process_group(backend_for(device), timeout=TIMEOUT, **how)


def torchrun_world() -> tuple[int, int] | None:
    """(rank, world size) when this process is one of several started by torchrun, else None."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return (int(os.environ.get("RANK", "0")), world) if world > 1 else None


def _rank_device(device: Any, rank: int) -> Any:
    """Rank `rank`'s device: the CPU, or the `rank`-th (torchrun: LOCAL_RANK-th) GPU."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", rank)) if torchrun_world() else (dev.index or 0) + rank
    return torch.device("cuda", local)


def _check_devices(device: Any, nproc: int) -> None:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and (dev.index or 0) + nproc > torch.cuda.device_count():
        raise UsageError(
            f"{{nproc={nproc}}}: needs {nproc} GPUs from {dev}, torch sees {torch.cuda.device_count()}; "
            "pass a smaller {nproc}",
            options=("nproc",),
        )


@contextmanager
def launch(nproc: int, device: Any) -> Iterator[Ranks]:
    """Rank 0 of an `nproc`-process group, here; ranks 1..nproc-1 spawned and serving (`serve`).

    Under torchrun the group is torchrun's and nothing is spawned. The caller sends the `Job`
    (`Ranks` then `send`) and trains; on exit the group is closed and the workers joined.

    Raises:
        UsageError: more GPUs asked than torch sees.
        EagleConvertError: a rank failed.
    """
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    tr = torchrun_world()
    if tr is not None:
        _init_group(device, init_method="env://")
        try:
            yield Ranks(0, tr[1], _rank_device(device, 0))
        finally:
            dist.destroy_process_group()
        return
    _check_devices(device, nproc)
    tmp = tempfile.mkdtemp(prefix="eagle-convert-ddp-")
    path = str(Path(tmp) / "store")
    ctx = mp.get_context("spawn")
    threads = max(1, (os.cpu_count() or 1) // nproc)
    dev = str(torch.device(device))
    procs = [ctx.Process(target=_spawned, args=(r, nproc, path, dev, threads), daemon=True) for r in range(1, nproc)]
    for p in procs:
        p.start()
    ok = False
    try:
        store = dist.FileStore(path, nproc)
        _wait_for_ranks(store, procs)
        _init_group(device, store=store, rank=0, world_size=nproc)
        try:
            yield Ranks(0, nproc, _rank_device(device, 0))
            ok = True
        finally:
            dist.destroy_process_group()
    finally:
        for p in procs:
            p.join(timeout=60 if ok else 5)
            if p.is_alive():
                p.terminate()
                p.join()
        shutil.rmtree(tmp, ignore_errors=True)
    bad = [(r, p.exitcode) for r, p in enumerate(procs, start=1) if p.exitcode != 0]
    if bad:
        raise EagleConvertError(f"data-parallel training: rank {bad[0][0]} exited with code {bad[0][1]}")


def _wait_for_ranks(store: Any, procs: list[Any]) -> None:
    """Until every spawned rank has started (its `ready` key), failing at once if one has died:
    the process group's own rendezvous would wait for it the whole `TIMEOUT`."""
    for rank, p in enumerate(procs, start=1):
        while True:
            try:
                store.wait([f"ready-{rank}"], timedelta(seconds=1))
                break
            except RuntimeError:  # not yet: is it still alive?
                if not p.is_alive():
                    raise EagleConvertError(
                        f"data-parallel training: rank {rank} exited with code {p.exitcode} before it started"
                    ) from None


def send(ranks: Ranks, job: Job) -> None:
    """Rank 0: the job to every other rank."""
    import torch.distributed as dist

    dist.broadcast_object_list([job], src=0, device=ranks.device)


def serve(ranks: Ranks) -> None:
    """A rank other than 0: receive the job, build the drafter from its weights, train every
    stage as rank 0 does (no evaluation, nothing written)."""
    import torch
    import torch.distributed as dist

    from eagle_convert.cache import CachedTarget
    from eagle_convert.reference import drafter_from_state_dict, train_draft

    got: list[Any] = [None]
    dist.broadcast_object_list(got, src=0, device=ranks.device)
    job: Job = got[0]
    source = CachedTarget(job.cache, device=ranks.device)
    drafter = drafter_from_state_dict(job.cfg, job.state, dtype=getattr(torch, job.dtype), device=ranks.device)
    for kw in job.stages:
        train_draft(source, drafter, job.sequences, parallel=ranks, cache_target=False, **kw)


def _spawned(rank: int, world: int, path: str, device: str, threads: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dev = _rank_device(device, rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    store = dist.FileStore(path, world)
    store.set(f"ready-{rank}", "1")
    _init_group(dev, store=store, rank=rank, world_size=world)
    try:
        serve(Ranks(rank, world, dev))
    finally:
        dist.destroy_process_group()


def serve_torchrun(device: str | None = None) -> None:
    """A torchrun rank other than 0: join torchrun's group and serve rank 0's job.

    Args:
        device: "cpu" or "cuda" (None: CUDA when torch sees a GPU); the rank uses GPU LOCAL_RANK.
    """
    import torch
    import torch.distributed as dist

    tr = torchrun_world()
    if tr is None:
        raise UsageError("serve_torchrun: not started by torchrun (no WORLD_SIZE > 1)")
    base = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dev = _rank_device(base, tr[0])
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    else:  # the node's cores shared between its ranks, as `launch` spawns them
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", tr[1]))))
    _init_group(dev, init_method="env://")
    try:
        serve(Ranks(tr[0], tr[1], dev))
    finally:
        dist.destroy_process_group()


@contextmanager
def temporary_capture(
    target: Path, draft: Path, sequences: Sequence[Sequence[int]], out: Path, tgt: Any, release: Any, say: Any
) -> Iterator[Path]:
    """A capture of `sequences` by the loaded reference target `tgt` (fp32, as online training
    reads it), in a hidden sibling of `out` (on the output's file system, which every torchrun node
    must see), removed afterwards."""
    from eagle_convert.cache import CaptureOptions, capture_cache
    from eagle_convert.finetune.plan import FinetuneEvent

    folder = out.parent / f".{out.name}.capture-{os.getpid()}"
    say(FinetuneEvent("features", "capturing the training sequences for data-parallel training"))
    try:
        opts = CaptureOptions(engine="reference")
        capture_cache(target, draft, sequences, folder, opts, reference_target=tgt, force=True, release=release)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def job_for(
    cache: str | Path,
    drafter: Any,
    sequences: Sequence[Sequence[int]],
    stages: list[dict[str, Any]],
) -> Job:
    """The job of a run: the drafter's current weights (CPU copies) and each stage's arguments."""
    state = {k: v.detach().cpu().clone() for k, v in drafter.state_dict().items()}
    dtype = str(drafter.norm.weight.dtype).removeprefix("torch.")
    return Job(str(cache), drafter.cfg, state, dtype, [list(s) for s in sequences], stages)
