"""Chain speculative decoding with an EAGLE-3 drafter, mirroring vLLM's V1 proposer and counters.

What the drafter sees (vLLM `SpecDecodeBaseProposer.propose`, `set_inputs_first_pass`): drafter
position p reads token x[p+1] and the target's aux state at p, with rope position p. After each
verification the drafter's first pass covers the verified positions [start, start+a] (the last
committed token plus the a accepted drafts) with tokens [d_1..d_a, bonus] and the *target's* aux
states at those positions; it overwrites the slots the previous chain wrote, so the draft KV cache
is truncated to `start` first. The chain then runs k-1 single-token steps on the drafter's own
fed-back state. Counters follow `SpecDecodingStats.observe_draft`: one draft per verification,
per-position i counts verifications whose first i+1 drafts were accepted; tokens past
`max_new_tokens` (or after EOS) are cut from the output but still counted, as in vLLM.

Devices: every tensor is created on the target's device (the drafter must be on the same one).
Sampling draws from a CPU generator on CPU copies of the probabilities, so a seed gives the same
random stream on CPU and GPU.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from eagle_convert.reference.drafter import EagleDrafter
from eagle_convert.reference.target import TargetModel
from eagle_convert.vllm_model import AcceptanceMetrics


@dataclass
class SpecResult(AcceptanceMetrics):
    tokens: list[int]
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    target_forwards: int = 0
    seconds: float = 0.0


def summarize(results: Sequence[SpecResult]) -> SpecResult:
    """Sum counters over requests (what vLLM's global counters report); tokens concatenated."""
    total = SpecResult(tokens=[])
    for r in results:
        total.tokens += r.tokens
        total.add_counters(r)
        total.target_forwards += r.target_forwards
        total.seconds += r.seconds
    return total


def _probs(logits: Tensor, temperature: float) -> Tensor:
    return torch.softmax(logits.float() / temperature, dim=-1)


def _sample(probs: Tensor, gen: torch.Generator) -> int:
    return int(torch.multinomial(probs.cpu(), 1, generator=gen))  # `gen` is a CPU generator


def _next_token(logits: Tensor, temperature: float, gen: torch.Generator) -> int:
    if temperature <= 0:
        return int(logits.argmax())
    return _sample(_probs(logits, temperature), gen)


def _finish(out: list[int], new: list[int], max_new: int, eos: int | None) -> bool:
    """Append `new` to `out` up to the limit / EOS; True when generation is over."""
    for t in new:
        out.append(t)
        if len(out) >= max_new or (eos is not None and t == eos):
            return True
    return False


@torch.no_grad()
def greedy_generate(
    target: TargetModel, prompt_ids: Sequence[int], max_new_tokens: int, *, eos_token_id: int | None = None
) -> list[int]:
    """Plain target decoding with a KV cache (the no-speculation baseline)."""
    cache, dev = target.new_cache(), target.device
    logits = target.forward(torch.tensor([list(prompt_ids)], device=dev), cache=cache).logits[0, -1]
    out: list[int] = []
    while True:
        tok = int(logits.argmax())
        if _finish(out, [tok], max_new_tokens, eos_token_id):
            return out
        logits = target.forward(torch.tensor([[tok]], device=dev), cache=cache).logits[0, -1]


def _accept(
    drafts: list[int], qs: list[Tensor | None], logits: Tensor, temperature: float, gen: torch.Generator
) -> tuple[int, int]:
    """(accepted count, bonus/recovered token) for one verification. `logits`: [k+1, V]."""
    if temperature <= 0:
        target_ids = logits.argmax(-1).tolist()
        a = 0
        while a < len(drafts) and drafts[a] == target_ids[a]:
            a += 1
        return a, target_ids[a]
    for j, d in enumerate(drafts):
        p = _probs(logits[j], temperature)
        q = qs[j]
        q_d = 1.0 if q is None else float(q[d])  # q None: greedy draft, one-hot distribution
        u = float(torch.rand((), generator=gen))
        if q_d > 0 and u < min(1.0, float(p[d]) / q_d):
            continue
        if q is None:
            resid = p.clone()
            resid[d] = 0.0
        else:
            resid = (p - q).clamp_min(0.0)
        if float(resid.sum()) <= 0:
            resid = p
        return j, _sample(resid / resid.sum(), gen)
    return len(drafts), _sample(_probs(logits[-1], temperature), gen)


@torch.no_grad()
def speculative_generate(
    target: TargetModel,
    drafter: EagleDrafter,
    prompt_ids: Sequence[int],
    *,
    k: int,
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    aux_ids: Sequence[int],
    draft_sample: str = "greedy",
    eos_token_id: int | None = None,
) -> SpecResult:
    """Generate with k-token chain drafts verified by one target forward each.

    `draft_sample="greedy"` is vLLM's default (`draft_sample_method`): drafts are argmax and, at
    T > 0, rejection sampling treats the draft distribution as one-hot. `"probabilistic"` samples
    drafts from the draft distribution (on the target vocab) and uses it in the acceptance test.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    if draft_sample not in ("greedy", "probabilistic"):
        raise ValueError(f"draft_sample must be 'greedy' or 'probabilistic', not {draft_sample!r}")
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    dtype = drafter.fc.weight.dtype if hasattr(drafter, "fc") else drafter.norm.weight.dtype
    res = SpecResult(tokens=[], accepted_per_pos=[0] * k)
    ids = list(prompt_ids)
    tcache, dcache = target.new_cache(), drafter.new_cache()
    dev = target.device

    pre = target.forward(torch.tensor([ids], device=dev), cache=tcache, aux_ids=aux_ids)
    res.target_forwards = 1
    done = _finish(res.tokens, [_next_token(pre.logits[0, -1], temperature, gen)], max_new_tokens, eos_token_id)
    # Pending first pass of the drafter: positions [start, start + len(tokens)).
    start, pend_tokens, pend_aux = 0, ids[1:] + [res.tokens[-1]], pre.aux
    while not done:
        last = res.tokens[-1]
        dcache.truncate(start)
        pos = torch.arange(start, start + len(pend_tokens), device=dev)[None]
        hidden = drafter.combine_hidden_states(pend_aux.to(dtype))
        normed, fed = drafter(torch.tensor([pend_tokens], device=dev), pos, hidden, dcache.slots)
        normed, fed, p = normed[:, -1:], fed[:, -1:], start + len(pend_tokens) - 1
        drafts: list[int] = []
        qs: list[Tensor | None] = []
        for j in range(k):
            logits = drafter.compute_logits(normed)[0, -1]
            if temperature > 0 and draft_sample == "probabilistic":
                q = _probs(logits, temperature)
                drafts.append(_sample(q, gen))
                qs.append(q)
            else:
                drafts.append(int(logits.argmax()))
                qs.append(None)
            if j < k - 1:
                p += 1
                normed, fed = drafter(
                    torch.tensor([[drafts[-1]]], device=dev), torch.tensor([[p]], device=dev), fed, dcache.slots
                )
        start = len(ids) + len(res.tokens) - 1  # position of `last` in the target sequence
        ver = target.forward(torch.tensor([[last] + drafts], device=dev), cache=tcache, aux_ids=aux_ids)
        res.target_forwards += 1
        a, bonus = _accept(drafts, qs, ver.logits[0], temperature, gen)
        res.num_drafts += 1
        res.num_draft_tokens += k
        res.num_accepted += a
        for i in range(a):
            res.accepted_per_pos[i] += 1
        target.truncate_cache(tcache, start + a + 1)
        pend_tokens, pend_aux = drafts[:a] + [bonus], ver.aux[:, : a + 1]
        done = _finish(res.tokens, drafts[:a] + [bonus], max_new_tokens, eos_token_id)
    res.seconds = time.perf_counter() - t0
    return res
