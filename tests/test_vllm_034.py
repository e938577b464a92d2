"""vLLM 0.34.0: the six answers 0.33's rules gave wrongly for it (docs of issue 29, "§6" items 2-7 and 10),
each on a fixture mutant, with 0.33.0 (or the release on the other side of the window) keeping its answer.

The 0.34.0 facts come from its source (cited in eagle_convert/vllm_model/releases.py, speculative.py and
tables.py): P-EAGLE removed (speculators/algos.py update_peagle, config/speculative.py _verify_args),
Model Runner V1 removed (only eagle3_utils.get_eagle3_aux_layers_from_config picks the aux ids), the
SpeculativeConfig fields and SpeculativeMethod literal, the hf_config_override rewrites, and the
configured method no longer replaced by the draft path (0.33.0 SpeculativeConfig.__post_init__ L1432-1496).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import UsageError
from eagle_convert.validate.findings import Finding
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import read_config, served_method
from eagle_convert.vllm_model import serve_config as sc
from eagle_convert.vllm_model.features import features_of
from eagle_convert.vllm_model.releases import release
from fixtures.edits import edit_draft, put_tensor

R33, R34 = release("0.33.0"), release("0.34.0")
K3 = {"method": "eagle3", "num_speculative_tokens": 3}
P_EAGLE_RAISE = '"P-EAGLE (parallel drafting EAGLE-3) is not supported."'


def _found(draft: Path, version: str, code: str | None = None, **kw: Any) -> list[Finding]:
    report = validate_checkpoint(draft, vllm_version=version, **kw)
    return [f for f in report.findings if code is None or f.code == code]


def _one(draft: Path, version: str, code: str, **kw: Any) -> Finding:
    hits = _found(draft, version, code, **kw)
    assert len(hits) == 1, [f"{f.code}: {f.message}" for f in _found(draft, version, **kw)]
    return hits[0]


def _target(out: Path, layers: int = 8) -> Path:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": 256,
        "num_hidden_layers": layers,
        "max_position_embeddings": 32768,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _mask(s: Any) -> torch.Tensor:
    return torch.ones(192, dtype=torch.bfloat16)  # a P-EAGLE draft's mask_hidden (never read by the rules)


# ------------------------------------------------------------------ 2. speculators peagle


def test_speculators_peagle_loads_on_0_33_and_fails_on_0_34(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "p", "speculators-eagle3", config=lambda c: c.update(speculators_model_type="peagle"))
    assert [f for f in _found(draft, "0.33.0") if f.level == "error"] == []
    hit = _one(draft, "0.34.0", "E301")
    assert (hit.level, hit.impact, hit.field) == ("error", "fails-to-load", "speculators_model_type")
    assert hit.message.startswith(
        f"speculators_model_type 'peagle': in vLLM 0.34.0 a speculators `peagle` config raises ValueError {P_EAGLE_RAISE}"
        " (0.34.0 transformers_utils/configs/speculators/algos.py update_peagle (L54)"
    )
    assert hit.message.endswith("such drafts load on vLLM 0.22.0-0.33.0 only")
    assert hit.fix == "Serve the draft on vLLM 0.22.0-0.33.0: no class of vLLM 0.34.0 loads it."
    assert read_config(json.loads((draft / "config.json").read_text()), R34).draft_class is None


def test_p_eagle_names_leave_the_registry_in_0_34(tmp_path: Path) -> None:
    """A plain config naming a P-EAGLE class fails on both (method eagle3 renames it Eagle3Peagle...)."""
    draft = edit_draft(tmp_path / "p", config=lambda c: c.update(architectures=["PeagleLlamaForCausalLM"]))
    assert _one(draft, "0.33.0", "E301").message == _one(draft, "0.34.0", "E301").message
    assert len(features_of(R33).registered_eagle3_archs) == 11
    assert len(features_of(R34).registered_eagle3_archs) == 8  # the three P-EAGLE names are gone


# ------------------------------------------------------------------ 3. parallel_drafting with eagle3


def test_parallel_drafting_true_fails_on_0_34_whatever_the_tensors(tmp_path: Path) -> None:
    plain = edit_draft(tmp_path / "plain")
    masked = edit_draft(tmp_path / "masked", tensors=put_tensor("mask_hidden", _mask))
    on = {**K3, "parallel_drafting": True}
    # 0.33: E910 only without mask_hidden (the P-EAGLE load path needs it)
    assert _found(masked, "0.33.0", "E910", speculative_config=on) == []
    old = _one(plain, "0.33.0", "E910", speculative_config=on)
    assert "mask_hidden not found in weights but model is configured for parallel drafting" in old.message
    for draft in (plain, masked):
        hit = _one(draft, "0.34.0", "E910", speculative_config=on)
        assert (hit.level, hit.impact) == ("error", "fails-to-load")
        assert hit.message == (
            '--speculative-config sets parallel_drafting: true: vLLM 0.34.0 raises ValueError ("parallel_drafting '
            "is only supported by the dflash and dspark methods, not 'eagle3'.\"; config/speculative.py "
            "SpeculativeConfig._verify_args), whatever the draft's tensors"
        )


def test_mask_hidden_advice_per_release(tmp_path: Path) -> None:
    masked = edit_draft(tmp_path / "masked", tensors=put_tensor("mask_hidden", _mask))
    w909_33 = _one(masked, "0.33.0", "W909", speculative_config=K3)
    assert (
        w909_33.fix == 'Add "parallel_drafting": true to the speculative config (vLLM 0.22.0-0.33.0; 0.34.0 cannot '
        "serve the draft as trained)."
    )
    w909_34 = _one(masked, "0.34.0", "W909", speculative_config=K3)
    assert "vLLM 0.34.0 has no parallel drafting for EAGLE-3" in w909_34.message
    assert w909_34.fix.startswith('Serve the draft on vLLM 0.22.0-0.33.0 with "parallel_drafting": true')
    w107_33 = _one(masked, "0.33.0", "W107")
    assert w107_33.message == "mask_hidden is ignored: vLLM uses mask_hidden only with parallel drafting (P-EAGLE)"
    w107_34 = _one(masked, "0.34.0", "W107")
    assert w107_34.message.startswith("mask_hidden is ignored: vLLM 0.34.0 has no parallel drafting for EAGLE-3")
    assert "parallel drafting" not in w107_34.fix.split(",")[0]  # no advice to switch on what 0.34 lacks


# ------------------------------------------------------------------ 4. aux ids only in eagle_config


def _nested_only(ids: list[int]) -> Any:
    def edit(cfg: dict[str, Any]) -> None:
        cfg.pop("eagle_aux_hidden_state_layer_ids", None)
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}

    return edit


def test_nested_ids_not_three_crash_where_v2_runs_every_target(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "a4", "vllm-eagle3-a4", config=_nested_only([1, 3, 4, 6]))
    target = _target(tmp_path / "t")
    # 0.28: V2 is the default only for some targets: a warning, V1 reads the 4 ids
    old = _one(draft, "0.28.0", "W323", target=target)
    assert old.level == "warning" and _found(draft, "0.28.0", "E202", target=target) == []
    for version, role, v1 in (
        ("0.29.0", "the GPU default for every target (with Triton and no unsupported feature)", True),
        ("0.33.0", "the GPU default for every target (with Triton and no unsupported feature)", True),
        ("0.34.0", "the only runner (Model Runner V1 was removed in 0.34.0)", False),
    ):
        hit = _one(draft, version, "E202", target=target)
        assert (hit.level, hit.impact) == ("error", "fails-to-load")
        reads = (
            "only the V1 runner (CPU, VLLM_USE_V2_MODEL_RUNNER=0) reads them"
            if v1
            else "no runner of this release reads them"
        )
        assert hit.message == (
            f"aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids (4 ids): vLLM {version}'s Model Runner "
            f"V2, {role}, never reads them; {reads}, so it captures its 3 default layers (2, 4, 5) while fc expects "
            "4 aux states (num_aux_hidden_states): the first forward fails in combine_hidden_states (inferred from "
            "source: v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config)"
        )
        assert _found(draft, version, "W323", target=target) == []


def test_nested_three_ids_name_v2_as_the_only_runner_on_0_34(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "specforge-eagle3", config=_nested_only([1, 2, 6]))
    target = _target(tmp_path / "t")
    old = _one(draft, "0.33.0", "W323", target=target)
    assert "the GPU default for every target" in old.message
    new = _one(draft, "0.34.0", "W323", target=target)
    assert (new.level, new.impact) == ("warning", "computes-differently")
    assert new.message == (
        "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.34.0's Model Runner V2, the only "
        "runner (Model Runner V1 was removed in 0.34.0), never reads them, so it taps (2, 4, 5) for this 8-layer "
        "target instead of [1, 2, 6] (SpecForge trained them on A(2, 3, 7))"
    )
    assert _found(draft, "0.34.0", "W320", target=target) == []  # the ids exist: not "no ids"
    # SGLang-convention ids: V2's fallback is what was trained, and no V1 reads them one lower on 0.34
    sglang = edit_draft(tmp_path / "s", "specforge-eagle3")
    hit = _one(sglang, "0.34.0", "W323", target=_target(tmp_path / "t2"))
    assert hit.impact == "hygiene" and hit.message.endswith(
        "(the layers SpecForge trained these ids on: served as trained on V2)"
    )
    assert _found(sglang, "0.34.0", "W603", target=_target(tmp_path / "t3")) == []
    assert _found(sglang, "0.33.0", "W603", target=_target(tmp_path / "t4"))


# ------------------------------------------------------------------ 5. E106


def test_missing_embed_is_only_the_crash_on_0_34(tmp_path: Path) -> None:
    from dataclasses import replace

    from fixtures.drafts import FIXTURE_MATRIX

    draft = edit_draft(tmp_path / "e", replace(FIXTURE_MATRIX["vllm-eagle3"], target_hidden=96))
    old = _one(draft, "0.33.0", "E106")
    assert "stays unloaded on the V1 runner" in old.message
    new = _one(draft, "0.34.0", "E106")
    assert (new.level, new.impact) == ("error", "fails-to-load")
    assert new.message == (
        "embed_tokens.weight is missing and hidden_size 64 differs from the target's 96: vLLM 0.34.0's only runner, "
        "Model Runner V2, shares the target's embedding without a width check (v1/worker/gpu/spec_decode/eagle/"
        "utils.py maybe_share_target_embed), so the 96-wide embedding meets the draft's 64-wide hidden state and "
        "fails the hidden_states/input_embeds width assert (inferred from source, not run)"
    )


# ------------------------------------------------------------------ 6. serve-config keys and methods


@pytest.mark.parametrize(
    ("data", "accepted_on"),
    [
        ({"use_heterogeneous_vocab": True}, "0.33.0"),
        ({"disable_padded_drafter_batch": True}, "0.33.0"),
        ({"draft_decode_context_parallel_size": 1}, "0.34.0"),
        ({"suffix_decoding_corpus_tokens": 1000}, "0.34.0"),
        ({"speculator_options": None}, "0.34.0"),  # set, it is refused for eagle3 (_METHOD_SPECIFIC_OPTIONS)
        ({"method": "custom_class"}, "0.33.0"),
        ({"method": "nemotron3_5_transcribe_mtp"}, "0.34.0"),
    ],
)
def test_keys_and_methods_swap_between_0_33_and_0_34(data: dict[str, Any], accepted_on: str) -> None:
    spec = {"num_speculative_tokens": 3, "method": "eagle3"} | data
    refused_on = R34 if accepted_on == "0.33.0" else R33
    assert sc.parse_serve_config(spec, release(accepted_on)) is not None
    with pytest.raises(UsageError) as exc:
        sc.parse_serve_config(spec, refused_on)
    assert f"vLLM {refused_on}" in str(exc.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [("xpress_topc", 4), ("dspark_draft_topk", 2), ("index_share_for_mtp_iteration", True), ("speculator_options", {})],
)
@pytest.mark.parametrize("method", ["eagle3", "eagle", None])
def test_0_34_refuses_a_set_option_the_eagle_methods_do_not_list(option: str, value: Any, method: str | None) -> None:
    """0.34.0's one loop over _METHOD_SPECIFIC_OPTIONS: eagle / eagle3 list only draft_lm_head_quantization."""
    spec = {"num_speculative_tokens": 3, option: value} | ({"method": method} if method else {})
    with pytest.raises(UsageError) as exc:
        sc.parse_serve_config(spec, R34)
    assert str(exc.value).startswith(
        f"--speculative-config: {option} is not supported with speculative method {method or 'eagle3'!r} (vLLM 0.34.0"
    )
    assert sc.parse_serve_config({**spec, option: None}, R34) is not None  # null: not set
    assert sc.parse_serve_config({"num_speculative_tokens": 3, "draft_lm_head_quantization": "fp8"}, R34) is not None


