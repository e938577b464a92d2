"""`diff --served` / `served_diff`: two drafts that differ on disk but compute the same function as vLLM
serves them are reported the same; every served difference is named. Pairs are fixture mutants."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.served_diff import served_diff
from eagle_convert.vllm_model import Release, installed_status
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.edits import drop_tensors, edit_draft, pop_config, put_tensor, rewrite_tensors, set_config
from tests.jsonschemas import check_schema

FC_NORMS = [f"fc_norm.{i}.weight" for i in range(3)]
R32 = Release("0.32.0")


def _ones(s: dict[str, torch.Tensor]) -> None:
    for n in FC_NORMS:
        s[n] = torch.ones_like(s[n])


def test_identical_drafts_are_the_same(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle31"])
    d = served_diff(a, a, release=R32)
    assert d.same and d.differences == [] and d.equivalent == [] and d.release == "0.32.0"


def test_rope_theta_vs_rope_parameters_and_dtype_spellings_are_the_same(tmp_path: Path) -> None:
    a = edit_draft(tmp_path / "a", "vllm-eagle31", config=set_config(torch_dtype="bfloat16"))
    b = edit_draft(
        tmp_path / "b",
        "vllm-eagle31",
        config=lambda c: (
            pop_config("rope_theta")(c),
            c.update(rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, dtype="float32"),
        ),
    )
    d = served_diff(a, b, release=R32)
    assert d.same, d.differences  # rope read through; the draft runs in the target's dtype


def test_a_different_rope_theta_differs(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle31"])
    b = edit_draft(tmp_path / "b", "vllm-eagle31", config=set_config(rope_theta=500000.0))
    [diff] = served_diff(a, b, release=R32).differences
    assert (diff.kind, diff.key) == ("config", "rope")
    assert diff.a["rope_theta"] == 10000.0 and diff.b["rope_theta"] == 500000.0


def test_missing_fc_norm_equals_ones_but_not_trained_values(tmp_path: Path) -> None:
    missing = edit_draft(tmp_path / "m", "vllm-eagle31", tensors=drop_tensors(*FC_NORMS))
    ones = edit_draft(tmp_path / "o", "vllm-eagle31", tensors=_ones)
    trained = build_draft(tmp_path / "t", FIXTURE_MATRIX["vllm-eagle31"])  # 1 + noise
    d = served_diff(missing, ones, release=R32)
    assert d.same
    assert d.equivalent == [f"{n}: missing in A, where vLLM keeps 1.0; all ones in B" for n in FC_NORMS]
    d = served_diff(missing, trained, release=R32)
    assert [(x.key, x.a, x.b, x.note) for x in d.differences] == [
        (n, None, n, "missing in A: vLLM keeps 1.0 there; B holds trained values") for n in FC_NORMS
    ]


def test_null_ids_equal_absent_ids_and_differ_from_explicit_ones(tmp_path: Path) -> None:
    null = edit_draft(tmp_path / "n", "vllm-eagle3", config=set_config(eagle_aux_hidden_state_layer_ids=None))
    absent = edit_draft(tmp_path / "a", "vllm-eagle3", config=pop_config("eagle_aux_hidden_state_layer_ids"))
    cfg = json.loads((absent / "config.json").read_text())
    cfg["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)
    (absent / "config.json").write_text(json.dumps(cfg))
    cfg = json.loads((null / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = None
    (null / "config.json").write_text(json.dumps(cfg))
    assert served_diff(null, absent, release=R32).same
    explicit = build_draft(tmp_path / "e", FIXTURE_MATRIX["vllm-eagle3"])
    d = served_diff(null, explicit, release=R32)
    assert [(x.key, x.a, x.b) for x in d.differences] == [
        ("aux ids (V1 runner)", "default (2, N//2, N-3)", [2, 4, 5]),
        ("aux ids (V2 runner)", "default (2, N//2, N-3)", [2, 4, 5]),
    ]
    # 0.34.0 has no V1 runner: one row
    d = served_diff(null, explicit, release=Release("0.34.0"))
    assert [x.key for x in d.differences] == ["aux ids (V2 runner)"]


def test_native_and_speculators_layouts_of_one_upgrade_are_the_same(tmp_path: Path) -> None:
    src = build_draft(tmp_path / "e3", FIXTURE_MATRIX["vllm-eagle3"])
    target = tmp_path / "target"
    target.mkdir()
    tcfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "vocab_size": 256}
    (target / "config.json").write_text(json.dumps(tcfg | {"num_hidden_layers": 8}))
    outs = {}
    for layout in ("vllm", "speculators"):
        outs[layout] = tmp_path / layout
        args = ["upgrade", str(src), "--out", str(outs[layout]), "--layout", layout, "--target", str(target)]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
    d = served_diff(outs["vllm"], outs["speculators"], release=R32)
    assert d.same, d.differences


def test_dtype_of_equal_values_is_equivalent_and_value_changes_differ(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle31"])
    from safetensors import safe_open

    with safe_open(str(a / "model.safetensors"), "pt") as fh:
        fc = fh.get_tensor("fc.weight")
    wide = rewrite_tensors(a, tmp_path / "wide", change={"fc.weight": fc.float()})
    d = served_diff(a, wide, release=R32)
    assert d.same and d.equivalent == ["fc.weight: BF16 in A, F32 in B, equal values"]
    moved = edit_draft(
        tmp_path / "moved",
        "vllm-eagle31",
        tensors=put_tensor("norm.weight", lambda s: s["norm.weight"] + 0.5),
    )
    [diff] = served_diff(a, moved, release=R32).differences
    assert (diff.kind, diff.key) == ("tensor", "norm.weight") and diff.note.endswith(" in 64 elements")
    # +0.5 on values near 1.0 stored as BF16: each sum is rounded to BF16 (spacing 2**-7 in [1, 2)).
    assert abs(float(diff.note.split()[3]) - 0.5) <= 2**-7


def test_a_missing_layer_weight_is_uninitialised(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle31"])
    b = edit_draft(tmp_path / "b", "vllm-eagle31", tensors=drop_tensors("layers.0.mlp.down_proj.weight"))
    [diff] = served_diff(a, b, release=R32).differences
    assert diff.note == "missing in B: vLLM keeps uninitialised memory there"


# -- the CLI -----------------------------------------------------------------------------------------


def _cli(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], terminal_width=200)


def test_cli_served_verdict_and_exit_codes(tmp_path: Path) -> None:
    release = installed_status().rules.version
    missing = edit_draft(tmp_path / "m", "vllm-eagle31", tensors=drop_tensors(*FC_NORMS))
    ones = edit_draft(tmp_path / "o", "vllm-eagle31", tensors=_ones)
    res = _cli("diff", missing, ones, "--served", "--exit-code")
    assert res.exit_code == 0, res.output  # raw diff: 3 added tensors; as served: the same
    lines = res.output.splitlines()
    assert f"as served by vLLM {release}: the same function" in lines
    assert lines[-4:] == ["equal as served (3):"] + [
        f"  {n}: missing in A, where vLLM keeps 1.0; all ones in B" for n in FC_NORMS
    ]
    assert _cli("diff", missing, ones, "--exit-code").exit_code == 1  # without --served: the raw diff decides
    eagle3 = build_draft(tmp_path / "e3", FIXTURE_MATRIX["vllm-eagle3"])
    res = _cli("diff", eagle3, ones, "--served", "--exit-code")
    assert res.exit_code == 1
    assert f"as served by vLLM {release}: different functions (2 differences)" in res.output.splitlines()


def test_cli_served_json_and_refusal(tmp_path: Path) -> None:
    a = build_draft(tmp_path / "a", FIXTURE_MATRIX["vllm-eagle31"])
    res = _cli("diff", a, a, "--served", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    check_schema(data, "diff-report.schema.json")
    assert data["served"] == {
        "release": installed_status().rules.version,
        "same": True,
        "differences": [],
        "equivalent": [],
    }
    res = _cli("diff", a, a, "--served", "--headers-only")
    assert res.exit_code == 2
    assert res.output == "Error: --served compares tensor values: drop --headers-only\n"
