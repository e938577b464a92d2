"""The real speculators library (0.9.0, `SpeculatorModel.from_pretrained`) reads what `upgrade --layout
speculators` writes: the flags, the aux ids, the verifier, and every tensor bit for bit.

speculators is installed by `make env` without its dependencies (requirements-test-nodeps.txt: its
declared torchvision/torchaudio would replace the test env's CPU torch), on the test env's torch and
transformers. Its eagle3 package imports `speculators.train.data`, which imports `datasets` at module
level for training only (speculators 0.9.0 `speculators/train/data.py` line 10: `load_from_disk`);
loading a model never calls it, and `datasets` needs pyarrow, so where it is not installed a module
without attributes stands in for it, and only for that import.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft import canonical_map, open_checkpoint
from eagle_convert.io import tensor_torch
from eagle_convert.validate.run import validate_checkpoint
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.target_weights import build_target_for


def _training_only(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("datasets is not installed in the test env (speculators uses it for training only)")


@pytest.fixture(scope="module")
def speculators_lib() -> Any:
    """speculators' `SpeculatorModel` and EAGLE-3 converter, imported with the `datasets` stand-in only while it imports."""
    stand_in = None
    if importlib.util.find_spec("datasets") is None:
        stand_in = types.ModuleType("datasets")
        stand_in.load_from_disk = _training_only  # type: ignore[attr-defined]
        stand_in.Dataset = object  # type: ignore[attr-defined]
        sys.modules["datasets"] = stand_in
    try:
        from speculators import SpeculatorModel
        from speculators.convert.eagle.eagle3_converter import Eagle3Converter
    finally:
        if stand_in is not None:
            del sys.modules["datasets"]
    return types.SimpleNamespace(model=SpeculatorModel, converter=Eagle3Converter)


def _upgrade(tmp_path: Path, *extra: str) -> tuple[Path, Path, Path]:
    src = build_draft(tmp_path / "e3", FIXTURE_MATRIX["vllm-eagle3"])
    target = build_target_for(tmp_path / "target", src)
    out = tmp_path / "spec"
    res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(out), "--layout", "speculators", *extra])
    assert res.exit_code == 0, res.output
    return src, target, out


def test_speculators_loads_our_layout_as_written(tmp_path: Path, speculators_lib: Any) -> None:
    _src, target, out = _upgrade(tmp_path, "--target", str(tmp_path / "target"))
    model = speculators_lib.model.from_pretrained(str(out))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["speculators_config"]["verifier"] == {"name_or_path": str(target), "architectures": ["LlamaForCausalLM"]}
    c = model.config
    assert type(model).__name__ == "Eagle3DraftModel"
    assert (c.fc_norm, c.norm_output, c.norm_before_fc, c.norm_before_residual) == (True, True, False, False)
    assert c.eagle_aux_hidden_state_layer_ids == cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert (c.draft_vocab_size, c.target_hidden_size) == (128, 64)
    assert c.speculators_config.verifier.architectures == ["LlamaForCausalLM"]
    assert model.fc_norm is not None and len(model.fc_norm) == 3  # the flag built the module
    # Every tensor we wrote is what speculators holds: exact (a load copies; BF16 -> F32 widening is exact).
    ckpt = open_checkpoint(out)
    state = model.state_dict()
    names = canonical_map(ckpt.tensors)
    assert len(names) == 18
    for disk, canon in names.items():
        ours = tensor_torch(ckpt.source, ckpt.tensors[disk])
        theirs = state[canon]
        assert theirs.shape == ours.shape, canon
        if ours.is_floating_point():
            assert torch.equal(theirs.float(), ours.float()), canon
        else:
            assert torch.equal(theirs.to(torch.int64), ours.to(torch.int64)), canon
    assert all(torch.equal(state[f"fc_norm.{i}.weight"].float(), torch.ones(64)) for i in range(3))


def test_without_verifier_architectures_speculators_refuses(tmp_path: Path, speculators_lib: Any) -> None:
    """What every release since 0.3 requires, so the field above is not decoration."""
    _src, _target, out = _upgrade(tmp_path, "--target", str(tmp_path / "target"))
    cfg = json.loads((out / "config.json").read_text())
    del cfg["speculators_config"]["verifier"]["architectures"]
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(Exception, match=r"verifier\.architectures\s+Field required"):
        speculators_lib.model.from_pretrained(str(out))


def test_speculators_input_gets_architectures_from_target_or_a_warning(tmp_path: Path) -> None:
    src = build_draft(tmp_path / "s3", FIXTURE_MATRIX["speculators-eagle3"])
    cfg = json.loads((src / "config.json").read_text())
    cfg["speculators_config"]["verifier"].pop("architectures", None)
    (src / "config.json").write_text(json.dumps(cfg))
    target = tmp_path / "target"  # upgrade reads only the target's config.json
    target.mkdir()
    tcfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "vocab_size": 256}
    (target / "config.json").write_text(json.dumps(tcfg | {"num_hidden_layers": 8}))
    run = CliRunner().invoke
    res = run(main, ["upgrade", str(src), "--out", str(tmp_path / "a"), "--layout", "keep", "--target", str(target)])
    assert res.exit_code == 0, res.output
    verifier = json.loads((tmp_path / "a" / "config.json").read_text())["speculators_config"]["verifier"]
    assert verifier["architectures"] == ["LlamaForCausalLM"]
    res = run(
        main, ["upgrade", str(src), "--out", str(tmp_path / "b"), "--layout", "speculators", "--aux-layer-ids", "2,4,5"]
    )
    assert res.exit_code == 0, res.output
    assert (
        "warning: speculators_config.verifier.architectures is written as [] (no --target to read them from): "
        "speculators loads it but cannot check a verifier against it; pass a --target whose config.json has "
        "architectures"
    ) in " ".join(res.output.split())
    verifier = json.loads((tmp_path / "b" / "config.json").read_text())["speculators_config"]["verifier"]
    assert verifier["architectures"] == []


