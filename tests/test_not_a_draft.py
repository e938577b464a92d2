"""Not a draft at all: every command recognises a target model, MTP/NextN heads, Medusa, DFlash,
DSpark and MLP speculators (and P-EAGLE where it is unsupported), says what the checkpoint is and
what it expected, and exits 1 (validate: finding E004) — one detector, `draft/kind.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.kind import detect_kind
from fixtures.drafts import FIXTURE_MATRIX, build_draft, write_safetensors
from fixtures.producer_bugs import causal_lm, edit_draft

SWAP = "did you swap DRAFT and --target?"


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real tiny Llama target (fixtures/target.py) that smoke and the vLLM tests use."""
    from fixtures.target import build_target

    return build_target(tmp_path_factory.mktemp("t") / "target")


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _write(out: Path, tensors: dict[str, list[int]], config: dict) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(
        out / "model.safetensors",
        {k: torch.zeros(s, dtype=torch.bfloat16) for k, s in tensors.items()},
        {"format": "pt"},
    )
    (out / "config.json").write_text(json.dumps(config))
    return out


# Each: (kind id, what the message names, tensors, config). Shapes are tiny; names are the producers'.
MTP = "an MTP / NextN head (multi-token prediction layers of the target)"
OTHERS = {
    "deepseek-nextn": (
        "mtp",
        MTP,
        {
            "model.layers.0.eh_proj.weight": [64, 128],
            "model.layers.0.enorm.weight": [64],
            "model.layers.0.hnorm.weight": [64],
            "model.layers.0.shared_head.head.weight": [256, 64],
            "model.embed_tokens.weight": [256, 64],
        },
        {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_nextn_predict_layers": 1},
    ),
    "qwen3-next-mtp": (
        "mtp",
        MTP,
        {"mtp.fc.weight": [64, 128], "mtp.layers.0.mlp.up.weight": [8, 64]},
        {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"},
    ),
    "medusa-vllm": (
        "medusa",
        "a Medusa draft",
        {"blocks.0.layers.0.weight": [64, 64], "lm_heads.0.weight": [256, 64]},
        {"architectures": ["MedusaModel"], "model_type": "medusa", "num_heads": 1},
    ),
    "medusa-fasterdecoding": (
        "medusa",
        "a Medusa draft",
        {"0.0.linear.weight": [64, 64], "0.1.weight": [256, 64]},
        {"medusa_num_heads": 1, "medusa_num_layers": 1},
    ),
    "dflash-zlab": (
        "dflash",
        "a DFlash draft",
        {
            "fc.weight": [64, 320],
            "hidden_norm.weight": [64],
            "layers.0.self_attn.q_proj.weight": [64, 64],
            "norm.weight": [64],
        },
        {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "block_size": 16,
            "dflash_config": {"mask_token_id": 1, "target_layer_ids": [1, 3, 5, 7, 9]},
        },
    ),
    "dspark": (
        "dspark",
        "a DSpark draft",
        {"layers.0.self_attn.q_proj.weight": [64, 64], "fc.weight": [64, 128]},
        {"architectures": ["Qwen3DSparkModel"], "model_type": "qwen3"},
    ),
    "mlp-speculator": (
        "mlp-speculator",
        "an MLP speculator",
        {"emb.0.weight": [256, 64], "head.0.weight": [256, 64]},
        {"architectures": ["MLPSpeculatorPreTrainedModel"], "model_type": "mlp_speculator"},
    ),
}


def test_the_tiny_target_is_not_a_draft_anywhere(tiny_target: Path, built_fixtures, tmp_path: Path) -> None:
    draft = built_fixtures("vllm-tiny")
    for args in (
        ["inspect", str(tiny_target)],
        ["upgrade", str(tiny_target), "--out", str(tmp_path / "out")],
        ["finetune", str(tiny_target), "--target", str(draft), "--out", str(tmp_path / "ft")],
    ):
        res = _run(*args)
        assert res.exit_code == 1, (args, res.output)
        [line] = res.stderr.strip().splitlines()  # one line, no traceback
        assert line.startswith(
            f"Error: {tiny_target}: this looks like the target model, a full causal LM, not an EAGLE-3 draft ("
        ), line
        assert "8 decoder layers" in line and "lm_head.weight [4096, 256]" in line and SWAP in line
        assert "'LlamaForCausalLM'" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "ft").exists()
    res = _run("validate", str(tiny_target), "--json")
    assert res.exit_code == 1
    [hit] = json.loads(res.stdout)["findings"]
    assert hit["code"] == "E004" and SWAP in hit["message"]


def test_smoke_names_its_own_argument_order(tiny_target: Path, built_fixtures) -> None:
    draft = built_fixtures("vllm-tiny")
    res = _run("smoke", str(tiny_target), "--target", str(draft), "--engine", "reference")  # both swapped
    assert res.exit_code == 1, res.output
    assert "this looks like an EAGLE-3 draft, not the target model" in res.stderr
    assert "did you swap DRAFT and --target?" in res.stderr
    res = _run("smoke", str(tiny_target), "--target", str(tiny_target), "--engine", "reference")
    assert res.exit_code == 1
    assert "this looks like the target model" in res.stderr and "did you swap DRAFT and --target?" in res.stderr


def test_a_draft_as_target_is_refused(built_fixtures, tmp_path: Path) -> None:
    draft = str(built_fixtures("vllm-eagle3"))
    for args in (
        ["validate", draft, "--target", draft],
        ["upgrade", draft, "--out", str(tmp_path / "o"), "--target", draft],
    ):
        res = _run(*args)
        assert res.exit_code == 1, (args, res.output)
        assert "this looks like an EAGLE-3 draft, not the target model" in res.stderr and SWAP in res.stderr


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_methods_are_named(name: str, tmp_path: Path) -> None:
    kind, what, tensors, config = OTHERS[name]
    ckpt = _write(tmp_path / name, tensors, config)
    assert detect_kind(open_checkpoint(ckpt).tensors, config).id == kind
    res = _run("inspect", str(ckpt))
    assert res.exit_code == 1
    assert res.stderr.startswith(f"Error: {ckpt}: this looks like {what}, not an EAGLE-3 draft ("), res.stderr
    res = _run("validate", str(ckpt), "--json")
    assert res.exit_code == 1 and [f["code"] for f in json.loads(res.stdout)["findings"]] == ["E004"]


def test_detector_passes_every_fixture_draft() -> None:
    """No false alarm: every fixture draft (each producer layout, EAGLE-3 and 3.1) is a draft."""
    for name, spec in FIXTURE_MATRIX.items():
        from fixtures.drafts import draft_state

        state = draft_state(spec)
        keys = [spec.layout_row.to_disk(k) for k in state]
        config = spec.layout_row.config(spec)
        assert detect_kind(keys, config) is None, name


def test_a_small_causal_lm_is_caught_but_not_a_multi_layer_draft(tmp_path: Path) -> None:
    assert detect_kind(open_checkpoint(causal_lm(tmp_path / "lm", layers=2)).tensors, {}).id == "causal-lm"
    two = build_draft(tmp_path / "d2", FIXTURE_MATRIX["vllm-eagle3-2layer"])  # 2 layers, has fc
    assert detect_kind(open_checkpoint(two).tensors, {}) is None


def test_peagle_is_a_draft_but_refused_where_unsupported(tiny_target: Path, tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "peagle", config=lambda c: c.update(architectures=["PEagleDraftModel"]))
    assert _run("inspect", str(draft)).exit_code == 0
    res = _run("validate", str(draft), "--json")
    assert "E004" not in {f["code"] for f in json.loads(res.stdout)["findings"]}
    for command, args in (
        ("upgrade", [str(draft), "--out", str(tmp_path / "out")]),
        ("finetune", [str(draft), "--target", str(tiny_target), "--out", str(tmp_path / "out")]),
        ("smoke", [str(draft), "--target", str(tiny_target), "--engine", "reference"]),
    ):
        res = _run(command, *args)
        assert res.exit_code == 1, (command, res.output)
        assert "a P-EAGLE (parallel drafting) draft" in res.stderr
        assert f"{command} supports sequential EAGLE-3 drafts only" in res.stderr
    assert not (tmp_path / "out").exists()
