"""Training-time-test (TTT) training of an EAGLE-3 / 3.1 draft against a frozen target.

Follows EAGLE-3's trainer (SafeAILab/EAGLE, `eagle/traineagle3/cnets.py`, `Model.forward`): aux
states from a frozen target forward; step 0 runs on the fc output, step j >= 1 on the draft's own
previous output (raw for EAGLE-3, normed with
`norm_output`, i.e. exactly the drafter's fed-back value); token inputs are the ground truth
shifted one more place per step and rope positions move with them; the query at step j sees
the step-0 keys causally plus the step 1..j keys at its own index (extended diagonal); the loss
is soft cross-entropy against the target's distribution restricted to the draft vocabulary,
masked where the target's argmax lies outside it, weighted `loss_decay ** j`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from eagle_convert.reference.drafter import EagleDrafter, expand_kv


class TTTSlot:
    """Per-layer keys/values of every TTT step; implements the extended-diagonal mask."""

    def __init__(self) -> None:
        self.ks: list[Tensor] = []
        self.vs: list[Tensor] = []

    def attend(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        self.ks.append(k)
        self.vs.append(v)
        g = q.shape[1] // k.shape[1]
        k0, v0 = expand_kv(self.ks[0], g), expand_kv(self.vs[0], g)
        t = q.shape[2]
        s0 = (q @ k0.transpose(-1, -2)).float() * scale
        s0 = s0.masked_fill(~torch.ones(t, t, dtype=torch.bool, device=q.device).tril(), float("-inf"))
        later = [expand_kv(kk, g) for kk in self.ks[1:]]
        diag = [((q * kk).sum(-1, keepdim=True)).float() * scale for kk in later]
        w = torch.softmax(torch.cat([s0, *diag], dim=-1), dim=-1).to(q.dtype)
        out = w[..., :t] @ v0
        for s, vv in enumerate(self.vs[1:]):
            out = out + w[..., t + s : t + s + 1] * expand_kv(vv, g)
        return out


def _step_mask(ids: Tensor, lens: Tensor, in_vocab: Tensor, j: int) -> tuple[Tensor, Tensor, Tensor]:
    """(the positions TTT step `j` scores, the token index each reads, the tokens it feeds)."""
    b, t = ids.shape
    src = torch.arange(t, device=ids.device) + j + 1  # step j at index i reads token x[i+j+1]
    valid = src[None] < lens[:, None]
    gather = src.clamp(max=t - 1)[None].expand(b, t)
    tok = torch.where(valid, ids.gather(1, gather), torch.zeros_like(ids))
    return valid & in_vocab.gather(1, gather), gather, tok


def ttt_token_counts(ids: Tensor, lens: Tensor, in_vocab: Tensor, ttt_steps: int) -> list[float]:
    """The positions each TTT step scores in a batch: `ttt_loss`'s denominators (before the clamp)."""
    return [float(_step_mask(ids, lens, in_vocab, j)[0].sum()) for j in range(ttt_steps)]


def ttt_loss(
    drafter: EagleDrafter,
    ids: Tensor,
    lens: Tensor,
    aux: Tensor,
    tlogits: Tensor,
    *,
    ttt_steps: int,
    loss_decay: float,
    in_vocab: Tensor,
    denoms: Sequence[float] | None = None,
) -> tuple[Tensor, list[float]]:
    """Weighted TTT loss over a right-padded batch, and per-step argmax accuracy.

    `denoms`: each step's scored positions over the whole global batch (`ttt_token_counts` summed
    over the ranks of a data-parallel run) instead of this batch's; the ranks' losses and accuracies
    then sum to the global batch's."""
    b, t = ids.shape
    dtype = drafter.norm.weight.dtype
    hidden = drafter.combine_hidden_states(aux.to(dtype))
    slots = [TTTSlot() for _ in drafter.layers]
    idx = torch.arange(t, device=ids.device)
    tprob = torch.softmax(tlogits, dim=-1)
    targ = tlogits.argmax(-1)
    total, accs = hidden.new_zeros((), dtype=torch.float32), []
    for j in range(ttt_steps):
        scored, gather, tok = _step_mask(ids, lens, in_vocab, j)  # predicts via the target at i+j+1
        pos = (idx + j)[None].expand(b, t)
        normed, hidden = drafter(tok, pos, hidden, slots)
        logp = F.log_softmax(drafter.draft_logits(normed), dim=-1)
        p = tprob.gather(1, gather[..., None].expand(b, t, tprob.shape[-1]))
        mask = scored.float()
        denom = mask.sum().clamp_min(1.0) if denoms is None else mask.new_tensor(max(denoms[j], 1.0))
        ce = -(p * logp).sum(-1)
        total = total + loss_decay**j * (ce * mask).sum() / denom
        hit = (logp.argmax(-1) == targ.gather(1, gather)).float()
        accs.append(float((hit * mask).sum() / denom))
    return total, accs
