"""One reading of a target's config.json (`draft.target.Target`), used by every command.

vLLM reads a multimodal target's sizes from its `text_config` whole (vLLM 0.32
`transformers_utils/config.py` `get_hf_text_config`); before `Target`, validate merged `text_config`
over the top level, upgrade preferred the top level, finetune took `text_config` alone and smoke took
the top-level context first. The target below disagrees with itself on purpose: every command must
now give vLLM's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.draft.target import Target, load_target
from eagle_convert.errors import CheckpointNotFoundError, ConfigError
from eagle_convert.upgrade.configgen import read_target
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import default_release
from fixtures.edits import edit_draft

TEXT = {
    "model_type": "qwen3_vl_text",
    "hidden_size": 64,
    "vocab_size": 256,
    "num_hidden_layers": 40,
    "num_attention_heads": 4,
    "max_position_embeddings": 4096,
}
# The top level says 8 layers and a 2048 context: vLLM never reads them (the text config wins whole).
MULTIMODAL = {
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "model_type": "qwen3_vl",
    "num_hidden_layers": 8,
    "max_position_embeddings": 2048,
    "text_config": TEXT,
    "vision_config": {"depth": 2},
}


def _target(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_text_config_is_read_whole_as_vllm_does() -> None:
    t = Target.from_config(MULTIMODAL, "org/vl")
    assert (t.num_layers, t.hidden_size, t.vocab_size, t.max_position_embeddings) == (40, 64, 256, 4096)
    assert t.text_key == "text_config" and t.model_type == "qwen3_vl"
    assert t.architectures == ("Qwen3VLForConditionalGeneration",)
    # no rope field: the text config class's default (Qwen3VLTextConfig: 500000), not written
    assert t.rope == {"rope_theta": 500000.0, "rope_type": "default"}
    assert not t.rope_declared and not t.rope_theta_declared
    # a text config without a field has none: the top level's is not a fallback
    t = Target.from_config({**MULTIMODAL, "text_config": {"hidden_size": 64}}, "org/vl")
    assert t.num_layers is None and t.max_position_embeddings is None
    with pytest.raises(ConfigError, match="no positive num_hidden_layers"):
        t.require_layers(hint="pass --aux-layer-ids instead")


def test_a_plain_target_is_its_top_level() -> None:
    cfg = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "rope_theta": 500000.0}
    t = Target.from_config(cfg, "meta-llama/x")
    assert (t.num_layers, t.hidden_size, t.text_key) == (32, 4096, None)
    assert t.rope == {"rope_theta": 500000.0, "rope_type": "default"} and t.rope_theta_declared


def test_quantization_and_dtype_are_read_at_the_top_level_first() -> None:
    top = {"quant_method": "fp8"}
    inner = {"quant_method": "awq"}
    cfg = {**MULTIMODAL, "quantization_config": top, "text_config": {**TEXT, "quantization_config": inner}}
    assert Target.from_config(cfg, "x").quantization == top
    cfg = {**MULTIMODAL, "text_config": {**TEXT, "quantization_config": inner, "dtype": "float16"}}
    t = Target.from_config(cfg, "x")
    assert t.quantization == inner and t.dtype == "float16"
    assert Target.from_config({**cfg, "torch_dtype": "bfloat16"}, "x").dtype == "bfloat16"


def test_two_text_configs_or_a_non_object_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"several text configs \(decoder, text_config\)"):
        Target.from_config({**MULTIMODAL, "decoder": {"num_hidden_layers": 2}}, "x")
    with pytest.raises(ConfigError, match="text_config is not an object"):
        Target.from_config({**MULTIMODAL, "text_config": [1]}, "x")


def test_load_target_takes_a_folder_or_its_config_file(tmp_path: Path) -> None:
    folder = _target(tmp_path / "t", MULTIMODAL)
    for ref in (folder, folder / "config.json"):
        t = load_target(ref)
        assert t.num_layers == 40 and t.description == str(folder) and t.ref == str(ref)
    with pytest.raises(CheckpointNotFoundError, match=r"no config.json \(needed by `target`\)"):
        load_target(tmp_path)


def test_upgrade_validate_finetune_and_smoke_agree_on_a_multimodal_target(tmp_path: Path) -> None:
    """Behaviour change: upgrade used to take the top level's 8 layers, validate the text config's 40."""
    from eagle_convert.finetune.plan import _check_pair
    from eagle_convert.measure.prompts import _target_context
    from eagle_convert.measure.vllm_measure import target_config

    target = _target(tmp_path / "target", MULTIMODAL)
    draft = edit_draft(
        tmp_path / "draft",
        config=lambda c: [c.pop(k, None) for k in ("eagle_aux_hidden_state_layer_ids", "eagle_config")],
    )
    ckpt = open_checkpoint(draft)
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False), target=read_target(str(target)))
    assert plan.aux.ids == (2, 20, 37)  # vLLM's (2, N//2, N-3) for N = 40
    report = validate_checkpoint(draft, target=target)
    [w320] = [f for f in report.findings if f.code == "W320"]
    assert "vLLM taps (2, 20, 37) for this 40-layer target" in w320.message
    assert _check_pair(
        draft,
        {**ckpt.config, "eagle_aux_hidden_state_layer_ids": [2, 20, 37]},
        target_config(target),
        default_release(),
    ) == [
        2,
        20,
        37,
    ]
    assert _target_context(target) == 4096  # smoke used the top level's 2048 first