def test_removed_key_names_its_last_release() -> None:
    with pytest.raises(UsageError) as exc:
        sc.parse_serve_config({**K3, "use_heterogeneous_vocab": True}, R34)
    assert "vLLM 0.25.0-0.33.0" in str(exc.value)


def test_e902_cites_the_0_34_speculator_config(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d")
    spec = {"method": "eagle3"}
    assert (
        "config/speculative.py SpeculativeConfig.__post_init__"
        in _one(draft, "0.33.0", "E902", speculative_config=spec).message
    )
    assert _one(draft, "0.34.0", "E902", speculative_config=spec).message.endswith(
        "v1/worker/gpu/spec_decode/speculator_config.py DraftModelSpeculatorConfig.configure)"
    )


# ------------------------------------------------------------------ 7. the new rewrites


def test_nemotron_transcribe_and_mistral_large_4_are_rewritten_from_0_34(tmp_path: Path) -> None:
    nemotron = {"architectures": ["Nemotron3_5TranscribeForConditionalGeneration"], "model_type": "llama"}
    assert read_config(nemotron, R33).mtp_rewrite is None
    assert read_config(nemotron, R34).mtp_rewrite == "architectures 'Nemotron3_5TranscribeForConditionalGeneration'"
    mistral = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "mistral_large_4", "mtp_config": {"n": 1}}
    assert read_config(mistral, R33).mtp_rewrite is None
    assert read_config(mistral, R34).mtp_rewrite == "model_type 'mistral_large_4' with mtp_config set"
    assert read_config({**mistral, "mtp_config": None}, R34).mtp_rewrite is None  # needs a truthy mtp_config
    nested = {"architectures": ["X"], "text_config": {"model_type": "mistral_large_4", "mtp_config": {"n": 1}}}
    assert (
        read_config(nested, R34).mtp_rewrite
        == "text_config.model_type 'mistral_large_4' with text_config.mtp_config set"
    )
    dflash2 = {"architectures": ["DFlash2DraftModel"]}
    assert read_config(dflash2, R33).mtp_rewrite is None
    assert (
        read_config(dflash2, R34).mtp_rewrite
        == "architectures 'DFlash2DraftModel' (becomes DFlash2RicursiveDraftModel)"
    )
    draft = edit_draft(tmp_path / "m", config=lambda c: c.update(model_type="mistral_large_4", mtp_config={"n": 1}))
    assert _found(draft, "0.33.0", "E302") == []
    assert "mistral_large_4" in _one(draft, "0.34.0", "E302").message


