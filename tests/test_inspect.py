"""inspect on a fixture of every producer layout: detected layout, variant and dimensions."""

from __future__ import annotations

import json

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.draft.inspect import inspect_checkpoint
from eagle_convert.vllm_model import default_release
from fixtures.drafts import EXPECTED, FIXTURE_MATRIX

# Fixture layout name -> what detection must call it. Kimi MLA drafts ship in vLLM-native names.
LAYOUT_NAMES = {"kimi-mla": "vllm"}
VARIANT_NAMES = {
    "eagle3": "EAGLE-3",
    "eagle31": "EAGLE-3.1",
    "eagle31-fc-norm-only": "EAGLE-3.1",
    "norm_before_fc": "norm_before_fc",
}
DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


@pytest.mark.parametrize("name", sorted(FIXTURE_MATRIX))
def test_every_layout_is_recognised(name: str, built_fixtures) -> None:
    exp = EXPECTED[name]
    info = describe(open_checkpoint(built_fixtures(name)), default_release())
    expected_layout = LAYOUT_NAMES.get(exp["layout"], exp["layout"])
    if expected_layout == "legacy-aux-norm" and exp["variant"] == "eagle3":
        expected_layout = "specforge"  # without aux_norm_* tensors the two layouts are identical
    assert info.layout == expected_layout
    assert info.variant == VARIANT_NAMES[exp["variant"]]
    assert info.attention == exp["arch"]
    assert (info.hidden_size, info.target_hidden_size, info.num_aux) == (exp["H"], exp["Ht"], exp["A"])
    assert (info.vocab_size, info.draft_vocab_size) == (exp["V"], exp["Vd"])
    assert info.num_layers == exp["num_layers"]
    assert info.aux_layer_ids == exp["aux_ids"]
    assert info.storage == exp["storage"]
    assert info.has_embed == exp["has_embed"]
    assert (info.vocab.d2t is not None, info.vocab.t2d is not None) == (exp["has_d2t"], exp["has_t2d"])
    for flag in ("fc_norm", "norm_output", "norm_before_fc"):
        assert info.flags[flag].value == exp[flag], flag
    assert DTYPES[exp["dtype"]] in info.dtypes
    assert info.variant_reasons and info.layout_reasons


def test_vocab_mapping_is_read_and_checked(built_fixtures) -> None:
    info = describe(open_checkpoint(built_fixtures("vllm-eagle3")), default_release())
    assert info.vocab.reduced
    assert info.vocab.d2t == {
        "shape": [128],
        "dtype": "I64",
        "min_target_id": 0,
        "max_target_id": 255,
        "unique": True,
        "increasing": True,
    }
    assert info.vocab.t2d == {"shape": [256], "dtype": "BOOL", "count": 128, "consistent_with_d2t": True}


def test_variant_reasons_name_the_rule(built_fixtures) -> None:
    info = describe(open_checkpoint(built_fixtures("specforge-eagle31")), default_release())
    assert info.variant_reasons == [
        "fc_norm is true (fc_norm)",
        "norm_output is true (norm_output)",
        "has 3 fc_norm.i tensors",
    ]
    legacy = describe(open_checkpoint(built_fixtures("legacy-aux-norm-eagle31")), default_release())
    assert "fc_norm is true (use_aux_norm)" in legacy.variant_reasons
    assert legacy.canonical["aux_norm_low.weight"] == "fc_norm.0.weight"


def test_nemo_names_are_canonicalised(built_fixtures) -> None:
    info = describe(open_checkpoint(built_fixtures("nemo-eagle31")), default_release())
    assert info.canonical["model.fc_norm.0.weight"] == "fc_norm.0.weight"
    assert info.canonical["model.layers.0.self_attn.q_proj.weight"] == "layers.0.self_attn.q_proj.weight"
    assert info.canonical["lm_head.weight"] == "lm_head.weight"
    assert info.vllm_architecture == "Eagle3LlamaEagle3DraftModel"  # unregistered: validate flags it


def test_speculators_flags_follow_vllm_defaults(built_fixtures) -> None:
    info = describe(open_checkpoint(built_fixtures("speculators-eagle3")), default_release())
    assert info.flags["norm_before_residual"].value is True
    assert info.vllm_architecture == "Eagle3LlamaForCausalLM"


def test_single_file_input(built_fixtures) -> None:
    folder = built_fixtures("vllm-eagle3")
    report = inspect_checkpoint(str(folder / "model.safetensors"))
    assert report.info.layout == "vllm"
    assert report.has_config  # the folder's config.json is used


def test_report_json_is_stable(built_fixtures) -> None:
    data = inspect_checkpoint(str(built_fixtures("vllm-eagle3"))).to_dict()
    json.dumps(data)
    assert data["schema_version"] == 2
    assert set(data) >= {"layout", "variant", "hidden_size", "num_aux", "aux_layer_ids", "tensors", "dtypes"}
    row = next(r for r in data["tensors"] if r["name"] == "fc.weight")
    assert row == {
        "name": "fc.weight",
        "canonical": "fc.weight",
        "dtype": "BF16",
        "shape": [64, 192],
        "bytes": 64 * 192 * 2,
        "file": "model.safetensors",
    }


@pytest.mark.parametrize("name", ["vllm-eagle3", "speculators-eagle31", "kimi-mla-eagle3", "safeailab-eagle3"])
def test_report_matches_published_schema(name: str, built_fixtures) -> None:
    import jsonschema

    from eagle_convert.draft import schemas

    data = json.loads(json.dumps(inspect_checkpoint(str(built_fixtures(name))).to_dict()))
    jsonschema.validate(data, schemas.load_schema("inspect-report.schema.json"))
