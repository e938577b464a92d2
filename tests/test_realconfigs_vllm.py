"""Real-dimension drafts in the real vLLM: loaded as EAGLE-3.1 after upgrade, and one that fails as
validate predicts, then loads with validate's fix. One worker (`EngineSession`) for all four loads.

The strict load check (`vllm/strict_load_worker.py`) builds vLLM's engine config for the target and loads
only the draft, so a target is a config.json of the real target's dimensions (no weights, no
tokenizer). Drafts are sparse (fixtures/realconfigs.py): vLLM reads their holes as zeros. The
Llama-3.1-8B draft is upgraded by `apply_upgrade` (1.9 GB written); the 6 GB Kimi MLA draft's upgrade
plan is written sparsely (`materialize_plan`: the same config, tensor names, shapes, dtypes and bytes,
the weights still holes) so that no 6 GB copy is made; `test_realconfigs.py::test_upgrade_real_size`
copies it for real. Peak worker memory ~12.5 GB (the Kimi draft), wall ~2-4 min on 2 busy cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle_convert.vllm_model.features import vllm_available
from fixtures.realconfigs import REAL_CONFIGS, build, build_target, materialize_plan, plan_for, vllm_target_config

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed"),
]


def _target(key: str, out: Path) -> Path:
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(vllm_target_config(REAL_CONFIGS[key]), indent=2), encoding="utf-8")
    return out


def _plan(key: str, draft: Path, base: Path):
    return plan_for(key, draft, build_target(REAL_CONFIGS[key].target, base / f"{key}.static-target"))


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.vllm.session import EngineSession

    base = tmp_path_factory.mktemp("realconfigs-vllm")
    llama = build(REAL_CONFIGS["specforge-llama3-8b"], base / "llama-in")
    apply_upgrade(_plan("specforge-llama3-8b", llama, base), base / "llama-3.1", verify=True)
    kimi = build(REAL_CONFIGS["torchspec-kimi-k25-mla"], base / "kimi-in")
    materialize_plan(_plan("torchspec-kimi-k25-mla", kimi, base), base / "kimi-3.1")
    spec = build(REAL_CONFIGS["speculators-qwen3-235b-4aux"], base / "spec")
    fixed = base / "spec-fixed"  # validate's E202 fix, nothing else: the same weights
    fixed.mkdir()
    os.link(spec / "model.safetensors", fixed / "model.safetensors")
    config = json.loads((spec / "config.json").read_text(encoding="utf-8"))
    config["transformer_layer_config"]["num_aux_hidden_states"] = 4
    (fixed / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    runs = [
        ("llama", base / "llama-3.1", "specforge-llama3-8b"),
        ("spec", spec, "speculators-qwen3-235b-4aux"),
        ("spec-fixed", fixed, "speculators-qwen3-235b-4aux"),
        ("kimi", base / "kimi-3.1", "torchspec-kimi-k25-mla"),
    ]
    with EngineSession() as session:
        return {
            name: session.load_check([draft], _target(key, base / f"{name}.target"), timeout_s=900)[0]
            for name, draft, key in runs
        }


def test_specforge_llama31_8b_loads_as_eagle31(loads):
    r = loads["llama"]
    assert r.ok, (r.error, r.unwritten, r.problems)
    a = r.applied
    assert (a["class"], a["fc_norm"], a["norm_output"], a["num_aux_hidden_states"]) == (
        "Eagle3LlamaForCausalLM",
        True,
        True,
        3,
    )
    assert a["fc_input_size"] == 3 * 4096 and a["draft_vocab_size"] == 32000 and a["has_d2t_parameter"]
    assert a["aux_layers_used"] == [2, 16, 29]  # vLLM's default for the 32-layer target, now written


def test_torchspec_kimi_mla_loads_as_eagle31(loads):
    r = loads["kimi"]
    assert r.ok, (r.error, r.unwritten, r.problems)
    a = r.applied
    assert (a["class"], a["fc_norm"], a["norm_output"], a["num_aux_hidden_states"]) == (
        "Eagle3DeepseekV2ForCausalLM",
        True,
        True,
        3,
    )
    assert a["draft_vocab_size"] == 163840 and not a["has_d2t_parameter"]  # full vocabulary: no d2t
    # the template's eagle_config [1, 29, 57] are layer outputs (engines/producers.py): upgrade writes vLLM's
    assert a["aux_layers_used"] == [2, 30, 58]


def test_speculators_4aux_fails_as_validate_predicts(loads):
    """E202: vLLM builds fc for 3 aux states; the published fc.weight is [4096, 4 x 4096]."""
    r = loads["spec"]
    assert not r.ok and r.stage == "load"
    assert "[4096, 16384]" in r.error.replace("torch.Size(", "").replace(")", "")
    assert "[4096, 12288]" in r.error.replace("torch.Size(", "").replace(")", "")


def test_speculators_4aux_loads_with_validates_fix(loads):
    r = loads["spec-fixed"]
    assert r.ok, (r.error, r.unwritten, r.problems)
    assert r.applied["num_aux_hidden_states"] == 4 and r.applied["norm_before_fc"]
    assert r.applied["aux_layers_used"] == [2, 46, 91, 93]
