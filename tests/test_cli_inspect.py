"""CLI wiring of `inspect`: output, exact one-line errors and exit codes, no torch import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_inspect_summary(built_fixtures) -> None:
    code, out, _ = run("inspect", str(built_fixtures("specforge-eagle3")))
    assert code == 0
    assert "specforge — sgl-project/SpecForge" in out
    assert "EAGLE-3" in out and "A=3" in out and "[1, 3, 4]" in out


def test_inspect_json_and_tensors(built_fixtures) -> None:
    code, out, _ = run("inspect", "--json", str(built_fixtures("vllm-eagle31")))
    assert code == 0
    data = json.loads(out)
    assert data["variant"] == "EAGLE-3.1"
    assert {"fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"} <= {t["name"] for t in data["tensors"]}
    code, out, _ = run("inspect", "--tensors", str(built_fixtures("vllm-eagle31")))
    assert code == 0 and "fc_norm.2.weight" in out


@pytest.fixture
def broken(tmp_path: Path, built_fixtures) -> Path:
    good = built_fixtures("vllm-eagle3")
    for name in ("trunc", "badjson", "unknown", "empty", "header"):
        (tmp_path / name).mkdir()
    shutil.copy(good / "config.json", tmp_path / "trunc")
    data = (good / "model.safetensors").read_bytes()
    (tmp_path / "trunc" / "model.safetensors").write_bytes(data[:5000])
    shutil.copy(good / "model.safetensors", tmp_path / "badjson")
    (tmp_path / "badjson" / "config.json").write_text('{"hidden_size": 64,\n')
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"foo.weight": np.zeros((2, 2), dtype=np.float32)}, str(tmp_path / "unknown" / "model.safetensors"))
    (tmp_path / "header" / "model.safetensors").write_bytes(b"x" * 20)
    return tmp_path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "{d}/missing: no such file or folder (check the path or pass a hub repo id as org/name)"),
        (
            "trunc",
            "{d}/trunc/model.safetensors: truncated: tensor 'fc.weight' ends at byte 26960, file has 5000 "
            "(re-download or re-export the file)",
        ),
        ("badjson", "{d}/badjson/config.json: not valid JSON (line 2, column 1) (fix or regenerate the file)"),
        (
            "unknown",
            "{d}/unknown: tensors match no known EAGLE-3 layout (first names: foo.weight) (expected midlayer.*, "
            "layers.0.*, model.* or a speculators config; see README 'Supported layouts')",
        ),
        (
            "empty",
            "{d}/empty: no weights found (expected model.safetensors, model.safetensors.index.json with shards, "
            "or pytorch_model.bin)",
        ),
        (
            "header/model.safetensors",
            "{d}/header/model.safetensors: invalid safetensors header length 8680820740569200760 "
            "for a 20-byte file (the file is truncated or not safetensors; re-download or "
            "re-export it)",
        ),
    ],
)
def test_bad_inputs_give_one_line_errors(broken: Path, case: str, message: str) -> None:
    code, out, err = run("inspect", str(broken / case))
    assert code == 1
    assert out == ""
    assert err == f"Error: {message.format(d=broken)}\n"


def test_pickled_objects_are_refused(tmp_path: Path) -> None:
    import torch

    torch.save({"layers.0.fc": torch.zeros(2), "evil": object()}, tmp_path / "pytorch_model.bin")
    code, _, err = run("inspect", str(tmp_path))
    assert code == 1
    assert err == (
        f"Error: {tmp_path}/pytorch_model.bin: refuses to unpickle non-tensor objects (weights_only=True) "
        "(re-save the state dict as plain tensors or convert it to safetensors)\n"
    )


def test_usage_error_exit_code() -> None:
    code, _, err = run("inspect")
    assert code == 2
    assert "Missing argument 'CHECKPOINT'" in err


def test_debug_shows_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--debug", "inspect", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "CheckpointNotFoundError"


def test_inspect_does_not_import_torch(built_fixtures) -> None:
    folder = built_fixtures("vllm-eagle31-sharded-fp32")
    code = (
        "import sys\n"
        "from eagle_convert.cli.app import main\n"
        f"main(['inspect', '--json', {str(folder)!r}], standalone_mode=False)\n"
        "assert 'torch' not in sys.modules, 'inspect imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["storage"] == "sharded"


def test_every_command_has_help() -> None:
    from eagle_convert.cli.app import COMMANDS

    code, out, _ = run("--help")
    assert code == 0
    for name in ("inspect", *COMMANDS):
        assert name in out
        sub_code, sub_out, _ = run(name, "--help")
        assert sub_code == 0 and "Usage:" in sub_out, name


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"architectures": -1}, "field 'architectures' must be a list, got -1"),
        (
            {"eagle_aux_hidden_state_layer_ids": [1, "a"]},
            "field 'eagle_aux_hidden_state_layer_ids[1]' must be an integer, got \"a\"",
        ),
        (
            {"eagle_config": {"norm_before_fc": "yes"}},
            "field 'eagle_config.norm_before_fc' must be true or false, got \"yes\"",
        ),
        ({"hidden_size": 0}, "field 'hidden_size' must be at least 1, got 0"),
    ],
)
def test_config_fields_of_the_wrong_type(tmp_path: Path, built_fixtures, patch: dict, message: str) -> None:
    folder = tmp_path / "draft"
    shutil.copytree(built_fixtures("vllm-eagle3"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **patch}))
    code, out, err = run("inspect", str(folder))
    assert (code, out) == (1, "")
    assert err == f"Error: {folder}/config.json: {message} (fix the field in config.json)\n"


def test_speculators_config_needs_its_decoder_config(tmp_path: Path, built_fixtures) -> None:
    folder = tmp_path / "draft"
    shutil.copytree(built_fixtures("speculators-eagle3"), folder)
    config = json.loads((folder / "config.json").read_text())
    del config["transformer_layer_config"]
    (folder / "config.json").write_text(json.dumps(config))
    code, _, err = run("inspect", str(folder))
    assert code == 1
    assert err == (
        f"Error: {folder}/config.json: field 'transformer_layer_config' is required when "
        "speculators_model_type is set (fix the field in config.json)\n"
    )
