"""The model card: Hugging Face metadata that huggingface_hub parses, the serve command, provenance,
acceptance, and that upgrade writes it inside its atomic, verified output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, ModelCardData

from eagle_convert.draft.card import (
    CARD_MARKER,
    LIBRARY_NAME,
    PROVENANCE_KEY,
    _metadata,
    hub_repo_id,
    model_card,
    retarget_card,
    write_model_card,
)
from eagle_convert.draft.card_acceptance import AcceptanceRow, AcceptanceTable, acceptance_from_smoke
from eagle_convert.draft.card_serve import serve_command
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.draft.target import Target
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release


def _upgrade(src: Path, out: Path, target: Target | None = None):
    ckpt = open_checkpoint(src)
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False), target=target, out=out)
    return plan, apply_upgrade(plan, out)


def test_upgrade_writes_a_card_that_huggingface_hub_parses(built_fixtures, tmp_path: Path) -> None:
    out = tmp_path / "eagle31"
    target = Target.from_config({"num_hidden_layers": 8, "hidden_size": 64}, "meta-llama/Llama-3.1-8B-Instruct")
    plan, result = _upgrade(built_fixtures("vllm-eagle3"), out, target)
    assert result.verified and "README.md" in result.files
    text = (out / "README.md").read_text()
    assert text == plan.readme
    card = ModelCard.load(out / "README.md")
    assert card.data.base_model == "meta-llama/Llama-3.1-8B-Instruct"
    assert card.data.library_name == "vllm"
    assert {"eagle3", "eagle3.1", "speculative-decoding"} <= set(card.data.tags)
    assert serve_command("meta-llama/Llama-3.1-8B-Instruct", str(out)) in card.text
    assert "| `fc_norm` | true |" in card.text and "| `norm_output` | true |" in card.text
    assert "**upgrade EAGLE-3 -> EAGLE-3.1**" in card.text and "added init: ones" in card.text
    assert "## Measured acceptance" not in card.text  # nothing measured yet
    # The card is part of the verified plan: a changed card fails verification.
    assert plan.output_files["README.md"] == len(text.encode())


def test_without_a_hub_target_there_is_no_base_model(built_fixtures, tmp_path: Path) -> None:
    target = Target.from_config({"num_hidden_layers": 8, "hidden_size": 64}, str(tmp_path))  # a local folder
    plan, _ = _upgrade(built_fixtures("vllm-eagle3"), tmp_path / "out", target)
    card = ModelCard(plan.readme)
    assert card.data.base_model is None and card.data.library_name == "vllm"
    assert serve_command(str(tmp_path), str(tmp_path / "out")) in plan.readme


@pytest.mark.parametrize(
    ("ref", "repo"),
    [
        ("org/name", "org/name"),
        ("hf://org/name@main", "org/name"),
        ("/cache/hub/models--meta-llama--Llama-3.1-8B/snapshots/abc", "meta-llama/Llama-3.1-8B"),
        ("./local", None),
        ("plain", None),
        (None, None),
    ],
)
def test_hub_repo_id(ref, repo) -> None:
    assert hub_repo_id(ref) == repo


def test_provenance_chain_and_acceptance_table(tmp_path: Path) -> None:
    upgrade = {
        "tool": "eagle-convert",
        "version": "0.1.0",
        "operation": "upgrade EAGLE-3 -> EAGLE-3.1",
        "source": "org/eagle3",
        "added_init": "calibrated",
    }
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "vocab_size": 128,
        "draft_vocab_size": 32,
        "fc_norm": True,
        "eagle_aux_hidden_state_layer_ids": [1, 3, 6],
        PROVENANCE_KEY: {
            "tool": "eagle-convert",
            "version": "0.1.0",
            "operation": "finetune (TTT)",
            "source": "/x/eagle31",
            "target": "org/target",
            "stages": [{"name": "fc_norm", "steps": 40, "lr": 0.001}],
            "previous": upgrade,
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    smoke = {
        "engine": "reference",
        "engine_version": "torch 2",
        "settings": {"k": 3, "temperature": 0.0, "max_new_tokens": 32},
        "prompts": {"count": 6, "chat_template": "target"},
        "drafts": [
            {
                "label": "eagle3",
                "path": "/x/eagle3",
                "total": {
                    "acceptance_length": 1.9271,
                    "per_position": [0.4, 0.28, 0.25],
                    "acceptance_rate": 0.31,
                    "requests": 6,
                },
            },
            {
                "label": "ft",
                "path": str(tmp_path),
                "total": {
                    "acceptance_length": 2.01,
                    "per_position": [0.45, 0.3, 0.26],
                    "acceptance_rate": 0.34,
                    "requests": 6,
                },
            },
        ],
    }
    table = acceptance_from_smoke(smoke, this=tmp_path)
    assert [r.this for r in table.rows] == [False, True] and table.k == 3
    path = write_model_card(tmp_path, acceptance=table)
    card = ModelCard.load(path)
    assert card.data.base_model == "org/target"  # recorded by the finetune provenance
    text = card.text
    assert text.index("**finetune (TTT)**") < text.index("**upgrade EAGLE-3 -> EAGLE-3.1**")  # newest first
    assert "added init: calibrated" in text and "stages: fc_norm 40 steps, lr 0.001" in text
    assert "| **ft** (this draft) | 2.010 | 0.450 | 0.300 | 0.260 | 0.340 |" in text
    assert "| eagle3 | 1.927 | 0.400 | 0.280 | 0.250 | 0.310 |" in text
    assert "reference engine (torch 2), k = 3, 6 prompts, chat template target, T=0.0, 32 new tokens" in text
    assert not list(tmp_path.glob(".README*"))  # the temp file was renamed into place


def test_retarget_points_the_serve_command_at_the_repo() -> None:
    text = model_card(
        {"hidden_size": 8, "fc_norm": True},
        model_ref='/tmp/a "b"',
        target="org/t",
        acceptance=AcceptanceTable([AcceptanceRow("x", 2.0, [0.5])], 1, "reference", "1 prompt"),
    )
    moved = retarget_card(text, "me/draft")
    assert serve_command("org/t", "me/draft") in moved and "/tmp/a" not in moved
    assert moved.replace(serve_command("org/t", "me/draft"), serve_command("org/t", '/tmp/a "b"')) == text
    plain = '# not ours\nvllm serve x --speculative-config \'{"model": "y"}\'\n'
    assert retarget_card(plain, "me/draft") == plain and CARD_MARKER in text


# -- what the card and upgrade say about a speculators draft (issue 21 item 6) ------------------


def test_speculators_input_names_its_verifier_and_draws_no_model_type_warning(built_fixtures, tmp_path: Path) -> None:
    # speculators-eagle3 records verifier.name_or_path "tiny-llama-target" and sets no top-level model_type
    for layout in ("vllm", "speculators"):
        ckpt = open_checkpoint(built_fixtures("speculators-eagle3"))
        plan = plan_upgrade(
            ckpt, describe(ckpt, default_release(), read_vocab=False), layout=layout, out=tmp_path / layout
        )
        assert plan.warnings == [], layout
        assert "draft for **tiny-llama-target**" in plan.readme, layout
        assert "vllm serve tiny-llama-target " in plan.readme, layout
        assert "| dtype | bfloat16 |" in plan.readme, layout


def test_dtype_comes_from_the_weights_when_the_config_has_none(built_fixtures, tmp_path: Path) -> None:
    from eagle_convert.draft.card import weights_dtype
    from eagle_convert.io.safetensors_header import TensorInfo

    src = built_fixtures("vllm-eagle3")
    config = json.loads((src / "config.json").read_text())
    del config["torch_dtype"]
    assert "| dtype | not set |" in model_card(config, model_ref="x")
    assert "| dtype | bfloat16 (the weights') |" in model_card(config, model_ref="x", dtype="BF16")
    assert "| dtype | float16 (the weights') |" in model_card(config, model_ref="x", dtype="float16")
    infos = [
        TensorInfo("a", "F32", (64, 64), "model.safetensors", 0, 4 * 64 * 64),
        TensorInfo("b", "BF16", (64, 128), "model.safetensors", 0, 2 * 64 * 128),
        TensorInfo("d2t", "I64", (1024,), "model.safetensors", 0, 8 * 1024),  # integers never count
    ]
    assert weights_dtype(infos) == "bfloat16"
    assert weights_dtype(infos[2:]) is None
    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes())
    (folder / "config.json").write_text(json.dumps(config))
    assert "| dtype | bfloat16 (the weights') |" in write_model_card(folder).read_text()


def test_upgrade_cli_prints_no_model_type_warning_for_a_speculators_draft(built_fixtures, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from eagle_convert.cli.app import main

    res = CliRunner().invoke(main, ["upgrade", str(built_fixtures("speculators-eagle3")), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "warning" not in res.output and "model_type" not in res.output


# -- which vLLM releases serve the written draft as trained (issue 16 item 3) --------------------


def test_upgraded_card_states_the_releases_of_the_written_output(built_fixtures, tmp_path: Path) -> None:
    """The sentence is the matrix of the output, not the input: a 3.1 draft needs fc_norm (0.22.0 on)."""
    from eagle_convert.validate.matrix import serving_summary

    out = tmp_path / "eagle31"
    plan, _ = _upgrade(built_fixtures("vllm-eagle3"), out)
    expected = "vLLM 0.22.0-0.34.0 serve it as trained; 0.21.0 fails to load it (E104)"
    assert serving_summary(out) == expected  # the folder as written
    assert serving_summary(built_fixtures("vllm-eagle3")) != expected  # the input is served by 0.21.0 too
    line = next(line for line in plan.readme.splitlines() if line.startswith("**vLLM releases**"))
    assert line == (
        f"**vLLM releases**: {expected}. This is eagle-convert's static verdict for each release, read from "
        "vLLM's source (only vLLM 0.32.0 was also run). Before serving, `eagle-convert validate DRAFT --target "
        "TARGET --vllm-version X.Y.Z` checks it for the release you run and against the target."
    )
    assert "loader rules (read from vLLM" not in plan.readme


def test_card_without_a_matrix_says_how_to_get_one(built_fixtures) -> None:
    config = json.loads((built_fixtures("vllm-eagle31") / "config.json").read_text())
    text = model_card(config, model_ref="out")
    assert "`--vllm-version all` lists which vLLM releases serve it as trained." in text
    assert "**vLLM releases**" not in text


def test_write_model_card_takes_the_sentence(built_fixtures, tmp_path: Path) -> None:
    import shutil

    from eagle_convert.validate.matrix import serving_summary

    folder = tmp_path / "d"
    shutil.copytree(built_fixtures("vllm-qwen3-eagle3"), folder)
    path = write_model_card(folder, serving=serving_summary(folder))
    assert (
        "**vLLM releases**: vLLM 0.24.0-0.34.0 serve it as trained; 0.21.0-0.23.0 fail to load it (E301)."
        in path.read_text()
    )


@pytest.mark.parametrize(
    "base_model", [None, "meta-llama/Llama-3.1-8B-Instruct", "null", "a: b", "日本か", "x\ny", "~"]
)
def test_card_metadata_is_what_huggingface_hub_writes(base_model: str | None) -> None:
    """The YAML block is written with yaml alone (no huggingface_hub on upgrade's path): the same bytes."""
    tags = ["eagle3", "eagle3.1", "speculative-decoding", "draft-model", "eagle-convert"]
    ref = ModelCardData(base_model=base_model, library_name=LIBRARY_NAME, tags=tags).to_yaml()
    assert _metadata(base_model, "EAGLE-3.1") == f"---\n{ref}\n---\n"