# -- what `speculators convert` writes, and the verdict on it (issue 30 item 7c) -------------------------


def _convert(tmp_path: Path, speculators_lib: Any, fixture: str = "specforge-eagle3") -> tuple[Path, Path]:
    """The real converter's output for an EAGLE-3 fixture with `--algorithm-kwargs '{"fc_norm": true,
    "norm_output": true}'` and no ids (speculators 0.9.0 `Eagle3Converter.convert`), and its target."""
    src = build_draft(tmp_path / "src", FIXTURE_MATRIX[fixture])
    target = build_target_for(tmp_path / "target", src)
    out = tmp_path / "converted"
    speculators_lib.converter().convert(
        src, out, base_model=str(target), fc_norm=True, norm_output=True, validate=False
    )
    return out, target


def test_speculators_convert_output_verdict(tmp_path: Path, speculators_lib: Any) -> None:
    out, target = _convert(tmp_path, speculators_lib)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] is None and cfg["fc_norm"] is True  # what it writes
    assert not any(k.startswith("fc_norm") for k in open_checkpoint(out).tensors)
    report = validate_checkpoint(out, target=target, vllm_version="0.32.0")
    assert sorted(f.code for f in report.findings) == ["E101", "E101", "E101", "W308", "W320"]  # no E304
    w320 = next(f for f in report.findings if f.code == "W320")
    assert (w320.message, w320.field, w320.impact) == (
        "eagle_aux_hidden_state_layer_ids is null, which vLLM 0.32.0 reads as absent: vLLM taps (2, 4, 5) for "
        "this 8-layer target",
        "eagle_aux_hidden_state_layer_ids",
        "computes-differently",
    )
    assert w320.fix == (
        "Replace null with the ids the draft was trained on (`speculators convert`: pass "
        "eagle_aux_hidden_state_layer_ids in --algorithm-kwargs); write vLLM's defaults only if it was trained on them."
    )
    e101 = [f for f in report.findings if f.code == "E101"]
    assert [f.tensor for f in e101] == [f"fc_norm.{i}.weight" for i in range(3)]
    assert e101[0].message == (
        "fc_norm.0.weight is missing: vLLM keeps weight 1.0 and loads without an error (fc_norm is on: "
        "fc_norm): the identity init, as `upgrade` writes it"
    )
    assert e101[0].impact == "computes-differently"  # 1.0, not uninitialised memory
    assert "or set fc_norm: false" not in e101[0].fix
    assert e101[0].fix.startswith("If the source draft had trained fc_norm.{i}.weight (EAGLE-3.1), copy them in;")
    assert e101[0].fix.endswith(
        "(`speculators convert` writes the flags but builds a model without "
        "fc_norm/input_norm, so it drops trained ones and writes none.)"
    )


@pytest.mark.parametrize("release", ["0.22.0", "0.33.0", "0.34.0"])
def test_null_ids_are_absent_on_every_release(tmp_path: Path, speculators_lib: Any, release: str) -> None:
    out, target = _convert(tmp_path, speculators_lib)
    report = validate_checkpoint(out, target=target, vllm_version=release)
    assert "E304" not in report.codes()
    [w320] = [f for f in report.findings if f.code == "W320"]
    assert w320.message.startswith(f"eagle_aux_hidden_state_layer_ids is null, which vLLM {release} reads as absent")


def test_upgrading_the_converter_output_writes_what_it_lacked(tmp_path: Path, speculators_lib: Any) -> None:
    """`upgrade` of the converter's input flags (EAGLE-3) writes what the converter left out: the fc_norm
    tensors (ones) and the ids (the target's defaults); only W604, the identity init, remains."""
    out, target = _convert(tmp_path, speculators_lib)
    cfg = json.loads((out / "config.json").read_text())
    cfg["fc_norm"] = cfg["norm_output"] = False  # the EAGLE-3 draft the converter was given
    (out / "config.json").write_text(json.dumps(cfg))
    up = tmp_path / "up"
    res = CliRunner().invoke(main, ["upgrade", str(out), "--out", str(up), "--target", str(target), "--layout", "keep"])
    assert res.exit_code == 0, res.output
    report = validate_checkpoint(up, target=target, vllm_version="0.32.0")
    assert sorted(f.code for f in report.findings) == ["W604"], [f"{f.code} {f.message}" for f in report.findings]
    assert speculators_lib.model.from_pretrained(str(up)).config.fc_norm is True
