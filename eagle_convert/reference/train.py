"""The TTT trainer: the optimizer loop over the target's features (AdamW, warmup then cosine, L2-SP,
the best held-out step kept, one rank of a data-parallel run) and writing the trained draft.

The TTT step itself (EAGLE-3's training-time test) is `ttt.py`; the batches and features `batches.py`.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from eagle_convert.reference.batches import FeatureSource, last_positions, pad_batch, pad_rows, target_features
from eagle_convert.reference.drafter import EagleDrafter
from eagle_convert.reference.select import KeepBest, expected_acceptance_length
from eagle_convert.reference.target import TargetModel
from eagle_convert.reference.ttt import ttt_loss, ttt_token_counts

LOG = logging.getLogger(__name__)


@dataclass
class TrainResult:
    losses: list[float]
    step_acc: list[float]  # argmax agreement per TTT step over the last logging window
    seconds: float
    eal_history: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out EAL); step 0 = start
    best_step: int | None = None  # the step whose weights the drafter holds at the end (with `evaluate`)
    best_eal: float | None = None


@dataclass
class StepInfo:
    """What `train_draft` reports to `on_step` after every optimizer step."""

    step: int  # 1-based
    steps: int
    loss: float
    lr: float
    step_acc: list[float]  # this batch's argmax agreement per TTT step
    eal: float | None = None  # held-out expected acceptance length, when evaluated at this step
    best: bool = False  # the best EAL so far: these weights are kept


def trainable_names(drafter: EagleDrafter, trainable: str | Sequence[str]) -> list[str]:
    """`"all"`: every parameter but the (target-shared) embedding; `"fc_norm"`: the 3.1 norms;
    otherwise fnmatch patterns over canonical names."""
    names = [n for n, _ in drafter.named_parameters()]
    if trainable == "all":
        return [n for n in names if n != "embed_tokens.weight"]
    pats = ["fc_norm.*"] if trainable == "fc_norm" else [trainable] if isinstance(trainable, str) else list(trainable)
    picked = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not picked:
        raise ValueError(f"no draft parameter matches {pats}")
    return picked


class DataParallel(Protocol):
    """One rank of a data-parallel run (`finetune/distributed.py`): every rank draws the same global
    batch, trains on its part of it, and the sums below make the step the one-process step."""

    rank: int

    def local(self, batch: list[int]) -> list[int]:
        """This rank's part of the global batch (sequence indices)."""
        ...

    def sum(self, values: list[float]) -> list[float]:
        """``values`` summed over every rank."""
        ...

    def reduce_grads(self, params: list[Tensor]) -> None:
        """Replace each parameter's gradient with its sum over every rank."""
        ...


