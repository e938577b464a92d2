"""The reference drafter computes what vLLM's llama_eagle3 / qwen3_eagle3 compute.

The math is checked against hand-written formulas from vLLM's source (a one-token pass, where
attention reduces to o_proj(v)), and the loader against every fixture layout vLLM accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from tinymodels import H, V, tiny_draft_config

from eagle_convert.reference.data import drafter_from_state_dict, load_drafter
from eagle_convert.reference.drafter import EagleDrafter, draft_config_from_dict, rms_norm
from eagle_convert.vllm_model import default_release

torch.set_num_threads(1)
VD = 40  # this file's own draft vocabulary (tinymodels.VD is 48)
# fp32 comparisons of one computation done two ways (by formula, or in another chunking of the
# sequence) differ only by rounding: measured 0 (formula) and at most 4.8e-7 (KV cache vs full
# sequence) at |values| <= 3.9. 1e-5 absolute plus 1e-5 relative is 20x that on any CPU's kernels.
# Comparisons without a tolerance argument run the same ops on the same values in one process
# (measured difference 0); torch's fp32 default (1.3e-6 relative + 1e-5 absolute) applies to them.
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _cfg(**kw) -> dict:
    return tiny_draft_config(**{"draft_vocab_size": VD, **kw})


def _drafter(seed: int = 0, **kw) -> EagleDrafter:
    torch.manual_seed(seed)
    m = EagleDrafter(draft_config_from_dict(_cfg(**kw), default_release()))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3 if p.dim() == 1 else 0.1)
        m.d2t.copy_(torch.arange(VD) * 1)  # draft id i -> target id 2i
    return m


def _run(m: EagleDrafter, ids, hidden):
    t = ids.shape[1]
    return m(ids, torch.arange(t)[None], hidden, m.new_cache().slots)


@pytest.mark.parametrize("nbr", [False, True])
def test_one_token_pass_matches_vllm_formula(nbr: bool) -> None:
    """T=1: attention is o_proj(v); then vLLM's fused add+norm, MLP and final (normed, prenorm)."""
    m = _drafter(norm_before_residual=nbr)
    layer, eps = m.layers[0], 1e-5
    ids, h = torch.tensor([[7]]), torch.randn(1, 1, H)
    normed, aux = _run(m, ids, h)
    emb = rms_norm(m.embed_tokens(ids), layer.input_layernorm.weight, eps)
    hn = rms_norm(h, layer.hidden_norm.weight, eps)
    residual = hn if nbr else h
    x = torch.cat([emb, hn], -1)
    v = layer.self_attn.v_proj(x).view(1, 1, 2, H // 4)  # 2 kv heads, each serves 2 q heads
    attn = layer.self_attn.o_proj(v.repeat_interleave(2, dim=2).reshape(1, 1, H))
    res1 = attn + residual
    mlp = layer.mlp
    y = rms_norm(res1, layer.post_attention_layernorm.weight, eps)
    out = mlp.down_proj(F.silu(mlp.gate_proj(y)) * mlp.up_proj(y))
    prenorm = out + res1
    torch.testing.assert_close(aux, prenorm, **TOL)
    torch.testing.assert_close(normed, rms_norm(prenorm, m.norm.weight, eps), **TOL)


def test_norm_output_feeds_back_the_normed_state() -> None:
    a, b = _drafter(), _drafter(norm_output=True)
    ids, h = torch.randint(0, V, (1, 6)), torch.randn(1, 6, H)
    na, aux_a = _run(a, ids, h)
    nb, aux_b = _run(b, ids, h)
    torch.testing.assert_close(na, nb)  # no new parameters, same logits path
    torch.testing.assert_close(aux_b, nb)
    assert not torch.allclose(aux_a, na)


def test_norm_before_residual_changes_the_function() -> None:
    ids, h = torch.randint(0, V, (1, 5)), 3 * torch.randn(1, 5, H)
    assert not torch.allclose(_run(_drafter(), ids, h)[0], _run(_drafter(norm_before_residual=True), ids, h)[0])


def test_incremental_cache_equals_full_sequence() -> None:
    m = _drafter(num_hidden_layers=2)
    ids, h = torch.randint(0, V, (1, 9)), torch.randn(1, 9, H)
    full, _ = _run(m, ids, h)
    cache = m.new_cache()
    outs = [m(ids[:, :4], torch.arange(4)[None], h[:, :4], cache.slots)[0]]
    for i in range(4, 9):
        outs.append(m(ids[:, i : i + 1], torch.tensor([[i]]), h[:, i : i + 1], cache.slots)[0])
    torch.testing.assert_close(torch.cat(outs, 1), full, **TOL)
    cache.truncate(6)  # dropping slots and recomputing them gives the same values
    again = m(ids[:, 6:], torch.arange(6, 9)[None], h[:, 6:], cache.slots)[0]
    torch.testing.assert_close(again, full[:, 6:], **TOL)


def test_combine_hidden_states_fc_norm_per_chunk_and_input_norm() -> None:
    aux = torch.randn(2, 3, 3 * H) * torch.tensor([1.0, 10.0, 100.0]).repeat_interleave(H)
    m = _drafter(fc_norm=True)
    want = m.fc(torch.cat([rms_norm(c, n.weight, 1e-5) for c, n in zip(aux.chunk(3, -1), m.fc_norm)], -1))
    torch.testing.assert_close(m.combine_hidden_states(aux), want)
    m = _drafter(norm_before_fc=True)
    torch.testing.assert_close(m.combine_hidden_states(aux), m.fc(rms_norm(aux, m.input_norm.weight, 1e-5)))


def test_compute_logits_scatters_through_d2t_offsets() -> None:
    m = _drafter()
    normed = torch.randn(1, 2, H)
    draft = m.draft_logits(normed)
    full = m.compute_logits(normed)
    assert full.shape == (1, 2, V)
    torch.testing.assert_close(full[..., 0 : 2 * VD : 2], draft)
    assert torch.isinf(full[..., 1::2]).all()
    assert (full.argmax(-1) == 2 * draft.argmax(-1)).all()


def test_config_resolution_follows_vllm() -> None:
    c = draft_config_from_dict(_cfg(eagle_aux_hidden_state_layer_ids=[1, 3, 4, 6]), default_release())
    assert c.num_aux_hidden_states == 3  # llama path ignores the top-level ids for the count
    c = draft_config_from_dict(
        _cfg(architectures=["Qwen3ForCausalLM"], eagle_aux_hidden_state_layer_ids=[1, 3, 4, 6]), default_release()
    )
    # Qwen3Config's default theta is 10000 (tables.ROPE_THETA_DEFAULTS): the engine used to say 1e6
    assert c.qwen3 and c.num_aux_hidden_states == 4 and c.rope_theta == 10000.0
    c = draft_config_from_dict(
        {
            "speculators_model_type": "eagle3",
            "draft_vocab_size": VD,
            "transformer_layer_config": _cfg(),
            "norm_output": True,
        },
        default_release(),
    )
    assert c.norm_before_residual and c.norm_output  # speculators path defaults nbr to True
    c = draft_config_from_dict(_cfg(eagle_config={"norm_before_fc": True}, norm_before_fc=False), default_release())
    assert c.norm_before_fc


def test_save_load_roundtrip_midlayer_and_strictness(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    m = _drafter(fc_norm=True)
    sd = {
        k.replace("layers.0.", "midlayer."): v.contiguous()
        for k, v in m.state_dict().items()
        if k != "embed_tokens.weight"
    }
    sd["t2d"] = torch.zeros(V, dtype=torch.bool)
    save_file(sd, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(_cfg(fc_norm=True)))
    with pytest.raises(ValueError, match="embed_tokens"):
        load_drafter(tmp_path, default_release())
    back = load_drafter(tmp_path, default_release(), target_embed=m.embed_tokens.weight)
    ids, h = torch.randint(0, V, (1, 4)), torch.randn(1, 4, H)
    torch.testing.assert_close(_run(back, ids, h)[0], _run(m, ids, h)[0])
    bad = dict(m.state_dict(), **{"layers.0.self_attn.qkv_proj.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="no module or parameter"):
        drafter_from_state_dict(m.cfg, bad)


def test_qwen3_arch_applies_per_head_qk_norm() -> None:
    m = _drafter(architectures=["Eagle3Qwen3ForCausalLM"])
    assert hasattr(m.layers[0].self_attn, "q_norm")
    ids, h = torch.randint(0, V, (1, 5)), torch.randn(1, 5, H)
    before = _run(m, ids, h)[0]
    with torch.no_grad():
        m.layers[0].self_attn.k_norm.weight.mul_(3.0)
    assert not torch.allclose(before, _run(m, ids, h)[0])


def test_loads_every_vllm_loadable_fixture_layout(tmp_path: Path) -> None:
    from fixtures.drafts import FIXTURE_MATRIX, build_draft

    for name, spec in FIXTURE_MATRIX.items():  # the kimi-mla rows too: MLA attention is reference/mla.py
        d = build_draft(tmp_path / name, spec)
        emb = torch.randn(spec.vocab_size, spec.hidden)
        if spec.layout == "legacy-aux-norm" and spec.variant != "eagle3":
            # vLLM reads no use_aux_norm, so fc_norm is off and the aux_norm_* weights have no parameter:
            # the reference raises vLLM's own load error, as validate's E104/E105 predict.
            with pytest.raises(ValueError, match="There is no module or parameter named"):
                load_drafter(d, default_release(), target_embed=emb, target_lm_head=emb)
            continue
        m = load_drafter(d, default_release(), target_embed=emb, target_lm_head=emb)
        c = m.cfg
        aux = torch.randn(1, 4, c.num_aux_hidden_states * c.target_hidden_size)
        normed, _ = _run(m, torch.randint(0, spec.vocab_size, (1, 4)), m.combine_hidden_states(aux))
        logits = m.compute_logits(normed)
        assert logits.shape == (1, 4, spec.vocab_size) and torch.isfinite(logits.amax(-1)).all(), name


@pytest.mark.parametrize(
    "rope",
    [
        {},
        {"rope_theta": 500000.0},
        {"rope_theta": 1e6, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}},
        {  # the legacy dict wins over rope_parameters, as in transformers 5 (vLLM 0.32)
            "rope_scaling": {"rope_type": "linear", "factor": 2.0},
            "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0},
        },
        {  # llama3 without original_max_position_embeddings: max_position_embeddings fills it
            "max_position_embeddings": 4096,
            "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        },
    ],
)
def test_rope_is_vllm_models_reading(rope: dict) -> None:
    """The engine's rotary embedding is built from `vllm_model.rope_parameters`, the dict validate reports."""
    from eagle_convert.vllm_model import rope_parameters

    cfg = _cfg(**rope)
    want = rope_parameters(cfg)
    c = draft_config_from_dict(cfg, default_release())
    assert c.rope_theta == want["rope_theta"]
    assert c.rope_scaling == (None if want["rope_type"] == "default" else want)
    EagleDrafter(c)  # every case builds
