"""Whose convention are the aux ids in (issue 30 item 8): each producer's convention, its detection and
the conversion of its ids to vLLM's, SGLang's and TensorRT-LLM's reading, on the real published configs
in tests/data/realconfigs/ (provenance in the README there).

The expected ids are worked out by hand from the trainers' source (eagle_convert/engines/producers.py
cites it): SpecForge, ModelOpt and TorchSpec feed the output of decoder layer k for a written id k,
which is vLLM's A(k + 1); speculators feeds vLLM's A(k). SGLang taps A(k + 1) for a llama / qwen id k
(A(k) for a DeepSeek-V2-family id list not starting at 1), TensorRT-LLM the output of layer k, A(k + 1).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft import describe, open_checkpoint
from eagle_convert.engines import ENGINES, PRODUCERS, convert, producer_for, read_draft, trained_on, written_ids
from eagle_convert.validate import validate_checkpoint
from eagle_convert.vllm_model import default_release
from fixtures.drafts import EXPECTED
from fixtures.realconfigs import REAL_CONFIGS, build, build_target, plan_for

SGLANG = ENGINES["sglang"].rules[-1]


def _real(key: str) -> dict:
    return REAL_CONFIGS[key].config()


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """The real configs this file reads, built with their producer's tensor names, and their targets."""
    base = tmp_path_factory.mktemp("producers")
    keys = [
        "specforge-qwen3-235b",
        "specforge-gpt-oss-20b",
        "specforge-pr476-kimi-k25",
        "torchspec-kimi-k25-mla",
        "speculators-qwen3-235b-4aux",
        "modelopt-gpt-oss-120b",
        "specforge-llama3-8b",
    ]
    return {k: (build(REAL_CONFIGS[k], base / k), build_target(REAL_CONFIGS[k].target, base / f"{k}.t")) for k in keys}


# ------------------------------------------------------------------ the data


def test_every_producer_cites_its_training_code() -> None:
    for p in PRODUCERS.values():
        assert "@" in p.repo and p.chooses and p.captures, p.layout
        for cap in p.captures:
            assert "line" in cap.cite and ".py" in cap.cite, (p.layout, cap.name)


# key, written ids, target class, depth -> ids for vLLM, SGLang 0.5.23, TensorRT-LLM
CONVERSIONS = [
    # SpecForge Qwen3-235B-A22B template: layer outputs 1, 46, 90 = vLLM's (2, 47, 91), its default layers
    ("specforge-qwen3-235b", [1, 46, 90], [2, 47, 91], [1, 46, 90], [1, 46, 90]),
    # SpecForge gpt-oss-20b: not the default set, converted all the same (W603 used to miss it)
    ("specforge-gpt-oss-20b", [1, 11, 21], [2, 12, 22], [1, 11, 21], [1, 11, 21]),
    # gpt-oss-120b: SGLang 0.5.23 keeps ids when max(ids) == N; 33 < 36, so it adds 1
    ("specforge-gpt-oss-120b", [1, 17, 33], [2, 18, 34], [1, 17, 33], [1, 17, 33]),
    # DeepSeek-V3 target, first id 1: SGLang's first-id rule adds 1 too
    ("specforge-deepseek-v3", [1, 29, 57], [2, 30, 58], [1, 29, 57], [1, 29, 57]),
    # TorchSpec MLA template for Kimi-K2.5 (a DeepSeek-V3 class), ModelOpt's gpt-oss draft
    ("torchspec-kimi-k25-mla", [1, 29, 57], [2, 30, 58], [1, 29, 57], [1, 29, 57]),
    ("torchspec-glm4-moe", [1, 21, 42], [2, 22, 43], [1, 21, 42], [1, 21, 42]),
    ("modelopt-gpt-oss-120b", [1, 17, 32], [2, 18, 33], [1, 17, 32], [1, 17, 32]),
    # speculators writes vLLM's ids: the others need one less
    ("speculators-qwen3-235b-4aux", [2, 46, 91, 93], [2, 46, 91, 93], [1, 45, 90, 92], [1, 45, 90, 92]),
]
PRODUCER_OF = {"specforge": "specforge", "torchspec": "torchspec", "modelopt": "modelopt", "speculators": "speculators"}


