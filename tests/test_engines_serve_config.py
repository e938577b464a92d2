"""`validate|check --for sglang|trtllm --serve-config FILE`: a deployment's own SGLang launch command (or its
--config YAML) or TensorRT-LLM YAML checked against the command that serves the draft as trained."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.engines import read_serve_file
from fixtures.edits import edit_draft

SG = "SGLang 0.5.23"


def _draft(tmp_path: Path, **cfg) -> Path:
    """SGLang reads it as trained (eagle_config holds its id - 1); trained on A(2, 4, 5)."""

    def edit(c: dict) -> None:
        c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3, 4])
        c.update(cfg)

    return edit_draft(tmp_path / "d", config=edit)


def _validate(draft: Path, engine: str, path: Path, *more: str):
    return CliRunner().invoke(main, ["validate", str(draft), "--for", engine, "--serve-config", str(path), *more])


def _codes(draft: Path, engine: str, path: Path) -> list[str]:
    res = _validate(draft, engine, path, "--json")
    assert res.exit_code in (0, 1), res.output
    return [f["code"] for f in json.loads(res.stdout)["findings"]]


def _launch(tmp_path: Path, draft: Path, *extra: str, algorithm: str = "EAGLE3") -> Path:
    f = tmp_path / "launch.sh"
    f.write_text(
        "python -m sglang.launch_server --model-path org/target \\\n"
        f"  --speculative-algorithm {algorithm} --speculative-draft-model={draft} \\\n"
        "  --speculative-num-steps 3 " + " ".join(extra) + "\n"
    )
    return f


def test_sglang_launch_command(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    assert _codes(d, "sglang", _launch(tmp_path, d)) == []  # the alias --speculative-draft-model= is read
    assert _codes(d, "sglang", _launch(tmp_path, d, algorithm="EAGLE")) == ["E912"]
    res = _validate(d, "sglang", _launch(tmp_path, d, algorithm="EAGLE"), "--json")
    [f] = json.loads(res.stdout)["findings"]
    assert f["message"] == (
        f"{tmp_path / 'launch.sh'}: --speculative-algorithm is 'EAGLE', not 'EAGLE3': {SG} does not run this "
        "draft as an EAGLE-3 draft"
    )
    assert res.exit_code == 1
    other = tmp_path / "other.sh"
    other.write_text("--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/other\n")
    assert _codes(d, "sglang", other) == ["W914"]
    none = tmp_path / "none.sh"
    none.write_text("--speculative-algorithm EAGLE3\n")
    assert _codes(d, "sglang", none) == ["E913"]


def test_sglang_window_flag_settles_w337(tmp_path: Path) -> None:
    d = _draft(tmp_path, sliding_window=2048, layer_types=["sliding_attention"])
    assert _codes(d, "sglang", _launch(tmp_path, d)) == ["W337"]  # the config's window is never read
    assert _codes(d, "sglang", _launch(tmp_path, d, "--speculative-draft-window-size 2048")) == []
    assert _codes(d, "sglang", _launch(tmp_path, d, "--speculative-draft-window-size 1024")) == ["W337", "W917"]
    plain = _draft(tmp_path / "p")
    assert _codes(plain, "sglang", _launch(tmp_path, plain, "--speculative-draft-window-size 1024")) == ["W917"]


def test_sglang_config_yaml(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    f = tmp_path / "sglang.yaml"
    f.write_text(f"model_path: org/target\nspeculative_algorithm: EAGLE3\nspeculative-draft-model-path: {d}\n")
    given = read_serve_file(str(f), "sglang")
    assert given.values["--speculative-draft-model-path"] == str(d)
    assert _codes(d, "sglang", f) == []


def _trt(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "extra.yaml"
    f.write_text("enable_attention_dp: false\nspeculative_config:\n" + body)
    return f


def test_trtllm_yaml(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    base = f"  decoding_type: Eagle3\n  max_draft_len: 3\n  speculative_model_dir: {d}\n"
    assert _codes(d, "trtllm", _trt(tmp_path, base)) == ["E915"]  # no capture layers: W334 becomes E915
    assert _codes(d, "trtllm", _trt(tmp_path, base + "  eagle3_layers_to_capture: [4, 1, 3]\n")) == []
    res = _validate(d, "trtllm", _trt(tmp_path, base + "  eagle3_layers_to_capture: [2, 4, 5]\n"), "--json")
    [f] = json.loads(res.stdout)["findings"]
    assert f["code"] == "E915" and f["fix"] == "Set eagle3_layers_to_capture: [1, 3, 4]."
    assert _codes(
        d,
        "trtllm",
        _trt(
            tmp_path, base.replace("max_draft_len: 3", "max_draft_len: 0") + "  eagle3_layers_to_capture: [1, 3, 4]\n"
        ),
    ) == ["E916"]  # noqa: E501
    model = base.replace("speculative_model_dir", "speculative_model") + "  eagle3_layers_to_capture: [1, 3, 4]\n"
    assert _codes(d, "trtllm", _trt(tmp_path, model)) == []  # the field's alias


def test_usage_errors(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    res = _validate(d, "trtllm", tmp_path / "missing.yaml")
    assert res.exit_code == 2
    assert res.stderr == (
        f"Error: --serve-config {tmp_path / 'missing.yaml'}: no such file (give the file holding the launch "
        "command or the YAML config)\n"
    )
    not_yaml = tmp_path / "cmd.sh"
    not_yaml.write_text("python -m sglang.launch_server --model-path x\n")
    res = _validate(d, "trtllm", not_yaml)
    assert res.exit_code == 2 and "is not a YAML mapping" in res.stderr and "Traceback" not in res.output
    res = _validate(d, "vllm", not_yaml)
    assert res.exit_code == 2
    assert res.stderr.endswith("--serve-config is for --for sglang or --for trtllm; vLLM's is --speculative-config\n")
    res = CliRunner().invoke(main, ["validate", str(d), "--serve-config", str(not_yaml)])
    assert res.exit_code == 2 and "--serve-config goes with one --for sglang or --for trtllm" in res.stderr


def test_check_for_sglang_serve_config(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    static_only = tmp_path / "static-only.toml"
    static_only.write_text("[engine]\nload = false\n")
    args = ["check", str(d), "--for", "sglang", "--json", "--policy", str(static_only), "--serve-config"]
    bad = CliRunner().invoke(main, [*args, str(_launch(tmp_path, d, algorithm="NGRAM"))])
    assert bad.exit_code == 1, bad.output
    static = next(c for c in json.loads(bad.stdout)["checks"] if c["stage"] == "static")
    assert not static["passed"] and "E912" in json.dumps(static)
    ok = CliRunner().invoke(main, [*args, str(_launch(tmp_path, d))])
    assert ok.exit_code == 0, ok.output
    res = CliRunner().invoke(main, ["check", str(d), "--serve-config", str(_launch(tmp_path, d))])
    assert res.exit_code == 2
    assert res.stderr == (
        "Error: --serve-config is for --for sglang or --for trtllm (give vLLM's serve config as --speculative-config)\n"
    )
