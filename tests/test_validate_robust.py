"""validate never crashes on a malformed config: every wrong-typed or absurd field becomes findings.

A validator that raises a traceback on the broken checkpoints it exists for is no validator; this
sweeps the config fields vLLM reads with values of every wrong JSON type and absurd sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_validate_codes import target_config

from eagle_convert.validate.run import validate_checkpoint
from fixtures.drafts import FIXTURE_MATRIX, build_draft

FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "eagle_aux_hidden_state_layer_ids",
    "eagle_config",
    "architectures",
    "num_aux_hidden_states",
    "rms_norm_eps",
    "hidden_act",
    "max_position_embeddings",
    "fc_norm",
    "rope_theta",
    "head_dim",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "model_type",
    "quantization_config",
    "rope_scaling",
    "transformer_layer_config",
    "speculators_model_type",
)
VALUES = (None, "x", -1, 0, 1.5, [], {}, True, [1, "a"], {"a": 1}, 10**12)


@pytest.mark.parametrize("name", ["vllm-eagle3", "speculators-eagle31", "kimi-mla-eagle31"])
def test_malformed_config_fields_give_findings_not_tracebacks(name: str, tmp_path: Path) -> None:
    draft = build_draft(tmp_path / name, FIXTURE_MATRIX[name])
    target = target_config(tmp_path / "target")
    original = json.loads((draft / "config.json").read_text())
    for field in FIELDS:
        for value in VALUES:
            (draft / "config.json").write_text(json.dumps(original | {field: value}))
            report = validate_checkpoint(draft, target=target)  # must not raise
            assert all(f.code and f.message for f in report.findings)


def test_absurd_layer_count_is_reported_not_expanded(tmp_path: Path) -> None:
    draft = build_draft(tmp_path / "d", FIXTURE_MATRIX["vllm-eagle3"])
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 10**9}))
    report = validate_checkpoint(draft)
    assert [f.message for f in report.findings if f.code == "E304"] == [
        "num_hidden_layers is 1000000000: not a plausible draft (at most 1024)"
    ]


def test_declared_layers_missing_from_the_checkpoint_are_one_finding(tmp_path: Path) -> None:
    draft = build_draft(tmp_path / "d", FIXTURE_MATRIX["vllm-eagle3"])
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 3}))
    [hit] = validate_checkpoint(draft).findings
    assert (hit.code, hit.tensor, hit.field) == ("E101", "layers.1.*", "num_hidden_layers")
    assert hit.message.startswith("layers.1.*, layers.2.* missing: num_hidden_layers is 3 but the checkpoint has 1")