@pytest.mark.parametrize(("key", "written", "vllm", "sglang", "trtllm"), CONVERSIONS)
def test_conversion_of_each_real_config(key: str, written: list[int], vllm: list[int], sglang, trtllm) -> None:
    rc = REAL_CONFIGS[key]
    producer = PRODUCERS[PRODUCER_OF[key.split("-")[0]]]
    assert written_ids(producer, rc.config()) == written  # the place this producer writes them
    target = {"target_class": rc.target.architecture, "n": rc.target.num_hidden_layers}
    got = {e: convert(written, producer, e, **target).ids for e in ("vllm", "sglang", "trtllm")}
    assert got == {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}


def test_sglang_reads_the_converted_ids_as_vllm_does() -> None:
    """The SGLang ids from a conversion, read by SGLang's own rules, tap what vLLM taps from the vLLM ids."""
    for key, _written, vllm, sglang, _ in CONVERSIONS:
        rc = REAL_CONFIGS[key]
        cfg = {
            "architectures": ["LlamaForCausalLMEagle3"],
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": sglang},
        }
        view = read_draft(cfg, SGLANG, mla=False, target_class=rc.target.architecture, n=rc.target.num_hidden_layers)
        assert view.taps == tuple(vllm), key


def test_capture_paths_that_disagree_are_said_not_guessed() -> None:
    """SpecForge's Kimi-K2.5 [2, 30, 58]: SGLang (its SGLang backend) keeps a DeepSeek-V2-family id list
    not starting at 1, its HF backend hooked the output of layer k."""
    specforge = PRODUCERS["specforge"]
    conv = convert([2, 30, 58], specforge, target_class="DeepseekV3ForCausalLM", n=61)
    assert (conv.ids, conv.trained) == (None, None)
    assert conv.why == (
        "SpecForge trained [2, 30, 58] differently by capture path: its HF backend (removed 2026-07-14, d5883d5b) "
        "on A(3, 31, 59), its SGLang backend (sglang 0.5.14) on A(2, 30, 58)"
    )
    # a Llama target: both paths add 1
    assert convert([2, 30, 58], specforge, target_class="LlamaForCausalLM", n=61).ids == [3, 31, 59]
    # no target: the general rule, and what was assumed
    blind = trained_on(specforge, [2, 30, 58])
    assert blind.taps == (3, 31, 59) and blind.assumed.startswith("a target outside SGLang's first-id family")
    assert trained_on(specforge, [1, 29, 57]).assumed == ""  # first id 1: every rule adds 1


def test_nemo_writes_no_ids() -> None:
    nemo = PRODUCERS["nemo"]
    assert (
        nemo.writes is None and written_ids(nemo, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1]}}) is None
    )


# ------------------------------------------------------------------ detection


def test_detection_of_each_producer(real, built_fixtures, tmp_path: Path) -> None:
    """The producer is the layout draft/layout.py detects (schemas/layouts.json), read from the real files."""

    def producer(path: Path) -> str | None:
        found = producer_for(describe(open_checkpoint(path), default_release()).layout)
        return found.layout if found else None

    assert producer(real["specforge-qwen3-235b"][0]) == "specforge"
    assert producer(real["modelopt-gpt-oss-120b"][0]) == "modelopt"
    assert producer(real["speculators-qwen3-235b-4aux"][0]) == "speculators"
    # a TorchSpec template has no version key: it reads as SpecForge's (the same convention); an export
    # records _torchspec_version and reads as TorchSpec's
    assert producer(real["torchspec-kimi-k25-mla"][0]) == "specforge"
    export = tmp_path / "torchspec"
    shutil.copytree(real["torchspec-kimi-k25-mla"][0], export)
    cfg = json.loads((export / "config.json").read_text())
    (export / "config.json").write_text(json.dumps({**cfg, "_torchspec_version": "0.1.0"}))
    assert producer(export) == "torchspec"
    assert EXPECTED["nemo-eagle3"]["detect_as"] == "nemo" and producer(built_fixtures("nemo-eagle3")) == "nemo"
    assert producer(built_fixtures("vllm-eagle3")) is None  # canonical names: no known trainer


