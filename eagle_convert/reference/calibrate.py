"""fc_norm weights that reproduce an EAGLE-3 draft's input, and how close the result drafts to it.

EAGLE-3 feeds `fc` the raw aux states x_i (vLLM 0.32.0 `llama_eagle3.py`,
`Eagle3LlamaForCausalLM.combine_hidden_states`); EAGLE-3.1 feeds it RMSNorm(x_i) * w_i =
x_i / r_i(t) * w_i, with r_i(t) the RMS of aux state i at token t (eps included). Ones make that
x_i / r_i(t): every chunk rescaled to unit RMS (the fixture's aux states have RMS ~0.1, so 10x), and
the draft's first step changes completely. w_i = r_i(t) reproduces x_i exactly at token t, so the
best fixed weight is a typical r_i(t).

Which typical value: at token t the fc input error is x_i (w / r_i(t) - 1), the same relative error
|w / r_i(t) - 1| in every channel. A per-channel weight cannot beat a scalar here, because
x_i[c] / RMSNorm(x_i)[c] = r_i(t) in every channel c: any per-channel statistic is the same per-token
r_i(t) averaged with channel-dependent weights, which only adds noise. What matters is the
average over tokens: r_i(t) has a long right tail (BOS, template and other special positions; the
massive activations of real LLMs), and the mean follows the tail while most tokens sit below it.
The median matches the typical token. Measured on the trained fixture, first-step top-1 agreement
with the EAGLE-3 draft on held-out prompts: median 0.965, relative least squares
(sum 1/r / sum 1/r^2) 0.957, per-channel least squares 0.942, mean 0.941, ones 0.296; relative fc
output error 0.057 (median) vs 0.098 (mean) vs 8.85 (ones). So: w_i = median over calibration tokens
of r_i(t), broadcast over the channels.

Aux states are the target's residual stream after k layers, captured as vLLM captures them
(`reference.target.TargetModel`, hooks on each decoder layer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import torch
from torch import Tensor

from eagle_convert.reference.drafter import EagleDrafter
from eagle_convert.reference.target import TargetModel


@torch.no_grad()
def aux_rms(
    target: TargetModel,
    sequences: Sequence[Sequence[int]],
    aux_ids: Sequence[int],
    eps: float,
    *,
    each: Callable[[int], None] | None = None,
) -> Tensor:
    """[tokens, A] fp32: sqrt(mean(x_i^2) + eps) of each aux state at every token of `sequences`
    (chunks in ascending layer-id order, as vLLM concatenates them); `each(n)` after n sequences."""
    a = len(set(aux_ids))
    out = []
    for seq in sequences:
        aux = target.forward(torch.tensor([list(seq)], device=target.device), aux_ids=aux_ids).aux
        chunks = aux[0].float().view(len(seq), a, -1)
        out.append(torch.sqrt(chunks.pow(2).mean(-1) + eps).cpu())
        if each is not None:
            each(len(out))
    return torch.cat(out)


def fc_norm_values(rms: Tensor) -> list[float]:
    """One weight per aux state: the median per-token RMS (the module docstring says why)."""
    return [float(v) for v in rms.median(dim=0).values]


def drafter_with_fc_norm(
    base: EagleDrafter, values: Sequence[Sequence[float]], *, norm_output: bool | None = None
) -> EagleDrafter:
    """`base` (an EAGLE-3 drafter) with fc_norm on and `fc_norm.{i}.weight` = values[i] (length 1:
    broadcast); `norm_output` None keeps base's. Weights are copied; `base` is not changed."""
    cfg = replace(base.cfg, fc_norm=True, norm_output=base.cfg.norm_output if norm_output is None else norm_output)
    ref = base.norm.weight
    model = EagleDrafter(cfg).to(device=ref.device, dtype=ref.dtype)
    own = model.state_dict()
    with torch.no_grad():
        for name, t in base.state_dict().items():
            own[name].copy_(t)
        for i, v in enumerate(values):
            own[f"fc_norm.{i}.weight"].copy_(torch.tensor(list(v), dtype=torch.float32).expand(cfg.target_hidden_size))
    return model.eval()


@torch.no_grad()
def first_pass_argmax(drafter: EagleDrafter, sequence: Sequence[int], aux: Tensor) -> Tensor:
    """The draft token the first draft step proposes at every position of `sequence` (vLLM's first
    pass: position p reads token x[p+1] and the target's aux state at p), as draft-vocab ids.
    `aux`: the target's [1, T, A*H] aux states of `sequence`."""
    seq = list(sequence)
    dev = aux.device
    hidden = drafter.combine_hidden_states(aux[:, :-1].to(drafter.norm.weight.dtype))
    normed, _ = drafter(
        torch.tensor([seq[1:]], device=dev),
        torch.arange(len(seq) - 1, device=dev)[None],
        hidden,
        drafter.new_cache().slots,
    )
    return drafter.draft_logits(normed)[0].argmax(-1).cpu()


@torch.no_grad()
def first_position_agreement(
    target: TargetModel,
    reference: EagleDrafter,
    candidates: Sequence[EagleDrafter],
    sequences: Sequence[Sequence[int]],
    aux_ids: Sequence[int],
    *,
    each: Callable[[int], None] | None = None,
) -> tuple[list[float], int]:
    """Top-1 agreement of each candidate's first draft step with `reference`'s over every position
    of `sequences` (teacher-forced), and the number of positions compared; `each(n)` after n sequences."""
    hits = [0] * len(candidates)
    total = 0
    for n, seq in enumerate(sequences, 1):
        if each is not None and n > 1:
            each(n - 1)
        if len(seq) < 2:
            continue
        aux = target.forward(torch.tensor([list(seq)], device=target.device), aux_ids=aux_ids).aux
        want = first_pass_argmax(reference, seq, aux)
        total += want.numel()
        for j, cand in enumerate(candidates):
            hits[j] += int((first_pass_argmax(cand, seq, aux) == want).sum())
    if each is not None and sequences:
        each(len(sequences))
    return [h / total if total else 0.0 for h in hits], total