def train_draft(
    target: TargetModel | FeatureSource,
    drafter: EagleDrafter,
    sequences: list[list[int]],
    *,
    aux_ids: Sequence[int],
    ttt_steps: int = 3,
    steps: int,
    lr: float,
    seed: int = 0,
    trainable: str | Sequence[str] = "all",
    l2sp: float = 0.0,
    log_every: int = 10,
    batch_size: int = 8,
    loss_decay: float = 0.8,
    cache_target: bool = True,
    on_step: Callable[[StepInfo], None] | None = None,
    evaluate: Callable[[EagleDrafter], Sequence[float]] | None = None,
    eval_every: int = 1,
    keep: KeepBest | None = None,
    label: str = "",
    max_len: int | None = None,
    parallel: DataParallel | None = None,
) -> TrainResult:
    """Train `drafter` in place with TTT on the target's own distributions over `sequences`.

    `on_step(StepInfo)` is called after every step. With `evaluate` (the per-TTT-step accuracy
    on held-out data, e.g. `heldout_accuracy`), the start and every `eval_every`-th step are
    scored by expected acceptance length (`reference.select`) and the best weights are kept: in
    `keep` (shared across calls, keyed `(label, step)`; the caller restores them), or restored here
    at the end when no `keep` is given. `max_len`: train on the last `max_len` positions of each
    sequence (target features still come from the whole sequence): cost grows with length.

    AdamW(0.9, 0.95), clip 0.5, linear warmup then cosine to lr/10; `l2sp` pulls the trained
    weights toward their starting values (L2-SP). With `cache_target`, the frozen target runs once
    per sequence and its features are kept in memory. Runs on the target's device (the drafter
    must be on it too): batches are built on the CPU and moved there, and the batch order comes
    from a CPU generator, so a CPU run is the same whatever devices exist. `target` may be a
    `FeatureSource` (a capture cache): the same training without the target in memory.
    With `parallel` (one rank of a data-parallel run), the rank trains on its part of each global
    batch, the loss is normalised over the global batch and the gradients are summed over the
    ranks before clipping: the step of one process with the whole batch, up to fp32 summation
    order. Only rank 0 adds the L2-SP term; `evaluate` belongs on rank 0 alone.
    """
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    names = set(trainable_names(drafter, trainable))
    params = []
    for n, p in drafter.named_parameters():
        p.requires_grad_(n in names)
        if n in names:
            params.append((n, p))
    anchor = {n: p.detach().clone() for n, p in params} if l2sp > 0 else {}
    opt = torch.optim.AdamW([p for _, p in params], lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = max(1, steps // 10)

    def lr_at(s: int) -> float:
        if s < warm:
            return lr * (s + 1) / warm
        frac = (s - warm) / max(1, steps - warm)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    dev = target.device
    rows = drafter.draft_to_target
    t2d = torch.zeros(target.vocab_size, dtype=torch.bool, device=dev)
    t2d[rows] = True
    cache: dict[int, tuple[Tensor, ...]] = {}

    if cache_target:  # one batched pass over the data; features kept per sequence
        for start in range(0, len(sequences), 16):
            chunk = list(range(start, min(start + 16, len(sequences))))
            ids, lens = pad_batch([sequences[i] for i in chunk])
            feats = target_features(target, ids.to(dev), lens.to(dev), aux_ids, rows, t2d)
            for j, i in enumerate(chunk):
                cache[i] = tuple(f[j, : len(sequences[i])] for f in feats)

    def features(batch: list[int]) -> tuple[Tensor, ...]:
        ids, lens = pad_batch([sequences[i] for i in batch])
        ids, lens = ids.to(dev), lens.to(dev)
        if not cache_target:
            return (ids, lens, *target_features(target, ids, lens, aux_ids, rows, t2d))
        t = ids.shape[1]
        padded = [torch.stack([pad_rows(cache[i][c], t) for i in batch]) for c in range(3)]
        return (ids, lens, *padded)

    if max_len is not None:
        whole = features

        def features(batch: list[int]) -> tuple[Tensor, ...]:  # the window of `whole`
            ids, lens, *rest = whole(batch)
            return last_positions([ids, *rest], lens, max_len)

    keeper = keep if keep is not None else KeepBest()
    eal_hist: list[tuple[int, float]] = []

    def score(step: int) -> tuple[float, bool]:
        drafter.eval()
        with torch.no_grad():
            eal = expected_acceptance_length(evaluate(drafter))  # type: ignore[misc]
        drafter.train()
        eal_hist.append((step, eal))
        return eal, keeper.offer(eal, (label, step), drafter)

    losses: list[float] = []
    step_acc: list[float] = []
    window: list[list[float]] = []
    drafter.train()
    if evaluate is not None and keeper.where is None:
        score(0)
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        batch = torch.randperm(len(sequences), generator=gen)[:batch_size].tolist()
        if parallel is not None:
            batch = parallel.local(batch)
        ids, lens, aux, tl, iv = features(batch)
        denoms = None if parallel is None else parallel.sum(ttt_token_counts(ids, lens, iv, ttt_steps))
        loss, accs = ttt_loss(
            drafter, ids, lens, aux, tl, ttt_steps=ttt_steps, loss_decay=loss_decay, in_vocab=iv, denoms=denoms
        )
        if anchor and (parallel is None or parallel.rank == 0):
            loss = loss + l2sp * sum(((p - anchor[n]) ** 2).sum() for n, p in params)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if parallel is not None:
            parallel.reduce_grads([p for _, p in params])
        torch.nn.utils.clip_grad_norm_([p for _, p in params], 0.5)
        opt.step()
        losses.append(float(loss.detach()))
        if parallel is not None:  # the global batch's loss and accuracy
            losses[-1], *accs = parallel.sum([losses[-1], *accs])
        window.append(accs)
        info = StepInfo(step + 1, steps, losses[-1], lr_at(step), accs)
        if evaluate is not None and ((step + 1) % max(1, eval_every) == 0 or step == steps - 1):
            info.eal, info.best = score(step + 1)
        if on_step is not None:
            on_step(info)
        if (step + 1) % log_every == 0 or step == steps - 1:
            mean = [sum(a[j] for a in window) / len(window) for j in range(ttt_steps)]
            step_acc = mean
            LOG.info("step %d loss %.4f acc %s", step + 1, losses[-1], [round(a, 3) for a in mean])
            window = []
    drafter.eval()
    for p in drafter.parameters():
        p.requires_grad_(False)
    best = None
    if evaluate is not None:
        if keep is None:
            keeper.restore(drafter)
        where = keeper.where
        best = where[1] if isinstance(where, tuple) and where[0] == label else None
    return TrainResult(
        losses=losses,
        step_acc=step_acc,
        seconds=time.perf_counter() - t0,
        eal_history=eal_hist,
        best_step=best,
        best_eal=keeper.eal if evaluate is not None else None,
    )


def write_draft(
    drafter: EagleDrafter, config: dict, folder: Path, *, include_embed: bool = False, dtype: torch.dtype | None = None
) -> None:
    """`config.json` + `model.safetensors` into the existing `folder` (canonical names, vLLM
    layout, d2t/t2d when the vocabularies differ); callers make it atomic."""
    from safetensors.torch import save_file

    cfg = drafter.cfg
    name = str(config.get("torch_dtype", config.get("dtype", "bfloat16")))
    dtype = dtype or getattr(torch, name)
    sd: dict[str, Tensor] = {}
    for n, t in drafter.state_dict().items():
        if n == "embed_tokens.weight" and not include_embed:
            continue
        if n == "d2t":
            continue
        sd[n] = t.detach().to(dtype).cpu().contiguous()  # a drafter trained on a GPU saves from the CPU
    if cfg.draft_vocab_size != cfg.vocab_size:
        sd["d2t"] = drafter.d2t.detach().long().cpu().contiguous()
        t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool)
        t2d[drafter.draft_to_target.cpu()] = True
        sd["t2d"] = t2d
    save_file(sd, str(Path(folder) / "model.safetensors"), metadata={"format": "pt"})
    (Path(folder) / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
