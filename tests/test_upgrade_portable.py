"""`upgrade --for vllm --for sglang ...`: one config every named engine reads as trained, judged by the same
verdict `validate --for` gives, or a one-line refusal naming the engine and the reason."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.upgrade import UpgradeOptions, plan_upgrade_draft
from eagle_convert.validate import validate_checkpoint, validate_for
from fixtures.edits import edit_draft


def _upgrade(*args: str):
    return CliRunner().invoke(main, ["upgrade", *args])


def _config(out: Path) -> dict:
    cfg = json.loads((out / "config.json").read_text())
    cfg.pop("_eagle_convert")
    return cfg


def _target(out: Path, arch: str, layers: int = 8) -> Path:
    out.mkdir(parents=True)
    cfg = {"architectures": [arch], "model_type": "llama", "hidden_size": 64, "vocab_size": 256,
           "num_hidden_layers": layers, "max_position_embeddings": 32768}  # fmt: skip
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def test_default_is_todays_vllm_upgrade(tmp_path: Path) -> None:
    d = edit_draft(tmp_path / "d")
    assert _upgrade(str(d), "--out", str(tmp_path / "a")).exit_code == 0
    assert _upgrade(str(d), "--out", str(tmp_path / "b"), "--for", "vllm").exit_code == 0
    assert _config(tmp_path / "a") == _config(tmp_path / "b")
    assert "## Serve with SGLang" not in (tmp_path / "a" / "README.md").read_text()


def test_portable_config_reads_as_trained_on_every_engine(tmp_path: Path) -> None:
    d = edit_draft(tmp_path / "d")  # top-level ids [2, 4, 5]: what vLLM reads; SGLang taps its default
    assert [f.code for f in validate_for(d, _st("sglang")).findings] == ["E335"]
    out = tmp_path / "o"
    res = _upgrade(str(d), "--out", str(out), "--for", "vllm", "--for", "sglang", "--for", "trtllm", "--json")
    assert res.exit_code == 0, res.output
    named = json.loads(res.stdout)["plan"]["for"]
    assert named[0].startswith("vLLM ") and named[1:] == ["SGLang 0.5.23", "TensorRT-LLM main@00679c6"]
    cfg = _config(out)
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]  # vLLM: top level, A(k)
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]  # SGLang: id + 1 taps A(k)
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    # W604 (the identity upgrade's fc_norm ones) holds on every engine, as on vLLM
    assert [f.code for f in validate_for(out, _st("sglang")).findings] == ["W604"]
    # TRT-LLM reads no ids from a draft: W334, which its serve command (in the card) settles
    assert sorted(f.code for f in validate_for(out, _st("trtllm")).findings) == ["W334", "W604"]
    assert not validate_checkpoint(out).errors
    card = (out / "README.md").read_text()
    assert "## Serve with SGLang" in card and "eagle3_layers_to_capture: [1, 3, 4]" in card


def test_sglang_offset_per_target_class(tmp_path: Path) -> None:
    """A DeepSeek-V3 target: SGLang adds 1 only when ids[0] == 1, so A(3, 4, 5) needs (3, 4, 5), not (2, 3, 4)."""
    d = edit_draft(tmp_path / "d", config=lambda c: c.update(eagle_aux_hidden_state_layer_ids=[3, 4, 5]))
    target = _target(tmp_path / "t", "DeepseekV3ForCausalLM")
    out = tmp_path / "o"
    res = _upgrade(str(d), "--out", str(out), "--for", "sglang", "--target", str(target))
    assert res.exit_code == 0, res.output
    assert _config(out)["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [3, 4, 5]
    assert [f.code for f in validate_for(out, _st("sglang"), target=target).findings] == ["W604"]  # ones: every engine
    llama = _upgrade(str(d), "--out", str(tmp_path / "l"), "--for", "sglang")  # no target: the plus-one rule
    assert llama.exit_code == 0
    assert _config(tmp_path / "l")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 3, 4]


def test_refusals_name_the_engine_and_the_reason(tmp_path: Path) -> None:
    nbr = edit_draft(tmp_path / "r", config=lambda c: c.update(norm_before_residual=True))
    res = _upgrade(str(nbr), "--out", str(tmp_path / "o"), "--for", "vllm", "--for", "trtllm")
    assert res.exit_code == 1
    assert res.stderr.startswith(
        f"Error: {nbr}: no single config serves this draft as trained on vLLM and TensorRT-LLM main@00679c6: "
        "E332 norm_before_residual is on (as vLLM reads this config), but TensorRT-LLM main@00679c6 always feeds "
        "the first layer's residual from the pre-norm state"
    )
    assert res.stderr.endswith("(serve it on vLLM, or drop --for trtllm)\n") and res.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()
    d = edit_draft(tmp_path / "d")
    res = _upgrade(str(d), "--out", str(tmp_path / "s"), "--layout", "speculators", "--target",
                   str(_target(tmp_path / "t", "LlamaForCausalLM")), "--for", "sglang")  # fmt: skip
    assert res.exit_code == 1
    assert "SGLang 0.5.23: it reads no speculators-format config" in res.stderr
    assert res.stderr.endswith("(write --layout vllm)\n")
    res = _upgrade(str(d), "--out", str(tmp_path / "u"), "--for", "tgi")
    assert res.exit_code == 2
    assert res.stderr == "Error: --for tgi: unknown engine 'tgi' (name one of: vllm, sglang, trtllm, or all)\n"


def test_library_option(tmp_path: Path) -> None:
    d = edit_draft(tmp_path / "d")
    plan = plan_upgrade_draft(d, opts=UpgradeOptions(serve_for=("sglang",)))
    assert plan.config_after["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert plan.engines == ("SGLang 0.5.23",)


def _st(engine: str):
    from eagle_convert.engines import engine_status

    return engine_status(engine)
