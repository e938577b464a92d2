"""What the reference-vs-vLLM parity tests share: bf16 ulps, decisive draft margins, reference counters.

The allowances these feed (which near-ties excuse a count difference, and by how much) are sized and
justified in tests/test_parity_vllm.py's docstring; tests/test_mla.py applies the same ones.
"""

from __future__ import annotations

import math
from pathlib import Path

from eagle_convert.vllm_model import default_release

TOP = 4  # draft logits kept per step: a token below the top 4 is far from a tie
# The allowances (tests/test_parity_vllm.py's docstring sizes each from measured bf16 error).
DRAFT_TIE_ULPS = 8.0
TARGET_TIE_ULPS = 32.0
FLIP_SHIFT = 2
MAX_FLIP_FRAC = 0.5
# The reference's token at a divergence must be the fp32 target's argmax up to this many logits:
# fp32 logits of one model through other kernels or chunk shapes differ by ~1e-5 at |logit| <= 20.
FP32_LOGIT_TOL = 1e-3


def bf16_ulp(x: float) -> float:
    """Spacing of bf16 numbers at |x| (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


def decisive_margins(
    steps: list[tuple[list[int], list[float]]], tokens: list[int], k: int
) -> list[tuple[float, float]]:
    """(margin in logits, top logit) of the draft steps that decided their round's count: every
    earlier draft of the round was accepted, and a flip there changes acceptance. Steps come `k` per round."""
    out: list[tuple[float, float]] = []
    n = 1  # the prefill emits tokens[0]; a round drafts tokens[n:n + k]
    for r in range(0, len(steps), k):
        accepted = k
        for j, (ids, vals) in enumerate(steps[r : r + k]):
            t = tokens[n + j] if n + j < len(tokens) else None  # None: past max_new, unknown
            if t is None or t == ids[0]:
                rival = vals[1]  # a flip to the runner-up rejects the target's token
            else:
                rival = vals[ids.index(t)] if t in ids else vals[-1]  # a flip to t accepts it
            out.append((vals[0] - rival, vals[0]))
            if t is None or t != ids[0]:
                accepted = j
                break
        n += accepted + 1
    return out


def reference_counts(
    target, draft: Path | object, prompts: list[list[int]], *, k: int, max_new: int, tie_ulps: float
) -> list[dict]:
    """Per request of the reference engine (fp32): tokens, accepted per position, rounds, the
    decisive draft margins under `tie_ulps` (bf16 ulps) and the smallest one in logits. `draft`: a
    folder, or a loaded `EagleDrafter`."""
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.loop import speculative_generate

    drafter = (
        load_drafter(
            draft,
            default_release(),
            target_embed=target.embed_weight,
            target_lm_head=target.lm_head_weight,
            device="cpu",
        )
        if isinstance(draft, Path)
        else draft
    )
    compute = drafter.compute_logits
    steps: list[tuple[list[int], list[float]]] = []

    def traced(normed):
        logits = compute(normed)
        top = logits[0, -1].topk(TOP)
        steps.append((top.indices.tolist(), top.values.tolist()))
        return logits

    drafter.compute_logits = traced
    out = []
    try:
        for p in prompts:
            steps.clear()
            r = speculative_generate(target, drafter, p, k=k, max_new_tokens=max_new, aux_ids=drafter.cfg.aux_layer_ids)
            assert len(steps) == k * r.num_drafts
            margins = decisive_margins(steps, r.tokens, k)
            out.append(
                {
                    "tokens": r.tokens,
                    "pos": list(r.accepted_per_pos),
                    "rounds": r.num_drafts,
                    "near_ties": [u for m, top in margins if (u := m / bf16_ulp(top)) < tie_ulps],
                    "min_margin": min((m for m, _ in margins), default=math.inf),  # logits
                }
            )
    finally:
        del drafter.compute_logits
    return out


def vllm_counts(run, k: int) -> list[list[int]]:
    """Accepted drafts per position of every request of vLLM's pass `run` (its per-request histogram)."""
    return [[sum(m["acceptance_histogram"][i + 1 :]) for i in range(k)] for m in run.per_request]


