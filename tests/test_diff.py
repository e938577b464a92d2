"""`eagle-convert diff A B`: added / removed / renamed / changed tensors (max abs diff) and the config diff."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.diff import DiffOptions, config_diff, diff_checkpoints
from fixtures.drafts import FIXTURE_MATRIX, build_draft, draft_state


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory):
    """(input, upgraded output) for a few fixtures, upgraded once through the CLI."""
    from fixtures.drafts import FIXTURE_MATRIX as M

    base = tmp_path_factory.mktemp("diff")
    out = {}
    for name in ("specforge-eagle3", "vllm-eagle3-fp16-bin", "nemo-eagle3"):
        src = build_draft(base / name, M[name])
        extra = ["--aux-layer-ids", "2,4,5"] if name == "nemo-eagle3" else []
        res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(base / f"{name}-31"), *extra])
        assert res.exit_code == 0, res.output
        out[name] = (src, base / f"{name}-31")
    return out


def test_upgrade_shows_as_additions_renames_and_config(upgraded) -> None:
    src, out = upgraded["specforge-eagle3"]
    d = diff_checkpoints(src, out)
    assert [r["name"] for r in d.added] == ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"]
    assert d.removed == [] and d.changed == []
    assert sorted(d.renamed)[0] == ("midlayer.hidden_norm.weight", "layers.0.hidden_norm.weight")
    assert len(d.renamed) == 10 and d.identical == 15
    assert d.config.added["fc_norm"] is True and d.config.added["norm_output"] is True
    # SpecForge's eagle_config [1, 3, 4] are layer outputs: vLLM's [2, 4, 5] at the top level (eagle_config kept)
    assert d.config.added["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert "_eagle_convert" in d.config.added and not d.config.changed and not d.same


def test_nemo_prefix_strip_is_a_rename(upgraded) -> None:
    src, out = upgraded["nemo-eagle3"]
    d = diff_checkpoints(src, out)
    assert ("model.fc.weight", "fc.weight") in d.renamed and ("lm_head.weight", "lm_head.weight") not in d.renamed
    assert d.config.changed["architectures"] == (["LlamaEagle3DraftModel"], ["LlamaForCausalLMEagle3"])
    assert not d.changed and not d.removed


def test_bin_against_its_safetensors_upgrade_is_byte_identical(upgraded) -> None:
    src, out = upgraded["vllm-eagle3-fp16-bin"]
    d = diff_checkpoints(src, out)
    assert len(d.added) == 3 and not d.changed and not d.renamed and d.identical == 15


def test_changed_values_report_the_max_abs_difference(tmp_path: Path) -> None:
    spec = FIXTURE_MATRIX["vllm-eagle3"]
    a = build_draft(tmp_path / "a", spec)
    b = build_draft(tmp_path / "b", replace(spec, seed=1))
    d = diff_checkpoints(a, b)
    sa, sb = draft_state(spec), draft_state(replace(spec, seed=1))
    changed = {c.a: c for c in d.changed}
    assert set(changed) == {k for k in sa if not torch.equal(sa[k], sb[k])}
    for name, c in changed.items():
        delta = (sa[name].double() - sb[name].double()).abs()
        # Exact on any CPU: bf16 and fp32 values are exact in float64, a subtraction is correctly rounded
        # (IEEE) whatever the vector width, and max picks a value without rounding (so below, too).
        assert c.max_abs_diff == pytest.approx(float(delta.max()), rel=0, abs=0)
        assert c.differing_elements == int((delta != 0).sum())


def test_dtype_change_is_a_change_with_its_difference(tmp_path: Path) -> None:
    spec = FIXTURE_MATRIX["vllm-eagle3"]
    a = build_draft(tmp_path / "a", spec)
    b = build_draft(tmp_path / "b", replace(spec, dtype="fp32"))
    d = diff_checkpoints(a, b)
    fc = next(c for c in d.changed if c.a == "fc.weight")
    assert fc.dtype == ("BF16", "F32") and fc.shape == ([64, 192], [64, 192])
    want = draft_state(spec)["fc.weight"].double() - draft_state(replace(spec, dtype="fp32"))["fc.weight"].double()
    assert fc.max_abs_diff == float(want.abs().max())
    assert d.config.changed["torch_dtype"] == ("bfloat16", "float32")
    shallow = diff_checkpoints(a, b, DiffOptions(headers_only=True))
    assert next(c for c in shallow.changed if c.a == "fc.weight").max_abs_diff is None


def test_shape_change_and_removed_tensors(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle3"])
    b = build_draft(tmp_path / "b", FIXTURE_MATRIX["vllm-eagle3-full"])
    d = diff_checkpoints(a, b)
    assert {r["name"] for r in d.removed} == {"d2t", "t2d"}
    lm = next(c for c in d.changed if c.a == "lm_head.weight")
    assert lm.shape == ([128, 64], [256, 64]) and lm.max_abs_diff is None


def test_cli_json_and_exit_code(upgraded) -> None:
    src, out = upgraded["specforge-eagle3"]
    res = run("diff", src, out, "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["same"] is False and len(data["added"]) == 3 and len(data["renamed"]) == 10
    assert data["config"]["added"]["fc_norm"] is True
    assert run("diff", src, out, "--exit-code").exit_code == 1
    same = run("diff", src, src, "--exit-code")
    assert same.exit_code == 0 and "no differences" in same.output


def test_cli_table_output(upgraded) -> None:
    src, out = upgraded["specforge-eagle3"]
    res = run("diff", src, out)
    assert res.exit_code == 0, res.output
    assert "added (only in b): 3" in res.output and "renamed: 10" in res.output
    assert "3 added, 0 removed, 10 renamed, 0 changed, 15 identical; config: 6 keys differ" in res.output


def test_config_diff_walks_objects_present_on_both_sides() -> None:
    a = {"x": 1, "eagle_config": {"ids": [1, 2], "keep": True}, "gone": 1, "flag": 1}
    b = {"x": 1, "eagle_config": {"ids": [1, 3], "keep": True, "new": 0}, "obj": {"k": 1}, "flag": True}
    d = config_diff(a, b)
    assert d.added == {"eagle_config.new": 0, "obj": {"k": 1}}
    assert d.removed == {"gone": 1}
    assert d.changed == {"eagle_config.ids": ([1, 2], [1, 3]), "flag": (1, True)}
