"""The config side of the release windows: each vLLM release range gives its finding, its neighbour does not.

Every draft is a fixture draft with one config edit. The boundaries come from the vLLM sources of the
releases on both sides (cited in eagle_convert/vllm_model/releases.py and the rule modules):
speculators 3.1 flags (0.24.0 | 0.25.0, P-EAGLE on every release, no class before 0.22.0), the
Llama class forced for a qwen3 inner model (0.23.0 | 0.24.0), the draft context (0.26.0 | 0.27.0 |
0.33.0, by rope type), Model Runner V2's aux ids and use_aux_hidden_state (0.32.0 | 0.33.0) and the
0.33.0 verifier rule, plus W307 for the SpecForge fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.upgrade.configgen import read_target
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.validate.findings import Finding
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import default_release
from eagle_convert.vllm_model.config import read_config
from eagle_convert.vllm_model.releases import release
from fixtures.edits import edit_draft, pop_config, set_config


def _hits(draft: Path, version: str, code: str, **kw: Any) -> list[Finding]:
    return [f for f in validate_checkpoint(draft, vllm_version=version, **kw).findings if f.code == code]


def _one(draft: Path, version: str, code: str, **kw: Any) -> Finding:
    [hit] = _hits(draft, version, code, **kw)
    return hit


def _target(out: Path, **fields: Any) -> Path:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": 256,
        "num_hidden_layers": 8,
        "max_position_embeddings": 32768,
    } | fields
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


# ------------------------------------------------------------------ E318: a 3.1 flag where the release does not read it


def test_top_level_only_norm_output_is_lost_up_to_0_24(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle31", config=pop_config("transformer_layer_config.norm_output"))
    hit = _one(draft, "0.24.0", "E318")
    assert (hit.level, hit.impact, hit.field) == (
        "error",
        "computes-differently",
        "transformer_layer_config.norm_output",
    )
    assert hit.message == (
        "norm_output: true is written at the top level but vLLM 0.24.0 reads it from transformer_layer_config: "
        "speculators' update_eagle3 copies the top-level value only from 0.25.0 (vLLM #46488), so the draft is "
        "served without norm_output (the pre-norm state is fed back, not the trained one)"
    )
    assert _hits(draft, "0.25.0", "E318") == []
    w308 = _one(draft, "0.24.0", "W308")
    assert w308.impact == "hygiene" and w308.message.endswith("; it drops norm_output (E318)")


def test_inner_only_norm_output_is_lost_from_0_25(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle31", config=pop_config("norm_output"))
    hit = _one(draft, "0.25.0", "E318")
    assert (hit.level, hit.impact, hit.field) == ("error", "computes-differently", "norm_output")
    assert hit.message == (
        "norm_output: true is written in transformer_layer_config but vLLM 0.25.0 reads it at the top level: "
        "speculators' update_eagle3 overwrites the inner value with the top-level one, default false, so the "
        "draft is served without norm_output (the pre-norm state is fed back, not the trained one)"
    )
    assert _hits(draft, "0.24.0", "E318") == []
    w308 = _one(draft, "0.24.0", "W308")
    assert w308.impact == "hygiene"
    assert w308.message == (
        "norm_output: top-level and transformer_layer_config disagree or one is missing; vLLM 0.24.0 reads "
        "norm_output from transformer_layer_config; it applies what is written, so the draft is served as written"
    )


@pytest.mark.parametrize(
    ("drop", "version", "neighbour", "exc"),
    [
        ("transformer_layer_config.fc_norm", "0.24.0", "0.25.0", "KeyError: 'fc_norm.0.weight'"),
        ("fc_norm", "0.25.0", "0.24.0", "ValueError: There is no module or parameter named 'fc_norm'"),
    ],
)
def test_lost_fc_norm_with_tensors_fails_the_load(
    drop: str, version: str, neighbour: str, exc: str, tmp_path: Path
) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle31", config=pop_config(drop))
    hit = _one(draft, version, "E318")
    assert (hit.level, hit.impact) == ("error", "fails-to-load")
    assert hit.message.endswith(f"so it builds no fc_norm and the 3 fc_norm.* tensors fail the load ({exc})")
    assert _hits(draft, neighbour, "E318") == []


def _peagle(cfg: dict) -> None:
    cfg["speculators_model_type"] = "peagle"
    cfg["mask_token_id"] = 3
    cfg["transformer_layer_config"].pop("norm_output")


@pytest.mark.parametrize("version", ["0.22.0", "0.25.0", "0.33.0"])
def test_peagle_never_reads_a_top_level_norm_output(version: str, tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle31", config=_peagle)
    hit = _one(draft, version, "E318")
    assert hit.impact == "computes-differently"
    assert hit.message == (
        f"norm_output: true is written at the top level but vLLM {version} reads it from transformer_layer_config: "
        "speculators' update_peagle never copies a top-level fc_norm / norm_output, so the draft is served "
        "without norm_output (the pre-norm state is fed back, not the trained one)"
    )
    if version != "0.22.0":  # the same config as eagle3 is read from the top level there
        eagle3 = edit_draft(
            tmp_path / "e", "speculators-eagle31", config=pop_config("transformer_layer_config.norm_output")
        )
        assert _hits(eagle3, version, "E318") == []


def test_norm_output_before_0_22_is_read_by_no_class(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=set_config(norm_output=True))  # no fc_norm tensors
    hit = _one(draft, "0.21.0", "E318")
    assert (hit.impact, hit.fix) == ("computes-differently", "Serve on vLLM 0.22.0 or newer.")
    assert hit.message == (
        "norm_output: true is written at the top level but vLLM 0.21.0 reads it nowhere: no draft class reads "
        "it before 0.22.0 (vLLM #42764), so the draft is served without norm_output (the pre-norm state is fed "
        "back, not the trained one)"
    )
    assert _hits(draft, "0.22.0", "E318") == []


def test_w308_changes_serving_where_the_release_applies_another_value(tmp_path: Path) -> None:
    def inner_false(cfg: dict) -> None:
        cfg["transformer_layer_config"]["norm_before_residual"] = False

    draft = edit_draft(tmp_path / "d", "speculators-eagle3", config=inner_false)
    hit = _one(draft, "0.32.0", "W308")
    assert (hit.level, hit.impact) == ("warning", "computes-differently")
    assert hit.message == (
        "norm_before_residual: top-level and transformer_layer_config disagree or one is missing; vLLM 0.32.0 "
        "reads norm_before_residual at the top level; so it applies norm_before_residual: true while "
        "transformer_layer_config says False"
    )


def test_qwen3_inner_model_before_0_24_builds_the_llama_class(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-qwen3-eagle31")
    [hit] = [f for f in _hits(draft, "0.23.0", "E301")]
    assert (hit.impact, hit.field) == ("fails-to-load", "transformer_layer_config.model_type")
    assert hit.message == (
        "transformer_layer_config.model_type is 'qwen3' but vLLM 0.23.0's speculators path builds "
        "Eagle3LlamaForCausalLM for every inner model (the inner model_type picks the class from 0.24.0): its "
        "q_norm / k_norm tensors fail the load with KeyError: 'layers.0.self_attn.k_norm.weight' (vLLM #43132)"
    )
    assert _hits(draft, "0.24.0", "E301") == []


# ------------------------------------------------------------------ W310: the draft context per release and rope type

YARN = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}


def test_yarn_draft_caps_the_target_context_on_0_33(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=set_config(**YARN))
    hit = _one(draft, "0.33.0", "W310", serving_context=32768)
    assert (hit.level, hit.impact) == ("warning", "caps-context")
    assert hit.message == (
        "max_position_embeddings is 2048 but the serving context is 32768 (--max-model-len): rope_type yarn is "
        "not cache-only, so vLLM 0.33.0 keeps the draft's limit and Model Runner V2, the GPU default for every "
        "target (with Triton and no unsupported feature), lowers the target's max_model_len from 32768 to 2048 "
        "(VllmConfig._limit_max_model_len_to_draft)"
    )
    old = _one(draft, "0.32.0", "W310", serving_context=32768)
    assert old.impact == "computes-differently"  # raised, but YaRN's cache spans 2048 x 4 only
    assert old.message.endswith(
        "and yarn sizes its rotary cache from original_max_position_embeddings x factor (8192), so positions past "
        "8192 fall outside it (inferred; 0.33.0 stops raising such drafts)"
    )


def test_the_cap_uses_the_targets_context_without_max_model_len(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=set_config(**YARN))
    hit = _one(draft, "0.33.0", "W310", target=_target(tmp_path / "t"))
    assert hit.message.startswith(
        "max_position_embeddings is 2048 but the serving context is 32768 (the target's max_position_embeddings)"
    )
    assert "from 32768 to 2048" in hit.message


def test_default_rope_is_raised_and_served_as_trained_from_0_27(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d")
    for version in ("0.27.0", "0.32.0", "0.33.0"):
        hit = _one(draft, version, "W310", serving_context=32768)
        assert hit.impact == "hygiene"
        assert hit.message == (
            f"max_position_embeddings is 2048 but the serving context is 32768 (--max-model-len): vLLM {version} "
            "raises the draft's limit to the target's max_model_len (SpeculativeConfig._maybe_override_draft_"
            "max_position_embeddings) but the draft has not seen positions past its own; the raise only resizes "
            "the rotary cache, so it is served as trained"
        )
    old = _one(draft, "0.26.0", "W310", serving_context=32768)
    assert old.impact == "computes-differently"
    assert old.message.endswith(
        "vLLM 0.26.0 does not raise the draft's limit (from 0.27.0, vLLM #49343), so positions past 2048 crash "
        "under torch.compile or read garbage rotary entries in eager mode (vLLM #48894)"
    )


def test_a_yarn_cache_that_spans_the_context_is_hygiene_on_0_32(tmp_path: Path) -> None:
    rope = {"rope_scaling": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048}}
    draft = edit_draft(tmp_path / "d", config=set_config(**rope))
    assert _one(draft, "0.32.0", "W310", serving_context=32768).impact == "hygiene"
    assert _one(draft, "0.33.0", "W310", serving_context=32768).impact == "caps-context"


# ------------------------------------------------------------------ W323 / W326: Model Runner V2


def test_w323_names_the_ids_v2_will_tap(tmp_path: Path) -> None:
    def ids(cfg: dict) -> None:
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 2, 6]

    other = edit_draft(tmp_path / "o", "specforge-eagle3", config=ids)
    hit = _one(other, "0.32.0", "W323", target=_target(tmp_path / "t"))
    assert (hit.level, hit.impact) == ("warning", "computes-differently")
    assert hit.message == (
        "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.32.0's Model Runner V2, the GPU "
        "default for every target (with Triton and no unsupported feature), never reads them, so it taps "
        "(2, 4, 5) for this 8-layer target instead of [1, 2, 6] (SpecForge trained them on A(2, 3, 7))"
    )
    assert hit.fix == "Also write eagle_aux_hidden_state_layer_ids: [2, 3, 7] at the top level (SpecForge's [1, 2, 6])."
    draft = edit_draft(tmp_path / "d", "specforge-eagle3")  # ids (1, 3, 4) only in eagle_config
    # SpecForge trains eagle_config id k on the output of layer k, A(k + 1): V2's fallback is what was trained
    sglang = _one(draft, "0.32.0", "W323", target=_target(tmp_path / "t2"))
    assert sglang.impact == "hygiene" and sglang.message.endswith(
        "instead of [1, 3, 4] (the layers SpecForge trained these ids on: served as trained on V2; "
        "V1 reads them one lower, W603)"
    )
    formula = _one(draft, "0.28.0", "W323")
    assert formula.message == (
        "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.28.0's Model Runner V2, the GPU "
        "default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it "
        "taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))"
    )
    assert _hits(draft, "0.21.0", "W323") == []  # 0.21.0's V1 does not read eagle_config ids either: W320


def test_w323_is_hygiene_when_the_ids_are_the_default(tmp_path: Path) -> None:
    def ids(cfg: dict) -> None:
        cfg.pop("eagle_aux_hidden_state_layer_ids", None)
        cfg.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = [2, 4, 5]

    draft = edit_draft(tmp_path / "d", "vllm-eagle3", config=ids)  # no known producer: ids as written
    hit = _one(draft, "0.32.0", "W323", target=_target(tmp_path / "t"))
    assert hit.impact == "hygiene" and hit.message.endswith("instead of [2, 4, 5] (the same layers: served as trained)")
    # the same numbers from SpecForge are layer outputs, A(3, 5, 6): V2's default is not what was trained
    specforge = _one(
        edit_draft(tmp_path / "s", "specforge-eagle3", config=ids), "0.32.0", "W323", target=_target(tmp_path / "t2")
    )
    assert specforge.impact == "computes-differently"
    assert specforge.message.endswith("instead of [2, 4, 5] (SpecForge trained them on A(3, 5, 6))")


@pytest.mark.parametrize(
    ("config", "version", "ids", "where"),
    [
        ({"target_layer_ids": [0, 3, 5]}, "0.24.0", None, ""),
        ({"target_layer_ids": [0, 3, 5]}, "0.25.0", [1, 4, 6], "target_layer_ids"),
        ({"dflash_config": {"target_layer_ids": [1, 2]}}, "0.23.0", None, ""),
        ({"dflash_config": {"target_layer_ids": [1, 2]}}, "0.24.0", [2, 3], "dflash_config.target_layer_ids"),
        ({"eagle_config": {"layer_ids": [1, 2, 3]}}, "0.26.0", None, ""),
        ({"eagle_config": {"layer_ids": [1, 2, 3]}}, "0.27.0", [1, 2, 3], "eagle_config.layer_ids"),
    ],
)
def test_v2_aux_id_sources_per_release(config: dict, version: str, ids: list[int] | None, where: str) -> None:
    view = read_config({"architectures": ["LlamaForCausalLMEagle3"], **config}, release(version))
    assert (view.aux_ids_v2, view.aux_ids_v2_where) == (ids, where)


@pytest.mark.parametrize(
    ("config", "version", "ids"),
    [
        ({"dflash_config": {"target_layer_ids": [1, 2, 3]}}, "0.21.0", [1, 2, 3]),
        ({"dflash_config": {"target_layer_ids": [1, 2, 3]}}, "0.22.0", [2, 3, 4]),  # DFlash counts from 0
        # any non-empty eagle_config replaces them, even without ids of its own
        (
            {"dflash_config": {"target_layer_ids": [1, 2, 3]}, "eagle_config": {"use_aux_hidden_state": True}},
            "0.22.0",
            None,
        ),
        (
            {"dflash_config": {"target_layer_ids": [1, 2, 3]}, "eagle_config": {"use_aux_hidden_state": True}},
            "0.21.0",
            [1, 2, 3],
        ),
    ],
)
def test_v1_aux_id_sources_per_release(config: dict, version: str, ids: list[int] | None) -> None:
    view = read_config({"architectures": ["LlamaForCausalLMEagle3"], **config}, release(version))
    assert view.aux_ids_v1 == ids


def _no_aux(cfg: dict) -> None:
    cfg["eagle_config"]["use_aux_hidden_state"] = False


def test_v2_ignores_use_aux_hidden_state_false_before_0_33(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=_no_aux)
    hit = _one(draft, "0.32.0", "W326")
    assert (hit.level, hit.impact, hit.field) == ("warning", "fails-to-load", "eagle_config.use_aux_hidden_state")
    assert hit.message == (
        "eagle_config.use_aux_hidden_state is false: vLLM 0.32.0's Model Runner V2, the GPU default for every "
        "target (with Triton and no unsupported feature), ignores it and passes the draft the concatenated aux "
        "hidden states, which fail the draft's input width check (inferred: a crash at the first decode); V1 "
        "honours the flag, and V2 does from 0.33.0"
    )
    assert _hits(draft, "0.33.0", "W326") == []
    assert _hits(draft, "0.21.0", "W326") == []  # V1 is the default runner for every target there


# ------------------------------------------------------------------ W319: the 0.33 verifier rule


def _verifier(name: str) -> Callable[[dict], None]:
    def edit(cfg: dict) -> None:
        cfg["speculators_config"]["verifier"]["name_or_path"] = name

    return edit


def test_local_verifier_path_fails_vllm_serve_draft_on_0_33(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle3", config=_verifier("/models/llama-3.1-8b"))
    hit = _one(draft, "0.33.0", "W319")
    assert (hit.level, hit.impact, hit.field) == (
        "warning",
        "fails-to-load",
        "speculators_config.verifier.name_or_path",
    )
    assert hit.message == (
        "speculators_config.verifier.name_or_path '/models/llama-3.1-8b' is not a hub repo id: vLLM 0.33.0 "
        "raises `Speculators verifier must name a remote model repository` for `vllm serve DRAFT` "
        "(transformers_utils/config.py maybe_override_with_speculators); serving with --model TARGET "
        "--speculative-config '{\"model\": DRAFT, ...}' avoids it"
    )
    assert _hits(draft, "0.32.0", "W319") == []
    fixture = edit_draft(tmp_path / "f", "speculators-eagle3")  # a hub repo id
    assert _hits(fixture, "0.33.0", "W319") == []


def test_a_repo_id_that_exists_here_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle3", config=_verifier("models/llama"))
    (tmp_path / "models" / "llama").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert "'models/llama' exists as a local path" in _one(draft, "0.33.0", "W319").message


ARCH = ["LlamaForCausalLM"]  # the target's architectures, which speculators requires of a verifier


def _plan_speculators(draft: Path, target: Path):
    ckpt = open_checkpoint(draft)
    return plan_upgrade(ckpt, describe(ckpt, default_release()), layout="speculators", target=read_target(str(target)))


def test_upgrade_writes_the_repo_a_hf_cache_target_names(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle3")
    cached = _target(tmp_path / "hub" / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "abc123")
    plan = _plan_speculators(draft, cached)
    assert plan.config_after["speculators_config"]["verifier"] == {
        "name_or_path": "meta-llama/Llama-3.1-8B",
        "architectures": ARCH,
    }
    assert not any("verifier" in w for w in plan.warnings)


def test_upgrade_writes_the_targets_name_or_path_when_it_is_a_repo_id(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle3")
    plan = _plan_speculators(draft, _target(tmp_path / "local", _name_or_path="Qwen/Qwen3-8B"))
    assert plan.config_after["speculators_config"]["verifier"] == {
        "name_or_path": "Qwen/Qwen3-8B",
        "architectures": ARCH,
    }


def test_upgrade_warns_in_one_line_for_a_local_target(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle3")
    local = _target(tmp_path / "local", _name_or_path="/scratch/llama")
    plan = _plan_speculators(draft, local)
    assert plan.config_after["speculators_config"]["verifier"] == {"name_or_path": str(local), "architectures": ARCH}
    [warning] = [w for w in plan.warnings if "verifier" in w]
    assert warning == (
        f"speculators_config.verifier.name_or_path is the local path {str(local)!r}: vLLM 0.33 refuses "
        "`vllm serve DRAFT` for it; serve with --model TARGET --speculative-config '{\"model\": DRAFT, ...}' "
        "(or pass the target's hub repo id as --target)"
    )


# ------------------------------------------------------------------ W307: a producer that trains what vLLM assumes


def test_w307_is_hygiene_for_the_specforge_fixture(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "specforge-eagle3")
    hit = _one(draft, "0.32.0", "W307")
    assert (hit.level, hit.impact) == ("warning", "hygiene")
    assert hit.message == (
        "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes "
        "the opposite; SpecForge trains with false, so vLLM 0.32.0 serves it as trained"
    )
    safeailab = _one(edit_draft(tmp_path / "s", "safeailab-eagle3"), "0.32.0", "W307")
    assert safeailab.impact == "hygiene" and safeailab.message.endswith(
        "; SafeAILab EAGLE trains with false, so vLLM 0.32.0 serves it as trained"
    )
    speculators = _one(
        edit_draft(tmp_path / "p", "speculators-eagle3", config=pop_config("norm_before_residual")), "0.32.0", "W307"
    )
    assert (speculators.impact, speculators.fix) == (
        "computes-differently",
        "Write norm_before_residual: false (what vllm-project/speculators trains with).",
    )
    assert speculators.message == (
        "norm_before_residual is not written; vLLM assumes true (speculators path), and the other path assumes the "
        "opposite; vllm-project/speculators trains with false, so vLLM 0.32.0 serves it otherwise than trained"
    )
    unknown = _one(edit_draft(tmp_path / "v", config=pop_config("norm_before_residual")), "0.32.0", "W307")
    assert unknown.impact == "computes-differently"  # no producer known to train either value
    assert unknown.message == (
        "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes "
        "the opposite"
    )


# ------------------------------------------------------------------ the CLI


def test_validate_cli_names_the_release_window(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle31", config=pop_config("transformer_layer_config.norm_output"))
    runner = CliRunner()
    res = runner.invoke(main, ["validate", str(draft), "--vllm-version", "0.24.0", "--json"])
    assert res.exit_code == 1, res.output
    found = {f["code"]: f for f in json.loads(res.stdout)["findings"]}
    assert set(found) == {"E318", "W308"}
    assert (found["E318"]["impact"], found["W308"]["impact"]) == ("computes-differently", "hygiene")
    ok = runner.invoke(main, ["validate", str(draft), "--vllm-version", "0.25.0", "--json"])
    assert ok.exit_code == 0, ok.output
    assert [f["code"] for f in json.loads(ok.stdout)["findings"]] == ["W308"]


def test_upgrade_cli_warns_about_a_local_verifier(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle3")
    local = _target(tmp_path / "local")
    res = CliRunner().invoke(
        main,
        ["upgrade", str(draft), "--out", str(tmp_path / "out"), "--layout", "speculators", "--target", str(local)],
        env={"COLUMNS": "1000"},  # one console line per message
    )
    assert res.exit_code == 0, res.output
    assert (
        f"warning: speculators_config.verifier.name_or_path is the local path {str(local)!r}: vLLM 0.33 refuses "
        "`vllm serve DRAFT` for it; serve with --model TARGET --speculative-config '{\"model\": DRAFT, ...}' "
        "(or pass the target's hub repo id as --target)\n"
    ) in res.output
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["speculators_config"]["verifier"]["name_or_path"] == str(local)


def _fc_norm_in_eagle_config(cfg: dict) -> None:
    cfg["eagle_config"]["fc_norm"] = cfg.pop("fc_norm")


@pytest.mark.parametrize(
    ("fixture", "version", "impact", "effect"),
    [
        ("vllm-eagle31", "0.24.0", "fails-to-load", "fail the load (KeyError: 'fc_norm.0.weight')"),
        (
            "vllm-eagle31",
            "0.32.0",
            "fails-to-load",
            "fail the load (ValueError: There is no module or parameter named 'fc_norm')",
        ),
        ("kimi-mla-eagle31", "0.24.0", "computes-differently", "silently"),  # the MLA loader skips unknown names
    ],
)
def test_a_plain_flag_in_eagle_config_is_read_by_no_class(
    fixture: str, version: str, impact: str, effect: str, tmp_path: Path
) -> None:
    draft = edit_draft(tmp_path / "d", fixture, config=_fc_norm_in_eagle_config)
    hit = _one(draft, version, "E318")
    assert hit.impact == impact
    assert hit.message.startswith(
        f"fc_norm: true is written in eagle_config but vLLM {version} reads it at the top level: the draft class "
        "reads the top-level field only, so it builds no fc_norm and "
    )
    assert hit.message.endswith(effect)
