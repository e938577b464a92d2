"""vllm_model's reading of what vLLM serves beyond the class (method guess, rope, sliding window),
checked against the libraries vLLM 0.32 itself calls, and the findings built on them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import (
    architecture_for_method,
    default_release,
    guess_method,
    read_config,
    rope_parameters,
    sliding_windows,
)
from eagle_convert.vllm_model.tables import ROPE_KEYS
from fixtures.producer_bugs import BASE, EMBED, edit_draft, regenerate_d2t
from fixtures.target_weights import build_target_for

YARN = {
    "rope_type": "yarn",
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
}
ROPE_CASES: dict[str, dict[str, Any]] = {
    "theta only": {"rope_theta": 500000.0},
    "nothing": {},
    "parameters beat rope_theta": {
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "rope_theta fills parameters": {"rope_theta": 500000.0, "rope_parameters": {"rope_type": "default"}},
    "legacy yarn": {"rope_theta": 150000.0, "rope_scaling": YARN},
    "yarn without original max": {
        "rope_theta": 150000.0,
        "max_position_embeddings": 2048,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0},
    },
    "legacy type key": {
        "rope_theta": 500000.0,
        "rope_scaling": {
            "type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    "rope_scaling beats rope_parameters": {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    },
    "top-level original max ignored": {
        "max_position_embeddings": 8192,
        "original_max_position_embeddings": 1024,
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
    },
    "null scaling": {"rope_theta": 1e6, "rope_scaling": None},
}


@pytest.mark.parametrize("name", sorted(ROPE_CASES))
def test_rope_parameters_match_transformers(name: str) -> None:
    """What vLLM 0.32 builds its rotary embedding from is Transformers 5's standardised dict."""
    from transformers import AutoConfig

    logging.getLogger("transformers").setLevel(logging.ERROR)
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 2048}
    cfg |= json.loads(json.dumps(ROPE_CASES[name]))
    theirs = AutoConfig.for_model(**json.loads(json.dumps(cfg))).rope_parameters
    ours = rope_parameters(cfg)
    assert {k: ours.get(k) for k in ROPE_KEYS} == {k: theirs.get(k) for k in ROPE_KEYS}


@pytest.mark.parametrize(
    "fields",
    [
        {"use_sliding_window": True, "sliding_window": 512, "max_window_layers": 0},
        {"use_sliding_window": True, "sliding_window": 512},  # max_window_layers 28 by default: no window
        {"use_sliding_window": False, "sliding_window": 512, "max_window_layers": 0},
        {"layer_types": ["sliding_attention"], "sliding_window": 256},  # use_sliding_window false: no window
        {"layer_types": ["sliding_attention"], "sliding_window": 256, "use_sliding_window": True},
    ],
)
def test_qwen3_sliding_window_matches_transformers(fields: dict[str, Any]) -> None:
    from transformers import Qwen3Config

    cfg = {"architectures": ["Eagle3Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 1} | fields
    tcfg = Qwen3Config(**{k: v for k, v in cfg.items() if k != "architectures"})
    want = [tcfg.sliding_window if t == "sliding_attention" else None for t in tcfg.layer_types]
    assert sliding_windows(read_config(cfg, default_release())) == want


def test_llama_and_mla_drafts_read_only_layer_types() -> None:
    llama = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 2, "sliding_window": 128}
    assert sliding_windows(read_config(llama | {"use_sliding_window": True}, default_release())) == [None, None]
    assert sliding_windows(
        read_config(llama | {"layer_types": ["sliding_attention", "full_attention"]}, default_release())
    ) == [128, None]
    mla = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "num_hidden_layers": 1, "sliding_window": 128}
    assert sliding_windows(read_config(mla | {"layer_types": ["sliding_attention"]}, default_release())) == [None]


def test_method_guess_and_class_per_method() -> None:
    """SpeculativeConfig.__post_init__'s path rules and EAGLEConfig's renaming (the examples in vLLM's comments)."""
    assert guess_method("yuhuili/EAGLE-LLaMA3-Instruct-8B") == "eagle"
    assert guess_method("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B") == "eagle3"
    assert guess_method("AngelSlim/Qwen3-8B_eagle3") == "eagle3"
    assert guess_method("z-lab/Qwen3-8B-DFlash-b16") == "dflash"
    assert guess_method("org/my-draft") == "draft_model"
    assert architecture_for_method("Qwen3ForCausalLM", "eagle3") == "Eagle3Qwen3ForCausalLM"
    assert architecture_for_method("LlamaForCausalLMEagle3", "eagle3") == "LlamaForCausalLMEagle3"
    assert architecture_for_method("LlamaForCausalLM", "eagle") == "EagleLlamaForCausalLM"
    assert architecture_for_method("LlamaForCausalLM", "draft_model") == "LlamaForCausalLM"


def _target(tmp_path: Path, draft: Path, **kw: Any) -> Path:
    return build_target_for(tmp_path / "target", draft, **kw)


