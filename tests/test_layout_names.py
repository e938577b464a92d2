"""Layout detection and key renames read every tensor name once (issue 33: a 200,000-tensor header):
the fast paths give exactly what the name-by-name rules give, collisions included."""

from __future__ import annotations

import pytest

from eagle_convert.draft import canonical_map, canonical_name
from eagle_convert.draft.kind import detect_kind
from eagle_convert.draft.layout import detect_attention
from eagle_convert.errors import UnknownLayoutError


@pytest.mark.parametrize(
    ("name", "canon"),
    [
        ("model.midlayer.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.weight"),  # renames chain
        ("model.aux_norm_low.weight", "fc_norm.0.weight"),
        ("midlayer.hidden_norm.weight", "layers.0.hidden_norm.weight"),
        ("layers.0.extra.7.weight", "layers.0.extra.7.weight"),  # no rename prefix: unchanged
        ("fc.weight", "fc.weight"),
        ("xmodel.fc.weight", "xmodel.fc.weight"),  # a prefix only counts at the start
    ],
)
def test_canonical_name(name: str, canon: str) -> None:
    assert canonical_name(name) == canon


def test_canonical_map_names_the_first_collision() -> None:
    assert canonical_map(["fc.weight", "midlayer.mlp.up_proj.weight"]) == {
        "fc.weight": "fc.weight",
        "midlayer.mlp.up_proj.weight": "layers.0.mlp.up_proj.weight",
    }
    with pytest.raises(UnknownLayoutError, match="^tensors 'midlayer.fc.weight' and 'layers.0.fc.weight' both map"):
        canonical_map(["d2t", "midlayer.fc.weight", "layers.0.fc.weight", "model.layers.0.fc.weight"])
    with pytest.raises(UnknownLayoutError, match="^tensors 'fc.weight' and 'fc.weight' both map to 'fc.weight'"):
        canonical_map(["fc.weight", "fc.weight"])  # a name given twice, as before


def test_suffix_and_layer_rules_scan_the_names() -> None:
    mla = ["layers.0.self_attn.kv_a_proj_with_mqa.weight", *(f"x.{i}" for i in range(1000))]
    assert detect_attention(mla)[0] == "mla"
    assert detect_attention([*(f"x.{i}" for i in range(1000)), "layers.0.self_attn.q_norm.weight"])[0] == "qwen3"
    assert detect_attention(["layers.0.self_attn.q_proj.weight"])[0] == "llama"
    target = [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(4)] + ["model.embed_tokens.weight"]
    kind = detect_kind(target, {"architectures": ["LlamaForCausalLM"]})
    assert kind is not None and kind.id == "causal-lm" and "4 decoder layers" in kind.reasons
