"""upgrade on every upgradable fixture: bytes kept, norms added, config right, input untouched.

Expected values come from the fixture builder (`draft_state`, `DraftSpec`), not from the code under
test: carried-over tensors are compared bit-for-bit with the builder's tensors, read back through
the safetensors library.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.draft.target import Target
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.vllm_model import default_release
from eagle_convert.vllm_model.features import vllm_package_dir
from fixtures.drafts import EXPECTED, FIXTURE_MATRIX, draft_state

UPGRADABLE = sorted(n for n, e in EXPECTED.items() if e["variant"] == "eagle3")
ARCH = {
    "llama": {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"},
    "qwen3": {"Eagle3Qwen3ForCausalLM"},
    "mla": {"Eagle3DeepseekV2ForCausalLM"},
}
TORCH_DTYPE = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def sha_tree(root: Path) -> dict[str, str]:
    """Content hash and mode of every file under root (the "input unchanged" check)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
    return out


def needs_ids(name: str) -> list[int] | None:
    """Fixtures whose producer writes no aux ids get theirs from the spec (as --aux-layer-ids)."""
    return None if EXPECTED[name]["aux_ids"] else list(FIXTURE_MATRIX[name].resolved_aux_ids)


# SpecForge, TorchSpec and ModelOpt train an eagle_config id k on the output of target layer k, vLLM's
# id k + 1 (their training code: eagle_convert/engines/producers.py); upgrade writes vLLM's at the top level.
OUTPUT_OF_LAYER = {"specforge", "torchspec", "modelopt"}


def vllm_ids(name: str) -> list[int]:
    """The ids vLLM must read to tap what the fixture's producer trained its written ids on."""
    ids, exp = list(FIXTURE_MATRIX[name].resolved_aux_ids), EXPECTED[name]
    nested_by_producer = exp["aux_ids_in"] == ["eagle_config"] and exp["detect_as"] in OUTPUT_OF_LAYER
    return [i + 1 for i in ids] if nested_by_producer and not needs_ids(name) else ids