def test_yarn_schedule_is_compared_key_by_key(tmp_path: Path) -> None:
    """A gpt-oss-like target: YaRN factor 32 over 4096 positions. A draft that copies only rope_type and
    factor gets original_max_position_embeddings from its own max_position_embeddings (2048)."""
    draft = edit_draft(
        tmp_path / "d",
        config=lambda c: c.update(rope_theta=150000.0, rope_scaling={"rope_type": "yarn", "factor": 32.0}),
    )
    target = _target(tmp_path, draft, rope_theta=150000.0, rope_scaling=YARN)
    [hit] = [f for f in validate_checkpoint(draft, target=target).findings if f.code == "W504"]
    assert "original_max_position_embeddings 2048 vs the target's 4096" in hit.message
    assert "truncate True vs the target's False" in hit.message
    fixed = edit_draft(tmp_path / "d2", config=lambda c: c.update(rope_theta=150000.0, rope_scaling=YARN))
    assert "W504" not in validate_checkpoint(fixed, target=target).codes()


def test_draft_without_rope_theta_gets_vllms_default(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=lambda c: c.pop("rope_theta"))
    target = _target(tmp_path, draft, rope_theta=150000.0)
    [hit] = [f for f in validate_checkpoint(draft, target=target).findings if f.code == "W504"]
    assert "rope_theta 10000.0 vs the target's 150000.0" in hit.message and "vLLM uses 10000" in hit.message


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda e: e * 8.0, "scaled by 0.125"),
        (lambda e: e.index_fill(0, torch.tensor([4]), float("nan")), "holds NaN/Inf in 1 of"),  # a sampled row
    ],
)
def test_embed_rescaled_or_nan(edit, words: str, tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", EMBED)
    if "NaN" in words:  # the NaN is in the draft; the target keeps the clean rows
        target = _target(tmp_path, draft)
        edit_draft(draft, EMBED, tensors=lambda s: s.update({"embed_tokens.weight": edit(s["embed_tokens.weight"])}))
    else:
        target = _target(tmp_path, draft, embed=edit)
    for deep in (False, True):
        [hit] = [f for f in validate_checkpoint(draft, target=target, deep=deep).findings if f.code == "E505"]
        assert words in hit.message, hit.message
        assert ("rows compared" in hit.message) == deep or "sampled rows" in hit.message


def test_deep_finds_a_d2t_shift_beyond_the_sampling_window(tmp_path: Path) -> None:
    """Drop six tokens early in the vocabulary: rows then sit six slots off, beyond the +-4 window the
    static check compares, so only --deep (every target row) finds where they belong."""
    draft = edit_draft(tmp_path / "d")
    target = _target(tmp_path, draft)
    for _ in range(6):
        regenerate_d2t(draft, at=20)
    assert "E506" not in validate_checkpoint(draft, target=target).codes()
    [hit] = [f for f in validate_checkpoint(draft, target=target, deep=True).findings if f.code == "E506"]
    assert "sampled rows match another target token than d2t maps them to" in hit.message


def test_tied_target_lm_head_is_its_embedding(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d")
    target = _target(tmp_path, draft, tied=True)
    regenerate_d2t(draft)
    report = validate_checkpoint(draft, target=target)
    assert "E506" in report.codes() and "model.embed_tokens.weight" in report.notes["target_weights"]


def test_target_dimensions_that_differ_skip_the_weight_checks(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", EMBED)
    target = _target(tmp_path, draft, hidden_size=128)  # E502 says why; rows of another width are not compared
    report = validate_checkpoint(draft, target=target)
    assert "E502" in report.codes() and not {"E505", "E506", "I507"} & report.codes()
    assert "target_weights" not in report.notes
    assert BASE.hidden == 64


def test_target_class_architecture_per_path(tmp_path: Path) -> None:
    """AngelSlim's Qwen3ForCausalLM (sglang #9135): with method eagle3 vLLM builds Eagle3Qwen3ForCausalLM; the
    path decides without one; a speculators config ignores `architectures` (its model_type picks the class)."""
    from fixtures.drafts import FIXTURE_MATRIX

    qwen = edit_draft(
        tmp_path / "Qwen3-8B_eagle3",
        FIXTURE_MATRIX["vllm-qwen3-eagle3"],
        config=lambda c: c.update(architectures=["Qwen3ForCausalLM"]),
    )
    [hit] = [f for f in validate_checkpoint(qwen).findings if f.code == "W312"]
    assert "EAGLEConfig renames it Eagle3Qwen3ForCausalLM" in hit.message and "gives eagle3" in hit.message
    assert hit.fix == 'Set architectures to ["Eagle3Qwen3ForCausalLM"] and serve with "method": "eagle3".'
    target = _target(tmp_path, qwen, architectures=["Qwen3ForCausalLM"], model_type="qwen3", rope_theta=1e6)
    [hit] = [f for f in validate_checkpoint(qwen, target=target).findings if f.code == "W312"]
    assert "is the target's class" in hit.message
    spec = edit_draft(
        tmp_path / "spec",
        FIXTURE_MATRIX["speculators-eagle3"],
        config=lambda c: c.update(architectures=["LlamaForCausalLM"]),
    )
    assert "W312" not in validate_checkpoint(spec).codes()
