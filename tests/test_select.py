"""Keeping the best training step by expected acceptance length (EAL, speculators PR 741): the
formula, the kept weights, and a training run whose best step the test knows in advance."""

from __future__ import annotations

import torch
from tinymodels import AUX, V, tiny_draft_config, tiny_target

from eagle_convert.reference.batches import heldout_accuracy, last_positions
from eagle_convert.reference.select import KeepBest, expected_acceptance_length
from eagle_convert.reference.train import StepInfo, train_draft
from eagle_convert.vllm_model import default_release
from fixtures.trained import init_drafter


def test_eal_is_the_sum_of_running_products() -> None:
    assert expected_acceptance_length([]) == 0.0
    assert expected_acceptance_length([0.5]) == 0.5
    assert abs(expected_acceptance_length([0.9, 0.8, 0.5]) - (0.9 + 0.72 + 0.36)) < 1e-12
    # The loss would prefer a better first step; EAL prefers the longer run of accepted drafts.
    assert expected_acceptance_length([0.7, 0.7, 0.7]) > expected_acceptance_length([0.8, 0.4, 0.2])


def test_keep_best_keeps_the_weights_of_the_best_offer() -> None:
    model = torch.nn.Linear(2, 2, bias=False)
    keep = KeepBest()
    with torch.no_grad():
        model.weight.fill_(1.0)
        assert keep.offer(1.0, "a", model)
        model.weight.fill_(2.0)
        assert not keep.offer(1.0, "b", model)  # a tie keeps the earlier
        model.weight.fill_(3.0)
        assert keep.offer(1.5, "c", model)
        model.weight.fill_(4.0)
        assert not keep.offer(0.2, "d", model)
    keep.restore(model)
    assert keep.where == "c" and torch.equal(model.weight, torch.full((2, 2), 3.0))


def test_last_positions_windows_each_row() -> None:
    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]])
    feats = torch.arange(10.0).view(2, 5, 1)
    out_ids, lens, out_feats = last_positions([ids, feats], torch.tensor([5, 2]), 3)
    assert out_ids.tolist()[0] == [3, 4, 5] and out_ids.tolist()[1][:2] == [6, 7]
    assert lens.tolist() == [3, 2] and out_feats[0, :, 0].tolist() == [2.0, 3.0, 4.0]


def test_training_keeps_the_step_with_the_best_eal() -> None:
    """An injected evaluator scores step 4 best (EAL 2.124; the start 0.665, other steps 1.28):
    train_draft restores exactly the weights `on_step` saw at step 4 and reports every step."""
    target = tiny_target(peaked=False)
    drafter = init_drafter(
        tiny_draft_config(torch_dtype="float32"), target, default_release(), seed=0, d2t=torch.arange(48)
    )
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, V, (24,), generator=g).tolist() for _ in range(6)]
    scores = {0: [0.5, 0.3, 0.1], 4: [0.9, 0.8, 0.7]}
    calls: list[int] = []

    def evaluate(model) -> list[float]:
        calls.append(len(calls))
        step = (len(calls) - 1) * 2  # eval_every=2: start, then steps 2, 4, 6, 8
        return scores.get(step, [0.8, 0.5, 0.2])

    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    seen: list[StepInfo] = []

    def on_step(info: StepInfo) -> None:
        seen.append(info)
        snapshots[info.step] = {n: p.detach().clone() for n, p in drafter.named_parameters()}

    res = train_draft(
        target,
        drafter,
        seqs,
        aux_ids=AUX,
        steps=8,
        lr=3e-3,
        seed=0,
        batch_size=4,
        evaluate=evaluate,
        eval_every=2,
        on_step=on_step,
    )
    assert [i.step for i in seen] == list(range(1, 9)) and all(i.steps == 8 for i in seen)
    assert [i.eal is not None for i in seen] == [False, True] * 4
    assert [s for s, _ in res.eal_history] == [0, 2, 4, 6, 8]
    assert res.best_step == 4 and abs(res.best_eal - expected_acceptance_length(scores[4])) < 1e-12
    assert [i.step for i in seen if i.best] == [2, 4]  # step 2 beat the start, step 4 beat step 2
    for n, p in drafter.named_parameters():
        assert torch.equal(p, snapshots[4][n]), n
    assert not torch.equal(drafter.fc.weight, snapshots[8]["fc.weight"])  # training went on after step 4


def test_heldout_accuracy_and_without_evaluate_nothing_changes() -> None:
    target = tiny_target(peaked=False)
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(0, V, (20,), generator=g).tolist() for _ in range(4)]
    a = init_drafter(tiny_draft_config(torch_dtype="float32"), target, default_release(), seed=0, d2t=torch.arange(48))
    b = init_drafter(tiny_draft_config(torch_dtype="float32"), target, default_release(), seed=0, d2t=torch.arange(48))
    evaluate = heldout_accuracy(target, a, seqs[:2], aux_ids=AUX)
    before = evaluate(a)
    assert len(before) == 3 and all(0.0 <= x <= 1.0 for x in before)
    train_draft(target, a, seqs, aux_ids=AUX, steps=3, lr=3e-3, seed=0, batch_size=2)
    train_draft(target, b, seqs, aux_ids=AUX, steps=3, lr=3e-3, seed=0, batch_size=2, on_step=lambda _i: None)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n  # a callback changes nothing about the run