# ------------------------------------------------------------------ 10. the path-override window (E901)


@pytest.mark.parametrize("method", ["draft_model", "mtp", "deepseek_mtp"])
def test_configured_method_is_overridden_by_an_eagle3_path_up_to_0_33(tmp_path: Path, method: str) -> None:
    draft = edit_draft(tmp_path / "llama-eagle3-draft")
    spec = {"method": method, "num_speculative_tokens": 3}
    for version in ("0.21.0", "0.33.0"):
        assert _found(draft, version, "E901", speculative_config=spec) == [], version
    hit = _one(draft, "0.34.0", "E901", speculative_config=spec)
    assert hit.message.startswith(
        f"--speculative-config: method {method!r} (vLLM 0.34.0 never replaces a configured method by the one the "
        "path names, as 0.21.0-0.33.0 did): vLLM 0.34.0 builds "
    )


def test_path_override_picks_what_the_path_names(tmp_path: Path) -> None:
    """Up to 0.33 an `eagle-` path turns draft_model into EAGLE-1 (still E901); a plain path keeps it (E901)."""
    eagle1 = edit_draft(tmp_path / "EAGLE-llama-draft")
    spec = {"method": "draft_model", "num_speculative_tokens": 3}
    hit = _one(eagle1, "0.33.0", "E901", speculative_config=spec)
    assert hit.message.startswith(
        "--speculative-config: method 'draft_model': vLLM 0.33.0 replaces it with the one the model path names ("
    )
    assert "gives eagle): vLLM 0.33.0 builds the EAGLE-1 drafter" in hit.message
    plain = edit_draft(tmp_path / "draft")
    assert _one(plain, "0.33.0", "E901", speculative_config=spec).message.startswith(
        "--speculative-config: method 'draft_model': vLLM 0.33.0 builds a standalone draft model"
    )
    assert served_method("eagle", "/m/eagle3-x", R33) == ("eagle", False)  # eagle/eagle3/dflash/dspark are kept
    assert served_method("draft_model", "/m/eagle3-x", R33) == ("eagle3", True)
    assert served_method("draft_model", "/m/eagle3-x", R34) == ("draft_model", False)
    assert served_method(None, "/m/eagle3-x", R34) == ("eagle3", True)  # an unset method is still guessed


# ------------------------------------------------------------------ the matrix and the CLI


def test_cli_matrix_has_a_0_34_row(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "p", "speculators-eagle3", config=lambda c: c.update(speculators_model_type="peagle"))
    res = CliRunner().invoke(main, ["validate", str(draft), "--vllm-version", "all", "--json"])
    rows = {r["release"]: r for r in json.loads(res.stdout)["matrix"]}
    assert (rows["0.34.0"]["verdict"], rows["0.34.0"]["codes"]) == ("fails to load", ["E301"])
    assert rows["0.33.0"]["verdict"] != "fails to load"
    named = CliRunner().invoke(main, ["validate", str(draft), "--vllm-version", "0.34.0"])
    assert named.exit_code == 1 and "E301" in named.output