def path_logits(target, prompt: list[int], tokens: list[int]):
    """The fp32 target's logits before each of `tokens` (teacher-forced after `prompt`): [len(tokens), V]."""
    import torch

    with torch.no_grad():
        return target.forward(torch.tensor([prompt + tokens[:-1]])).logits[0, len(prompt) - 1 :].float()


def divergence(target, prefix: list[int], ours: int, theirs: int) -> tuple[float, float]:
    """(logits the reference's token is below the fp32 argmax, fp32 margin ours - theirs in bf16 ulps)."""
    import torch

    logits = target.forward(torch.tensor([prefix])).logits[0, -1]
    top = float(logits.max())
    return top - float(logits[ours]), float(logits[ours] - logits[theirs]) / bf16_ulp(top)


def assert_parity(name: str, ref: list[dict], run, prompts: list[list[int]], target, *, k: int, max_new: int) -> dict:
    """The parity assertions 1-4 of tests/test_parity_vllm.py (its docstring says what each catches)
    on the reference's `ref` (`reference_counts`) and vLLM's pass `run`; returns what was compared:
    identical-text requests, diverged and excused ones, accepted per position over identical text."""
    # vLLM's own bookkeeping: counters consistent, per-request statistics add up to them (exact).
    assert [len(o) for o in run.outputs] == [max_new] * len(prompts)
    assert run.num_draft_tokens == k * run.num_drafts and sum(run.accepted_per_pos) == run.num_accepted
    assert run.per_request is not None and len(run.per_request) == len(prompts)
    vpos = vllm_counts(run, k)
    assert [sum(p[i] for p in vpos) for i in range(k)] == run.accepted_per_pos
    assert sum(m["num_spec_steps"] for m in run.per_request) == run.num_drafts

    same = [i for i, r in enumerate(ref) if r["tokens"] == run.outputs[i]]
    diverged = [i for i in range(len(prompts)) if i not in same]
    mismatched = [i for i in same if ref[i]["pos"] != vpos[i]]
    ref_total = [sum(ref[i]["pos"][p] for i in same) for p in range(k)]
    v_total = [sum(vpos[i][p] for i in same) for p in range(k)]
    print(
        f"{name}: identical text {len(same)}/{len(prompts)}, diverged {diverged}, same text but other counts "
        f"{mismatched} (draft near-ties {[[round(m, 2) for m in ref[i]['near_ties']] for i in mismatched]}); "
        f"accepted per position over identical text: reference {ref_total} / "
        f"{sum(ref[i]['rounds'] for i in same)} rounds, vLLM {v_total} / "
        f"{sum(run.per_request[i]['num_spec_steps'] for i in same)} rounds"
    )

    # 1. Identical text: identical counts, except where the reference draft had a decisive near-tie.
    for i in mismatched:
        assert ref[i]["near_ties"], (i, ref[i]["pos"], vpos[i], f"no decisive draft margin under {DRAFT_TIE_ULPS} ulps")
    # 2. Flips are rare events, a different draft function is not.
    assert len(mismatched) <= MAX_FLIP_FRAC * len(same), mismatched
    # 3. Totals over identical text: at most FLIP_SHIFT accepted tokens per position per excused request.
    assert all(abs(r - v) <= FLIP_SHIFT * len(mismatched) for r, v in zip(ref_total, v_total)), (ref_total, v_total)
    # 4. Different text: the engines part where vLLM picks a runner-up within bf16 error of the fp32 argmax.
    assert len(diverged) <= MAX_FLIP_FRAC * len(prompts), diverged
    for i in diverged:
        a, b = ref[i]["tokens"], run.outputs[i]
        j = next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)
        below_argmax, ulps = divergence(target, prompts[i] + a[:j], a[j], b[j])
        assert below_argmax <= FP32_LOGIT_TOL and ulps < TARGET_TIE_ULPS, (i, j, a[j], b[j], below_argmax, ulps)

    return {
        "same": same,
        "diverged": diverged,
        "mismatched": mismatched,
        "reference": ref_total,
        "vllm": v_total,
        "reference_rounds": sum(ref[i]["rounds"] for i in same),
        "vllm_rounds": sum(run.per_request[i]["num_spec_steps"] for i in same),
    }
