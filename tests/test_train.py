"""TTT training: the training graph is the inference chain, the loss goes down, the exported
draft loads back; plus one slow test that builds the trained fixture pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from numerics import assert_same_greedy_text
from tinymodels import AUX, VD, H, V, tiny_draft_config, tiny_target

from eagle_convert.reference.data import load_drafter
from eagle_convert.reference.loop import speculative_generate, summarize
from eagle_convert.reference.target import TargetModel
from eagle_convert.reference.train import train_draft, trainable_names
from eagle_convert.reference.ttt import TTTSlot
from eagle_convert.vllm_model import default_release
from fixtures.trained import init_drafter, save_draft

torch.set_num_threads(1)
# The TTT graph and the inference chain compute the same values through other shapes (one
# 12-token pass vs a prefix pass plus single tokens), so fp32 rounding differs: measured at most
# 4.8e-7 at |values| <= 3.4. 1e-5 absolute plus 1e-5 relative is 20x that, for any CPU's kernels.
CHAIN_TOL = {"atol": 1e-5, "rtol": 1e-5}


@pytest.fixture(scope="module")
def target() -> TargetModel:
    return tiny_target()


@pytest.mark.parametrize("extra", [{}, {"norm_output": True, "fc_norm": True}, {"num_hidden_layers": 2}])
def test_ttt_steps_equal_the_inference_chain(target: TargetModel, extra: dict) -> None:
    """TTT step j at index i == chain step j after a first pass over positions 0..i, with the
    ground-truth tokens fed in (the extended-diagonal mask and the position shift)."""
    drafter = init_drafter(
        tiny_draft_config(torch_dtype="float32", **extra), target, default_release(), seed=1, d2t=torch.arange(VD)
    )
    torch.manual_seed(3)
    ids = torch.randint(0, V, (1, 12))
    aux = target.forward(ids, aux_ids=AUX).aux
    hidden = drafter.combine_hidden_states(aux)
    slots = [TTTSlot() for _ in drafter.layers]
    ttt, h = [], hidden
    for j in range(3):
        tok = torch.cat([ids[:, j + 1 :], torch.zeros(1, j + 1, dtype=torch.long)], 1)
        normed, h = drafter(tok, torch.arange(j, 12 + j)[None], h, slots)
        ttt.append(normed)
    for i in (0, 4, 8):
        cache = drafter.new_cache()
        normed, fed = drafter(ids[:, 1 : i + 2], torch.arange(i + 1)[None], hidden[:, : i + 1], cache.slots)
        torch.testing.assert_close(normed[:, -1], ttt[0][:, i], **CHAIN_TOL)
        fed = fed[:, -1:]
        for j in (1, 2):
            normed, fed = drafter(ids[:, i + j + 1 : i + j + 2], torch.tensor([[i + j]]), fed, cache.slots)
            torch.testing.assert_close(normed[:, 0], ttt[j][:, i], **CHAIN_TOL)


def test_training_lowers_the_loss_and_exports_a_loadable_draft(target: TargetModel, tmp_path: Path) -> None:
    torch.manual_seed(0)
    seqs = [torch.randint(0, V, (int(n),)).tolist() for n in torch.randint(10, 24, (16,))]
    config = tiny_draft_config(torch_dtype="float32", fc_norm=True, norm_output=True)
    drafter = init_drafter(config, target, default_release(), seed=0, d2t=torch.arange(VD))
    res = train_draft(target, drafter, seqs, aux_ids=AUX, steps=40, lr=3e-3, seed=0, log_every=10)
    assert len(res.losses) == 40 and len(res.step_acc) == 3
    # Measured ratio 0.46: another CPU's fp32 rounding moves the trajectory far less than the 0.34 gap.
    assert sum(res.losses[-5:]) < 0.8 * sum(res.losses[:5])
    out = save_draft(drafter, config, tmp_path / "draft")
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert f.get_tensor("t2d").sum() == VD and f.get_tensor("d2t").dtype == torch.int64
    assert "embed_tokens.weight" not in keys and "lm_head.weight" in keys
    assert {"fc.weight", "fc_norm.0.weight", "layers.0.self_attn.q_proj.weight"} <= keys
    assert json.loads((out / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == list(AUX)
    back = load_drafter(out, default_release(), target_embed=target.embed_weight)
    ids, h = torch.randint(0, V, (1, 5)), torch.randn(1, 5, H)
    # fp32 weights saved and loaded unchanged, same kernels, same process: equal (default fp32 tolerance).
    torch.testing.assert_close(
        back(ids, torch.arange(5)[None], h, back.new_cache().slots)[0],
        drafter(ids, torch.arange(5)[None], h, drafter.new_cache().slots)[0],
    )


def test_save_draft_is_atomic(target: TargetModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """save_draft writes through io.atomic: replaces a previous output in one rename, and a
    failure or Ctrl-C mid-write leaves the previous output and no temp folder behind."""
    from eagle_convert.reference import train

    config = tiny_draft_config(torch_dtype="float32")
    drafter = init_drafter(config, target, default_release(), seed=0, d2t=torch.arange(VD))
    out = tmp_path / "draft"
    out.mkdir()
    (out / "old.txt").write_text("old")
    (tmp_path / ".draft.tmp-deadbeef").mkdir()  # a killed run's leftover
    save_draft(drafter, config, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert (out.stat().st_mode & 0o777) == 0o777 & ~_umask()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*_a, **_k) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "write_draft", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_draft(drafter, config, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_trainable_selection_and_l2sp(target: TargetModel) -> None:
    drafter = init_drafter(
        tiny_draft_config(torch_dtype="float32", fc_norm=True), target, default_release(), seed=0, d2t=torch.arange(VD)
    )
    assert trainable_names(drafter, "fc_norm") == [f"fc_norm.{i}.weight" for i in range(3)]
    assert "embed_tokens.weight" not in trainable_names(drafter, "all")
    assert trainable_names(drafter, ["fc.*", "norm.weight"]) == ["fc.weight", "norm.weight"]
    with pytest.raises(ValueError):
        trainable_names(drafter, ["nothing.*"])
    before = {k: v.clone() for k, v in drafter.state_dict().items()}
    seqs = [list(range(i, i + 12)) for i in range(8)]
    train_draft(target, drafter, seqs, aux_ids=AUX, steps=5, lr=1e-2, trainable="fc_norm")
    changed = {k for k, v in drafter.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {f"fc_norm.{i}.weight" for i in range(3)}

    def drift(l2sp: float) -> float:
        d = init_drafter(
            tiny_draft_config(torch_dtype="float32"), target, default_release(), seed=0, d2t=torch.arange(VD)
        )
        start = d.fc.weight.detach().clone()
        train_draft(target, d, seqs, aux_ids=AUX, steps=10, lr=1e-2, l2sp=l2sp, trainable=["fc.*"])
        return float((d.fc.weight.detach() - start).norm())

    assert drift(100.0) < drift(0.0)  # measured 0.22 vs 1.58


@pytest.mark.slow
def test_trained_pair_has_meaningful_acceptance() -> None:
    """Builds (or reuses from fixtures/.cache) the trained pair: AL >= 2 at k=3 on held-out
    prompts, lossless, and the draft really uses the target's aux states."""
    from fixtures.trained import build_trained_pair, trained_info

    target_dir, draft_dir = build_trained_pair(seed=0, log=lambda _: None)
    info = trained_info(target_dir.parent)
    # Measured AL 3.78 (build), 4.0 on these 4 prompts, 1.43 blind. A fixture trained on another
    # CPU has other bytes (its fp32 training rounds differently), so slightly other ALs: the bounds
    # sit 1.8-2.0 AL from the measured values (fine-tuning with other seeds moved AL by <= 0.06).
    assert info["eval"]["acceptance_length"] >= 2.0
    target = TargetModel.from_pretrained(target_dir)
    drafter = load_drafter(draft_dir, default_release(), target_embed=target.embed_weight)
    prompts = info["heldout_prompts"][:4]
    aux = drafter.cfg.aux_layer_ids
    runs = [speculative_generate(target, drafter, p, k=3, max_new_tokens=32, aux_ids=aux) for p in prompts]
    from eagle_convert.reference.loop import greedy_generate

    for r, p in zip(runs, prompts):  # lossless, up to fp32 ties (tests/numerics.py)
        assert_same_greedy_text(target, p, r.tokens, greedy_generate(target, p, 32))
    assert summarize(runs).acceptance_length >= 2.0
    with torch.no_grad():
        drafter.fc.weight.zero_()
    blind = summarize([speculative_generate(target, drafter, p, k=3, max_new_tokens=32, aux_ids=aux) for p in prompts])
    assert blind.acceptance_length < summarize(runs).acceptance_length - 0.5
