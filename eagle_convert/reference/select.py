"""Choosing the training step to keep: expected acceptance length (EAL) on held-out data.

EAL = Σ_k Π_{i≤k} acc_i over the TTT steps, acc_i the held-out top-1 accuracy of draft step i
(speculators PR 741, which proposed it because it ranks checkpoints better than the loss): a chain
draft earns a token at step k only when steps 1..k were all right, so a checkpoint that trades a
little step-1 accuracy for much better steps 2..3 can have the higher loss and the higher EAL. It
counts the expected accepted drafts per round; the acceptance length it predicts is 1 + EAL.

`KeepBest` holds a copy of the drafter's weights at the best EAL seen; `restore` puts them back
after training, so the draft that is written is the best one measured, not the last one.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import torch
from torch import Tensor, nn


def expected_acceptance_length(step_acc: Sequence[float]) -> float:
    """Σ_k Π_{i≤k} acc_i (expected accepted drafts per round; AL ≈ 1 + EAL)."""
    total, run = 0.0, 1.0
    for acc in step_acc:
        run *= float(acc)
        total += run
    return total


class KeepBest:
    """The weights at the highest EAL offered so far (ties keep the earlier one).

    Every parameter but `skip` (the target-shared embedding, never trained) is copied, so a best
    step of an earlier stage comes back whole even when a later stage trained other tensors.
    """

    def __init__(self, skip: Sequence[str] = ("embed_tokens.weight",)) -> None:
        self.eal = -math.inf
        self.where: Hashable | None = None  # e.g. (stage, step) of the best offer
        self.skip = tuple(skip)
        self._state: dict[str, Tensor] | None = None

    def offer(self, eal: float, where: Hashable, model: nn.Module) -> bool:
        """Keep `model`'s weights if `eal` beats the best so far; True when it did."""
        if not eal > self.eal:
            return False
        self.eal, self.where = eal, where
        self._state = {n: p.detach().clone() for n, p in model.named_parameters() if n not in self.skip}
        return True

    def restore(self, model: nn.Module) -> None:
        """Copy the kept weights back into `model` (nothing kept: no change)."""
        if self._state is None:
            return
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n in self._state:
                    p.copy_(self._state[n])