def load_output(out: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for f in sorted(out.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():
                tensors[k] = fh.get_tensor(k)
    return tensors


def bits(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def upgrade(src: Path, out: Path, **kw):
    ckpt = open_checkpoint(src)
    plan = plan_upgrade(ckpt, describe(ckpt, default_release()), **kw)
    return plan, apply_upgrade(plan, out)


def vllm_reads(cfg: dict) -> dict:
    """What vLLM 0.32 derives from a draft config.json: aux ids (V1, V2 runner) and A per draft class.

    Mirrors gpu_model_runner._get_eagle3_aux_layers_from_config, eagle3_utils.get_eagle3_aux_layers_from_config,
    llama_eagle3 / qwen3_eagle3 / deepseek_eagle3 LlamaModel.__init__, and (speculators) algos.update_eagle3,
    which is executed from the installed vLLM source.
    """
    if "speculators_config" in cfg and "model_type" not in cfg:
        spec = importlib.util.spec_from_file_location(
            "_algos", vllm_package_dir() / "transformers_utils/configs/speculators/algos.py"
        )
        algos = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(algos)
        flat = json.loads(json.dumps(cfg["transformer_layer_config"]))
        algos.update_eagle3(cfg, flat)
        cfg = flat
    eagle = cfg.get("eagle_config") or {}
    v1 = cfg.get("eagle_aux_hidden_state_layer_ids") or eagle.get("eagle_aux_hidden_state_layer_ids")
    v2 = cfg.get("eagle_aux_hidden_state_layer_ids") or eagle.get("layer_ids")
    llama_a = cfg.get("num_aux_hidden_states") or len(eagle.get("eagle_aux_hidden_state_layer_ids") or [0] * 3)
    qwen3_ids = cfg.get("eagle_aux_hidden_state_layer_ids") or eagle.get("eagle_aux_hidden_state_layer_ids")
    qwen3_a = cfg.get("num_aux_layers") or cfg.get("num_aux_hidden_states") or (len(qwen3_ids) if qwen3_ids else 3)
    return {
        "v1_ids": v1,
        "v2_ids": v2,
        "llama_A": llama_a,
        "qwen3_A": qwen3_a,
        "mla_A": llama_a,
        "fc_norm": cfg.get("fc_norm", False),
        "norm_output": cfg.get("norm_output", False),
        "norm_before_fc": bool(eagle.get("norm_before_fc", cfg.get("norm_before_fc", False))),
        "norm_before_residual": cfg.get("norm_before_residual", False),
        "architectures": cfg.get("architectures"),
    }


@pytest.mark.parametrize("name", UPGRADABLE)
def test_upgrade_every_layout_to_vllm(name: str, built_fixtures, tmp_path: Path) -> None:
    spec, exp = FIXTURE_MATRIX[name], EXPECTED[name]
    src = built_fixtures(name)
    before_in = sha_tree(src)
    config_in = json.loads((src / "config.json").read_text())
    out = tmp_path / "out"
    plan, result = upgrade(src, out, aux_layer_ids=needs_ids(name))

    assert sha_tree(src) == before_in  # input unchanged, byte for byte
    assert result.verified
    got = load_output(out)
    want = draft_state(spec)
    norms = {f"fc_norm.{i}.weight" for i in range(exp["A"])}
    assert set(got) == set(want) | norms
    for k, t in want.items():
        assert got[k].dtype == t.dtype and got[k].shape == t.shape and bits(got[k]) == bits(t), k
    fc_dtype = want["fc.weight"].dtype
    for k in norms:
        assert got[k].dtype == fc_dtype and tuple(got[k].shape) == (exp["Ht"],)
        assert torch.equal(got[k], torch.ones(exp["Ht"], dtype=fc_dtype))
    assert not any(k.startswith("model.") for k in got)

    cfg = json.loads((out / "config.json").read_text())
    ids = vllm_ids(name)
    reads = vllm_reads(cfg)
    assert reads["v1_ids"] == ids and reads["v2_ids"] == ids
    assert reads[f"{exp['arch']}_A"] == exp["A"]
    assert (reads["fc_norm"], reads["norm_output"], reads["norm_before_fc"]) == (True, True, False)
    assert cfg["norm_before_residual"] is (exp["layout"] == "speculators")  # what each path applied before
    assert cfg["architectures"][0] in ARCH[exp["arch"]]
    assert "use_aux_norm" not in cfg and "speculators_config" not in cfg
    assert ("num_aux_hidden_states" in cfg) == (exp["A"] != 3 or "num_aux_hidden_states" in config_in)
    if "eagle_config" in config_in:  # the producer's own ids stay where SGLang reads them
        assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == list(spec.resolved_aux_ids)
    else:
        assert "eagle_config" not in cfg
    prov = cfg["_eagle_convert"]
    assert prov["source"] == str(src) and prov["added_tensors"] == sorted(norms)
    assert prov["aux_layer_ids_from"].startswith("--aux-layer-ids" if needs_ids(name) else "config ")

    info = describe(open_checkpoint(out), default_release())
    assert info.variant == "EAGLE-3.1" and info.num_aux == exp["A"]
    assert all(k == c for k, c in info.canonical.items())  # already vLLM-native names
    expected_files = (
        {"config.json", "README.md", "model.safetensors"}
        if exp["storage"] != "sharded"
        else {
            "config.json",
            "README.md",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        }
    )
    assert {p.name for p in out.iterdir()} == expected_files
    assert not list(tmp_path.glob(".out.*"))  # no temp dir left


# nemo-eagle3 keeps `model.`, which vLLM misreads: refused (tests/test_upgrade_refusals.py).
@pytest.mark.parametrize("name", ["vllm-eagle3-sharded", "vllm-eagle3-a4", "specforge-eagle3"])
def test_keep_layout_keeps_names_and_adds_norms_in_the_input_style(name: str, built_fixtures, tmp_path: Path) -> None:
    spec, exp = FIXTURE_MATRIX[name], EXPECTED[name]
    src = built_fixtures(name)
    upgrade(src, tmp_path / "out", layout="keep", aux_layer_ids=needs_ids(name))
    got = load_output(tmp_path / "out")
    disk = {spec.layout_row.to_disk(k) for k in draft_state(spec)}
    new = {spec.layout_row.to_disk(f"fc_norm.{i}.weight") for i in range(exp["A"])}
    assert set(got) == disk | new
    if spec.layout == "nemo":
        assert "model.fc_norm.0.weight" in got
    assert describe(open_checkpoint(tmp_path / "out"), default_release()).variant == "EAGLE-3.1"


def test_sharded_in_sharded_out_with_a_correct_index(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3-sharded")
    upgrade(src, tmp_path / "out")
    index = json.loads((tmp_path / "out/model.safetensors.index.json").read_text())
    in_index = json.loads((src / "model.safetensors.index.json").read_text())
    total = 0
    for shard in sorted(set(index["weight_map"].values())):
        with safe_open(str(tmp_path / "out" / shard), framework="pt") as fh:
            for k in fh.keys():
                assert index["weight_map"][k] == shard
                t = fh.get_tensor(k)
                total += t.numel() * t.element_size()
    assert index["metadata"]["total_size"] == total
    # Every carried tensor stays in its shard; the norms join fc.weight's shard.
    fc_shard = in_index["weight_map"]["fc.weight"]
    assert {k: v for k, v in index["weight_map"].items() if not k.startswith("fc_norm.")} == in_index["weight_map"]
    assert {index["weight_map"][f"fc_norm.{i}.weight"] for i in range(3)} == {fc_shard}


@pytest.mark.vllm  # executes the installed vLLM's speculators/algos.py
@pytest.mark.parametrize("name", ["vllm-eagle3", "vllm-eagle3-a4", "speculators-eagle3", "vllm-qwen3-eagle3"])
def test_speculators_layout_mirrors_flags_where_vllm_reads_them(name: str, built_fixtures, tmp_path: Path) -> None:
    exp = EXPECTED[name]
    src = built_fixtures(name)
    target = Target.from_config({"num_hidden_layers": 8}, "org/tiny-target")
    upgrade(src, tmp_path / "out", layout="speculators", target=target)
    cfg = json.loads((tmp_path / "out/config.json").read_text())
    assert "model_type" not in cfg and cfg["speculators_model_type"] == "eagle3"
    inner = cfg["transformer_layer_config"]
    want_nbr = exp["layout"] == "speculators"
    for where in (cfg, inner):
        assert (where["fc_norm"], where["norm_output"], where["norm_before_fc"]) == (True, True, False)
        assert where["norm_before_residual"] is want_nbr
    assert inner["model_type"] == exp["arch"]
    assert ("num_aux_hidden_states" in inner) == (exp["A"] != 3)
    reads = vllm_reads(cfg)
    assert reads[f"{exp['arch']}_A"] == exp["A"] and reads["v1_ids"] == list(FIXTURE_MATRIX[name].resolved_aux_ids)
    spec_arch = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"}[exp["arch"]]
    assert reads["architectures"] == [spec_arch]
    if exp["layout"] != "speculators":
        assert cfg["speculators_config"]["verifier"]["name_or_path"] == "org/tiny-target"


def test_no_norm_output_adds_only_the_norms(built_fixtures, tmp_path: Path) -> None:
    upgrade(built_fixtures("vllm-eagle3"), tmp_path / "out", norm_output=False)
    cfg = json.loads((tmp_path / "out/config.json").read_text())
    assert (cfg["fc_norm"], cfg["norm_output"]) == (True, False)
    info = describe(open_checkpoint(tmp_path / "out"), default_release())
    assert info.variant == "EAGLE-3.1" and not info.flags["norm_output"].value


def test_bin_in_safetensors_out_is_byte_copied(built_fixtures, tmp_path: Path) -> None:
    plan, _ = upgrade(built_fixtures("vllm-eagle3-fp16-bin"), tmp_path / "out")
    assert [f.filename for f in plan.files] == ["model.safetensors"]
    from eagle_convert.io.outfile import ByteRange
    from eagle_convert.upgrade.apply import _out_files

    sources = [t.source for f in _out_files(plan) for t in f.tensors]
    assert sum(isinstance(s, ByteRange) for s in sources) == len(plan.carried)  # no tensor decoded


def test_dimensions_come_from_the_checkpoint_not_from_three(built_fixtures, tmp_path: Path) -> None:
    plan, _ = upgrade(built_fixtures("vllm-eagle3-ht-embed"), tmp_path / "out")
    assert (plan.num_aux, plan.target_hidden_size, plan.norm_dtype) == (3, 96, "BF16")
    plan4, _ = upgrade(built_fixtures("speculators-eagle3-a4"), tmp_path / "out4")
    assert plan4.num_aux == 4 and [t.name for t in plan4.additions][-1] == "fc_norm.3.weight"


def test_progress_sees_every_byte_written_and_verified(built_fixtures, tmp_path: Path) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.phases: list[tuple[str, int]] = []
            self.done: dict[str, int] = {}

        def start(self, phase: str, total: int) -> None:
            self.phases.append((phase, total))
            self.done[phase] = 0

        def advance(self, nbytes: int) -> None:
            self.done[self.phases[-1][0]] += nbytes

    ckpt = open_checkpoint(built_fixtures("vllm-eagle3-sharded"))
    plan = plan_upgrade(ckpt, describe(ckpt, default_release()))
    rec = Recorder()
    apply_upgrade(plan, tmp_path / "out", progress=rec)
    data = sum(f.data_bytes for f in plan.files)
    assert rec.phases == [("write", data), ("verify", data)] and rec.done == {"write": data, "verify": data}


def test_keep_layout_keeps_a_speculators_config_speculators(built_fixtures, tmp_path: Path) -> None:
    upgrade(built_fixtures("speculators-eagle3-a4"), tmp_path / "out", layout="keep")
    cfg = json.loads((tmp_path / "out/config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3" and cfg["transformer_layer_config"]["fc_norm"] is True
    assert cfg["transformer_layer_config"]["num_aux_hidden_states"] == 4 and cfg["norm_before_residual"] is True


def test_read_target_accepts_a_folder_a_config_file_and_nested_text_config(tmp_path: Path) -> None:
    from eagle_convert.upgrade.configgen import read_target

    (tmp_path / "t").mkdir()
    (tmp_path / "t/config.json").write_text(
        json.dumps({"text_config": {"num_hidden_layers": 48, "hidden_size": 8}, "architectures": ["X"]})
    )
    for ref in (tmp_path / "t", tmp_path / "t/config.json"):
        t = read_target(str(ref))
        assert (t.num_layers, t.hidden_size, t.architectures) == (48, 8, ("X",))