# ------------------------------------------------------------------ validate and upgrade


def _w603(draft: Path, target: Path) -> list[str]:
    report = validate_checkpoint(draft, target=target, vllm_version="0.32.0")
    return [f.message for f in report.findings if f.code == "W603"]


def test_w603_for_a_non_default_id_set(real) -> None:
    """[1, 11, 21] on gpt-oss-20b (24 layers) is not (1, N//2-1, N-4): W603 used to stay silent."""
    assert _w603(*real["specforge-gpt-oss-20b"]) == [
        "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 11, 21] are SpecForge's ids, trained on A(2, 12, 22) "
        "(sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 11, 21) on the V1 runner (CPU, and where V2 falls "
        "back to V1); V2 reads no eagle_config ids"
    ]
    draft, target = real["specforge-gpt-oss-20b"]
    report = validate_checkpoint(draft, target=target, vllm_version="0.32.0")
    [w323] = [f for f in report.findings if f.code == "W323"]
    assert (
        w323.fix
        == "Also write eagle_aux_hidden_state_layer_ids: [2, 12, 22] at the top level (SpecForge's [1, 11, 21])."
    )


def test_w603_silent_where_the_producer_writes_vllms_ids(real) -> None:
    assert _w603(*real["speculators-qwen3-235b-4aux"]) == []


def test_w603_says_when_the_convention_cannot_be_told(real) -> None:
    [msg] = _w603(*real["specforge-pr476-kimi-k25"])
    assert msg.startswith("eagle_config.eagle_aux_hidden_state_layer_ids = [2, 30, 58]: SpecForge trained [2, 30, 58] ")


def test_upgrade_writes_vllms_ids_and_keeps_the_producers(real) -> None:
    plan = plan_for("specforge-qwen3-235b", *real["specforge-qwen3-235b"])
    cfg = plan.config_after
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 47, 91]  # vLLM reads A(2, 47, 91): as trained
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 46, 90]  # SGLang adds 1: as trained
    assert plan.aux.detail == (
        "config eagle_config.eagle_aux_hidden_state_layer_ids [1, 46, 90], SpecForge's convention (trained on "
        "A(2, 47, 91))"
    )
    view = read_draft(cfg, SGLANG, mla=False, target_class="Qwen3MoeForCausalLM", n=94)
    assert view.taps == (2, 47, 91)


def test_upgrade_of_modelopt_names_its_vllm_dump(real) -> None:
    plan = plan_for("modelopt-gpt-oss-120b", *real["modelopt-gpt-oss-120b"])
    assert plan.aux.ids == (2, 18, 33)
    assert any(w.endswith("if so, pass --aux-layer-ids 1,17,32") for w in plan.warnings)


def test_upgrade_cli_refuses_ids_whose_convention_is_unknown(real, tmp_path: Path) -> None:
    draft, target = real["specforge-pr476-kimi-k25"]
    res = CliRunner().invoke(main, ["upgrade", str(draft), "--target", str(target), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {draft}: config eagle_config.eagle_aux_hidden_state_layer_ids [2, 30, 58]: SpecForge trained "
        "[2, 30, 58] differently by capture path: its HF backend (removed 2026-07-14, d5883d5b) on A(3, 31, 59), "
        "its SGLang backend (sglang 0.5.14) on A(2, 30, 58) (pass --aux-layer-ids with the layers it was trained "
        "on (vLLM's convention: k = after k target layers))\n"
    )
    assert not (tmp_path / "o").exists()
    ok = CliRunner().invoke(
        main,
        ["upgrade", str(draft), "--target", str(target), "--aux-layer-ids", "2,30,58", "--out", str(tmp_path / "o")],
    )
    assert ok.exit_code == 0, ok.output
