"""The drift observer: what the reference drafter reports during a speculative run, summed by draft depth.

The reference loop (`reference/loop.py`) drafts a chain of k tokens per round: one first pass over
the verified positions (target aux states through `combine_hidden_states`), then k-1 single-token
steps on the drafter's own fed-back state. `DriftRecorder` is the drafter's `DraftObserver`: an
"aux" event starts a round, and every "fed" event closes one draft pass, whose depth is its index
in the round (1 = the first pass). For each pass it keeps the last query row's attention: the keys
of the first pass are the context (the first `sink_tokens` of them the sink), every key after it
was written by the draft itself. Sums stay torch tensors on the model's device until `stats()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class DepthSums:
    """Per-depth sums of one group of rounds (a draft x chat template x bucket)."""

    depth: int
    sink: Tensor | None = None  # [layers, heads] summed attention mass on the sink tokens
    context: Tensor | None = None  # ... on the rest of the context
    own: Tensor | None = None  # ... on the draft's own tokens
    fed_rms: float = 0.0  # summed RMS of the fed-back state
    passes: int = 0
    reached: int = 0  # rounds whose drafts 1..depth-1 were all accepted (acceptance counters)
    accepted: int = 0  # ... and whose draft at this depth was accepted too

    def add(self, shares: tuple[Tensor, Tensor, Tensor], fed_rms: Tensor) -> None:
        sink, context, own = shares
        if self.sink is None or self.context is None or self.own is None:
            self.sink, self.context, self.own = sink.clone(), context.clone(), own.clone()
        else:
            self.sink += sink
            self.context += context
            self.own += own
        self.fed_rms += float(fed_rms)
        self.passes += 1

    def merge(self, other: DepthSums) -> None:
        if other.sink is not None and other.context is not None and other.own is not None:
            self.add((other.sink, other.context, other.own), torch.tensor(0.0))
            self.passes -= 1  # `add` counted one pass; `other` brings its own count
        self.fed_rms += other.fed_rms
        self.passes += other.passes
        self.reached += other.reached
        self.accepted += other.accepted


@dataclass
class AuxSums:
    """Per aux chunk: summed per-token RMS as the target gives it and at the `fc` input."""

    raw: list[float] = field(default_factory=list)
    fc_input: list[float] = field(default_factory=list)
    tokens: int = 0

    def merge(self, other: AuxSums) -> None:
        if not self.raw:
            self.raw, self.fc_input = [0.0] * len(other.raw), [0.0] * len(other.fc_input)
        self.raw = [a + b for a, b in zip(self.raw, other.raw)]
        self.fc_input = [a + b for a, b in zip(self.fc_input, other.fc_input)]
        self.tokens += other.tokens


def token_rms(x: Tensor) -> Tensor:
    """RMS over the last dimension, per token, in fp32."""
    return x.float().pow(2).mean(-1).sqrt()


class DriftRecorder:
    """A `DraftObserver` summing attention shares, fed-back RMS and aux RMS by depth (module docstring).

    Args:
        depth: the deepest draft step recorded (the loop's k).
        num_aux: aux chunks in `combine_hidden_states`' input.
        sink_tokens: how many first context positions count as the sink.
    """

    def __init__(self, depth: int, num_aux: int, sink_tokens: int) -> None:
        self.depth, self.num_aux, self.sink_tokens = depth, num_aux, sink_tokens
        self.depths = [DepthSums(d + 1) for d in range(depth)]
        self.aux = AuxSums([0.0] * num_aux, [0.0] * num_aux)
        self._pass = 0  # passes closed in this round
        self._context = 0  # keys of the round's first pass
        self._layers: list[tuple[int, Tensor]] = []  # this pass's last-row probabilities per layer

    def attention(self, layer: int, probs: Tensor) -> None:
        self._layers.append((layer, probs[0, :, -1, :]))  # [heads, keys]

    def states(self, name: str, value: Tensor) -> None:
        if name == "aux":
            self._pass = 0
            self._chunks(value, 0)
        elif name == "fc_input":
            self._chunks(value, 1)
        elif name == "fed":
            self._close(value)

    def _chunks(self, value: Tensor, which: int) -> None:
        rms = token_rms(torch.stack(value.chunk(self.num_aux, dim=-1)))  # [A, B, T]
        sums = rms.flatten(1).sum(-1).tolist()
        target = self.aux.raw if which == 0 else self.aux.fc_input
        for i, s in enumerate(sums):
            target[i] += s
        if which == 0:
            self.aux.tokens += int(rms[0].numel())

    def _close(self, fed: Tensor) -> None:
        layers, self._layers = sorted(self._layers, key=lambda x: x[0]), []
        self._pass += 1
        if self._pass > self.depth or not layers:
            return
        probs = torch.stack([p for _, p in layers])  # [layers, heads, keys]
        if self._pass == 1:
            self._context = probs.shape[-1]
        ctx, sink = self._context, min(self.sink_tokens, self._context)
        shares = (probs[..., :sink].sum(-1), probs[..., sink:ctx].sum(-1), probs[..., ctx:].sum(-1))
        self.depths[self._pass - 1].add(shares, token_rms(fed[0, -1]))

    def count_acceptance(self, num_drafts: int, accepted_per_pos: list[int]) -> None:
        """Add one request's acceptance counters: depth d was reached by the rounds whose first
        d-1 drafts were accepted (vLLM's per-position counters, `SpecDecodingStats`)."""
        for d, sums in enumerate(self.depths):
            sums.reached += num_drafts if d == 0 else accepted_per_pos[d - 1]
            sums.accepted += accepted_per_pos[d]
