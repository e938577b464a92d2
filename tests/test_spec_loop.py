"""The reference speculative loop: lossless at T=0, vLLM-style counters, correct rejection sampling."""

from __future__ import annotations

import math

import pytest
import torch
from numerics import assert_same_greedy_text
from tinymodels import AUX, VD, V, tiny_draft_config, tiny_target

from eagle_convert.reference.loop import _accept, greedy_generate, speculative_generate, summarize
from eagle_convert.reference.target import TargetModel
from eagle_convert.vllm_model import default_release
from fixtures.trained import init_drafter

torch.set_num_threads(1)


def _draft(target: TargetModel, seed: int = 0, zero_lm_head: bool = False):
    cfg = tiny_draft_config()
    d2t = torch.arange(VD)  # draft id i -> target id 2i
    drafter = init_drafter(cfg, target, default_release(), seed=seed, d2t=d2t)
    if zero_lm_head:
        with torch.no_grad():
            drafter.lm_head.weight.zero_()
    return drafter


@pytest.fixture(scope="module")
def target() -> TargetModel:
    return tiny_target()


@pytest.mark.parametrize("k", [1, 3])
def test_speculation_is_lossless_at_t0(target: TargetModel, k: int) -> None:
    prompt = torch.randint(0, V, (12,), generator=torch.Generator().manual_seed(1)).tolist()
    want = greedy_generate(target, prompt, 30)
    res = speculative_generate(target, _draft(target), prompt, k=k, max_new_tokens=30, aux_ids=AUX)
    # Verification forwards k+1 tokens, greedy one: equal up to fp32 ties (tests/numerics.py).
    assert_same_greedy_text(target, prompt, res.tokens, want)
    # A random draft agrees with the target on ~1/VD of its guesses: measured 1 accepted token in 28
    # rounds (AL 1.04). 1.3 leaves 7 more, far beyond what a flipped draft near-tie could add.
    assert res.acceptance_length < 1.3
    assert res.num_draft_tokens == k * res.num_drafts
    assert res.target_forwards == res.num_drafts + 1


def test_greedy_text_comparison_excuses_fp32_ties_only(target: TargetModel) -> None:
    prompt = [3, 9, 27]
    want = greedy_generate(target, prompt, 10)
    wrong = want[:5] + [(want[5] + 1) % V] + want[6:]
    with pytest.raises(AssertionError, match="greedy texts differ at token 5"):
        assert_same_greedy_text(target, prompt, wrong, want)
    tied = tiny_target(zero_lm_head=True)  # every logit is 0: any token is a greedy choice
    assert_same_greedy_text(tied, prompt, [0, 0, 7], [0, 0, 0])


@pytest.mark.parametrize("k", [1, 3, 4])
def test_a_draft_that_always_agrees_reaches_k_plus_one(k: int) -> None:
    # Exact on any CPU: a zero lm_head gives logits of exactly 0 whatever the kernels, and argmax
    # breaks the all-way tie at the first index.
    target = tiny_target(zero_lm_head=True)  # greedy target always emits token 0
    drafter = _draft(target, zero_lm_head=True)  # draft id 0 -> target id 0
    res = speculative_generate(target, drafter, [5, 6, 7], k=k, max_new_tokens=21, aux_ids=AUX)
    assert res.tokens == [0] * 21
    assert res.acceptance_length == k + 1
    assert res.num_drafts == math.ceil(20 / (k + 1))  # the prefill emits the first token
    assert res.accepted_per_pos == [res.num_drafts] * k
    assert res.per_position_rate == [1.0] * k


def test_counters_follow_vllm_observe_draft(target: TargetModel) -> None:
    """Scripted drafts against a target that always says 0: accepted prefixes of 2, 0, 3, 1."""
    target = tiny_target(zero_lm_head=True)
    drafter = _draft(target)
    script = iter([0, 0, 8, 4, 0, 0, 0, 0, 0, 0, 6, 0])  # round by round, k=3
    real = drafter.compute_logits

    def scripted(normed):
        out = torch.full_like(real(normed), -1.0)
        out[..., next(script)] = 1.0
        return out

    drafter.compute_logits = scripted
    res = speculative_generate(target, drafter, [1, 2], k=3, max_new_tokens=10, aux_ids=AUX)
    # rounds: 2 acc +bonus (3 tokens), 0 (+1), 3 (+4) -> 1+3+1+4 = 9, then 1 acc + bonus -> 11 > 10
    assert res.num_drafts == 4 and res.num_accepted == 2 + 0 + 3 + 1
    assert res.accepted_per_pos == [3, 2, 1]
    assert res.tokens == [0] * 10  # cut at max_new_tokens, counters are not
    assert summarize([res, res]).accepted_per_pos == [6, 4, 2]


def test_eos_stops_generation(target: TargetModel) -> None:
    prompt = [3, 9, 27]
    ref = greedy_generate(target, prompt, 20)
    eos = ref[4]
    stop = ref.index(eos) + 1
    res = speculative_generate(target, _draft(target), prompt, k=2, max_new_tokens=20, aux_ids=AUX, eos_token_id=eos)
    assert_same_greedy_text(target, prompt, res.tokens, ref[:stop])
    assert greedy_generate(target, prompt, 20, eos_token_id=eos) == ref[:stop]  # same kernels, same shapes


@pytest.mark.parametrize("greedy_draft", [False, True])
def test_rejection_sampling_preserves_the_target_distribution(greedy_draft: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    logits_p = torch.tensor([[1.0, 0.2, -0.5, 2.0, 0.0], [0.0] * 5])
    q = torch.softmax(torch.tensor([0.0, 2.0, 0.5, -1.0, 1.0]), -1)
    counts = torch.zeros(5)
    n = 20000
    for _ in range(n):
        d = int(q.argmax()) if greedy_draft else int(torch.multinomial(q, 1, generator=gen))
        a, tok = _accept([d], [None if greedy_draft else q], logits_p, 1.0, gen)
        counts[d if a == 1 else tok] += 1
    # Sampling error: the standard deviation of a frequency over n = 20000 draws is at most
    # sqrt(0.25 / n) = 0.0035; 0.015 is over 4 of them. Kernels do not enter (seeded CPU generator).
    torch.testing.assert_close(counts / n, torch.softmax(logits_p[0], -1), atol=0.015, rtol=0)


def test_sampling_is_seeded(target: TargetModel) -> None:
    drafter = _draft(target)
    kw = dict(k=2, max_new_tokens=12, aux_ids=AUX, temperature=0.8, draft_sample="probabilistic")
    a = speculative_generate(target, drafter, [1, 2, 3], seed=7, **kw)
    b = speculative_generate(target, drafter, [1, 2, 3], seed=7, **kw)
    assert a.tokens == b.tokens and a.num_accepted == b.num_accepted
