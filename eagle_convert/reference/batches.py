"""The trainer's data: right-padded batches, the target's features for them (a live target or a
capture cache), the last-positions window, and teacher-forced evaluation over fixed sequences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch
from torch import Tensor

from eagle_convert.reference.drafter import EagleDrafter
from eagle_convert.reference.target import TargetModel
from eagle_convert.reference.ttt import ttt_loss


def pad_batch(seqs: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """(ids [B,T] right-padded with 0, lengths [B]), built on the CPU: the caller moves them."""
    t = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), t, dtype=torch.long)
    lens = torch.tensor([len(s) for s in seqs])
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    return ids, lens


def pad_rows(x: Tensor, t: int) -> Tensor:
    """`x` [n, ...] zero-padded to `t` rows: one sequence's kept features in a longer batch."""
    out = x.new_zeros((t, *x.shape[1:]))
    out[: x.shape[0]] = x
    return out


class FeatureSource(Protocol):
    """What the trainer needs of a target besides a live model: a capture cache
    (`cache/source.py`, `CachedTarget`) answers the same features without the target in memory."""

    device: torch.device
    vocab_size: int

    def features(
        self, ids: Tensor, lens: Tensor, aux_ids: Sequence[int], rows: Tensor, t2d: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]: ...


def target_features(
    target: TargetModel | FeatureSource, ids: Tensor, lens: Tensor, aux_ids: Sequence[int], rows: Tensor, t2d: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(aux [B,T,A*H] fp32, target logits on the draft vocab [B,T,Vd], target argmax in the draft
    vocab [B,T]). Right padding needs no mask: padded positions come after every real one."""
    if not isinstance(target, TargetModel):
        return target.features(ids, lens, aux_ids, rows, t2d)
    out = target.forward(ids, aux_ids=aux_ids)
    return out.aux.float(), out.logits[..., rows], t2d[out.logits.argmax(-1)]


def last_positions(tensors: list[Tensor], lens: Tensor, m: int) -> tuple[Tensor, ...]:
    """The last `m` valid positions of each row of right-padded [B, T, ...] tensors, right-padded again."""
    start = (lens - m).clamp_min(0)
    width = int(min(m, int(lens.max())))
    idx = (start[:, None] + torch.arange(width, device=lens.device)[None]).clamp(max=tensors[0].shape[1] - 1)
    out = []
    for x in tensors:
        gather = idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand(-1, -1, *x.shape[2:])
        out.append(x.gather(1, gather))
    return (out[0], lens - start, *out[1:])


def teacher_forced(
    target: TargetModel | FeatureSource,
    drafter: EagleDrafter,
    sequences: list[list[int]],
    *,
    aux_ids: Sequence[int],
    ttt_steps: int = 3,
    loss_decay: float = 0.8,
    batch_size: int = 8,
    max_len: int | None = None,
) -> Callable[[EagleDrafter], tuple[float, list[float]]]:
    """The token-weighted TTT loss and argmax accuracy per TTT step of a drafter over `sequences`
    (teacher-forced tokens, the draft's own fed-back states, as in training; with `max_len`, over
    the last `max_len` positions, as `train_draft(max_len=)` trains). The frozen target runs once
    here; each call runs only the drafter (finetune's before/after evaluation and the held-out score)."""
    dev = target.device
    rows = drafter.draft_to_target
    t2d = torch.zeros(target.vocab_size, dtype=torch.bool, device=dev)
    t2d[rows] = True
    batches = []
    for start in range(0, len(sequences), batch_size):
        ids, lens = pad_batch(sequences[start : start + batch_size])
        ids, lens = ids.to(dev), lens.to(dev)
        feats = target_features(target, ids, lens, aux_ids, rows, t2d)
        if max_len is not None:
            ids, lens, *rest = last_positions([ids, *feats], lens, max_len)
            feats = (rest[0], rest[1], rest[2])
        batches.append((ids, lens, *feats))

    @torch.no_grad()
    def evaluate(model: EagleDrafter) -> tuple[float, list[float]]:
        loss, total, weight = 0.0, [0.0] * ttt_steps, 0
        for ids, lens, aux, tl, iv in batches:
            lb, accs = ttt_loss(model, ids, lens, aux, tl, ttt_steps=ttt_steps, loss_decay=loss_decay, in_vocab=iv)
            n = int(lens.sum())
            loss += float(lb) * n
            total = [t + a * n for t, a in zip(total, accs)]
            weight += n
        return loss / max(weight, 1), [t / max(weight, 1) for t in total]

    return evaluate


def heldout_accuracy(
    target: TargetModel | FeatureSource,
    drafter: EagleDrafter,
    sequences: list[list[int]],
    *,
    aux_ids: Sequence[int],
    ttt_steps: int = 3,
    loss_decay: float = 0.8,
    batch_size: int = 8,
    max_len: int | None = None,
) -> Callable[[EagleDrafter], list[float]]:
    """An `evaluate` for `train_draft`: `teacher_forced`'s accuracy per TTT step, the loss dropped."""
    score = teacher_forced(
        target,
        drafter,
        sequences,
        aux_ids=aux_ids,
        ttt_steps=ttt_steps,
        loss_decay=loss_decay,
        batch_size=batch_size,
        max_len=max_len,
    )
    return lambda model: score(model)[1]
