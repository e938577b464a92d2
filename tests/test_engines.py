"""The verdict per engine (`validate --for sglang|trtllm`): each row of the engines' index on a fixture
mutant, with that engine's answer and a neighbour engine's different one.

The rules are data in eagle_convert/engines/ (sglang.py: the sglang 0.5.23 wheel; trtllm.py: TensorRT-LLM
main, modeling_speculative.py, llm_args.py, speculative/eagle3.py), each citing file and function.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eagle_convert.engines import ENGINES, engine_status, ids_for, parse_for, taps
from eagle_convert.errors import UsageError
from eagle_convert.validate import validate_checkpoint, validate_for
from eagle_convert.validate.findings import Finding
from fixtures.edits import edit_draft

SG, TRT = "SGLang 0.5.23", "TensorRT-LLM main@00679c6"


def _target(out: Path, arch: str = "LlamaForCausalLM", layers: int = 8) -> Path:
    cfg = {
        "architectures": [arch],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": 256,
        "num_hidden_layers": layers,
        "max_position_embeddings": 32768,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _found(draft: Path, engine: str, target: Path | None = None) -> list[Finding]:
    return validate_for(draft, engine_status(engine), target=target).findings


def _codes(draft: Path, engine: str, target: Path | None = None) -> list[str]:
    return sorted(f.code for f in _found(draft, engine, target))


def _one(draft: Path, engine: str, code: str, target: Path | None = None) -> Finding:
    hits = [f for f in _found(draft, engine, target) if f.code == code]
    assert len(hits) == 1, [f"{f.code}: {f.message}" for f in _found(draft, engine, target)]
    return hits[0]


def _set(**kw: Any):
    return lambda c: c.update(kw)


def _nested(ids: list[int] | None):
    def edit(c: dict) -> None:
        if ids is None:
            c["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)
        else:
            c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids

    return edit


# ------------------------------------------------------------------ aux ids: place and offset


def test_mirrored_ids_tap_one_layer_too_deep_in_sglang_only(tmp_path: Path) -> None:
    """W320's old advice (mirror the top-level ids into eagle_config): SGLang adds 1 to them."""
    draft = edit_draft(tmp_path / "d")  # top-level and eagle_config ids [2, 4, 5]
    hit = _one(draft, "sglang", "E335")
    assert (hit.level, hit.impact, hit.field) == (
        "error",
        "computes-differently",
        "eagle_config.eagle_aux_hidden_state_layer_ids",
    )
    assert hit.message == (
        f"{SG} reads eagle_config.eagle_aux_hidden_state_layer_ids [2, 4, 5] and taps A(3, 5, 6) (models/llama.py "
        "LlamaForCausalLM.set_eagle3_layers_to_capture: id + 1, captured at the input of that layer), but the draft "
        "was trained on A(2, 4, 5) (eagle_aux_hidden_state_layer_ids [2, 4, 5]); write "
        "eagle_config.eagle_aux_hidden_state_layer_ids: [1, 3, 4]"
    )
    assert hit.fix == f"For {SG}: write eagle_config.eagle_aux_hidden_state_layer_ids: [1, 3, 4]."
    # the fix applied: SGLang serves it as trained; vLLM reads only the top-level list, unchanged
    fixed = edit_draft(tmp_path / "f", config=_nested([1, 3, 4]))
    assert _codes(fixed, "sglang") == []
    assert [f for f in validate_checkpoint(fixed, vllm_version="0.34.0").findings if f.level != "info"] == []
    # the neighbour: TensorRT-LLM reads neither list, the serving config must name the layers
    trt = _one(fixed, "trtllm", "W334")
    assert trt.message.endswith(
        "without eagle3_layers_to_capture it taps {1, N//2-1, N-4}, each the output of that layer, but the draft was "
        "trained on A(2, 4, 5) (eagle_aux_hidden_state_layer_ids [2, 4, 5]): set eagle3_layers_to_capture: {1, 3, 4} "
        "in the serving config"
    )
    assert trt.message.startswith(f"{TRT} reads no aux ids from the draft (llmapi/llm_args.py @ 000439672005 ")


def test_top_level_ids_only_sglang_taps_its_defaults(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=_nested(None))
    hit = _one(draft, "sglang", "W334")
    assert (hit.level, hit.impact) == ("warning", "computes-differently")
    assert (
        "which this draft does not write: it taps [2, N//2, N-3] captured at the input of those layers" in hit.message
    )
    assert hit.fix == f"For {SG}: write eagle_config.eagle_aux_hidden_state_layer_ids: [1, 3, 4]."
    # with the target's depth the defaults are known: A(2, 4, 5) for 8 layers is exactly the trained set
    default_like = edit_draft(tmp_path / "e", config=_nested(None))
    tgt = _target(tmp_path / "t", layers=10)  # defaults A(2, 5, 7) differ from A(2, 4, 5)
    assert _codes(default_like, "sglang", tgt) == ["W334"]
    tgt8 = _target(tmp_path / "t8", layers=8)  # defaults (2, 4, 5): the trained taps
    assert _codes(default_like, "sglang", tgt8) == []
    assert _codes(default_like, "trtllm", tgt8) == []


def test_no_ids_anywhere_every_engine_taps_the_same_defaults(tmp_path: Path) -> None:
    def strip(c: dict) -> None:
        c.pop("eagle_aux_hidden_state_layer_ids")
        c["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")

    draft = edit_draft(tmp_path / "d", config=strip)
    assert _codes(draft, "sglang") == _codes(draft, "trtllm") == []


def test_deepseek_target_first_id_rule(tmp_path: Path) -> None:
    """SGLang's deepseek_v2 targets add 1 only when the first id is 1: the mirrored ids are right there
    when they start at 2, one too deep on a Llama target."""
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c.update(eagle_aux_hidden_state_layer_ids=[3, 5, 6]), _nested([3, 5, 6])(c))
    )
    ds = _target(tmp_path / "ds", "DeepseekV3ForCausalLM")
    llama = _target(tmp_path / "ll")
    assert _codes(draft, "sglang", ds) == []
    hit = _one(draft, "sglang", "E335", llama)
    assert hit.fix == f"For {SG}: write eagle_config.eagle_aux_hidden_state_layer_ids: [2, 4, 5]."
    # [2, 4, 5] on the DeepSeek target would be taken as-is: A(2, 4, 5), not the trained A(3, 5, 6)
    assert taps([2, 4, 5], "first-id", 8) == (2, 4, 5)
    assert ids_for((3, 5, 6), "first-id", 8) == [3, 5, 6]
    assert ids_for((1, 4, 5), "first-id", 8) is None  # A(1) first: no list makes the rule tap it


def test_gpt_oss_target_max_id_rule(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c.update(eagle_aux_hidden_state_layer_ids=[2, 4, 8]), _nested([2, 4, 8])(c))
    )
    oss = _target(tmp_path / "oss", "GptOssForCausalLM")
    assert _codes(draft, "sglang", oss) == []  # max(ids) == N: kept as written
    hit = _one(draft, "sglang", "E335", _target(tmp_path / "ll"))
    assert "taps A(3, 5, 9)" in hit.message and hit.fix.endswith("[1, 3, 7].")


def test_eagle_config_only_ids_are_sglang_native(tmp_path: Path) -> None:
    """kimi-mla: ids only in eagle_config (SGLang's place, its convention); TRT-LLM needs them in the serving config."""
    draft = edit_draft(tmp_path / "d", "kimi-mla-eagle3")
    ds = _target(tmp_path / "ds", "DeepseekV3ForCausalLM", layers=10)  # defaults A(2, 5, 7)
    assert _codes(draft, "sglang", ds) == []
    hit = _one(draft, "trtllm", "W334", ds)
    assert (
        "trained on A(2, 4, 5) (eagle_config.eagle_aux_hidden_state_layer_ids [2, 4, 5], SGLang's convention)"
        in hit.message
    )
    assert hit.fix == f"For {TRT}: set eagle3_layers_to_capture: {{1, 3, 4}} in the serving config."


def test_trtllm_sorts_the_capture_layers(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c.update(eagle_aux_hidden_state_layer_ids=[5, 2, 4]), _nested([4, 1, 3])(c))
    )
    hit = _one(draft, "trtllm", "E336")
    assert hit.message.startswith(f"{TRT} sorts the capture layers (_torch/speculative/eagle3.py @ 001e67005b4f ")
    assert _codes(draft, "sglang") == []  # SGLang keeps the written order


def test_sglang_fc_width_from_eagle_config_ids(tmp_path: Path) -> None:
    """4 aux states: SGLang's Llama class sizes fc from num_aux_hidden_states or the eagle_config ids (as
    vLLM's does); with neither it builds a 3-wide fc."""

    def edit(c: dict) -> None:
        c.pop("num_aux_hidden_states")
        c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 3]  # 3 ids: a 3-wide fc in SGLang

    draft = edit_draft(tmp_path / "d", "vllm-eagle3-a4", config=edit)
    hit = _one(draft, "sglang", "E202")
    assert hit.message.startswith(f"{SG} sizes fc for 3 aux hidden states (models/llama_eagle3.py LlamaModel.__init__")
    assert hit.message.endswith("fc.weight holds 4: the load fails on its shape")
    assert hit.impact == "fails-to-load"
    assert "E202" not in _codes(draft, "trtllm")  # fc sized from eagle3_layers_to_capture there
    ok = edit_draft(tmp_path / "ok", "vllm-eagle3-a4", config=_nested([0, 2, 3, 5]))
    assert "E202" not in _codes(ok, "sglang")


# ------------------------------------------------------------------ norm flags


def test_use_aux_norm_read_by_sglang_not_trtllm(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d",
        "vllm-eagle31",
        config=lambda c: (c.pop("fc_norm"), c.update(use_aux_norm=True), _nested([1, 3, 4])(c)),
    )
    assert "E318" not in _codes(draft, "sglang")
    hit = _one(draft, "trtllm", "E318")
    assert (hit.field, hit.impact) == ("use_aux_norm", "computes-differently")
    assert hit.message.startswith(f"use_aux_norm is on but {TRT} reads only fc_norm (")


def test_return_hidden_post_norm_read_by_trtllm_only(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c["eagle_config"].update(return_hidden_post_norm=True), _nested([1, 3, 4])(c))
    )
    hit = _one(draft, "trtllm", "E333")
    assert hit.message.startswith(
        f"{TRT} feeds back the post-norm state (it reads norm_output or eagle_config.return_hidden_post_norm"
    )
    assert _codes(draft, "sglang") == []


def test_top_level_norm_before_fc_ignored_by_trtllm(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=lambda c: (c.update(norm_before_fc=True), _nested([1, 3, 4])(c)))
    hit = _one(draft, "trtllm", "E318")
    assert hit.message.startswith(
        f"norm_before_fc is on but {TRT} never applies it: it reads only eagle_config.norm_before_fc"
    )
    assert hit.fix == f"Write eagle_config.norm_before_fc: true for {TRT}."
    assert _codes(draft, "sglang") == []
    inside = edit_draft(
        tmp_path / "e", config=lambda c: (c["eagle_config"].update(norm_before_fc=True), _nested([1, 3, 4])(c))
    )
    assert "E318" not in _codes(inside, "trtllm")


def test_fc_norm_and_norm_before_fc_trtllm_applies_only_fc_norm(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d",
        "vllm-eagle31",
        config=lambda c: (c["eagle_config"].update(norm_before_fc=True), _nested([1, 3, 4])(c)),
    )
    hit = _one(draft, "trtllm", "E333")
    assert hit.message.startswith(f"fc_norm and norm_before_fc are both on: {TRT} applies only fc_norm")
    assert "E333" not in _codes(draft, "sglang")


def test_mla_draft_norm_before_fc_read_by_trtllm_only(tmp_path: Path) -> None:
    """Source over notes: SGLang's Eagle3MLAModel (kimi_k25_eagle3.py) has no input_norm, as vLLM's MLA class;
    TRT-LLM's one Eagle3DraftModel reads eagle_config.norm_before_fc for MLA drafts too."""
    draft = edit_draft(
        tmp_path / "d", "kimi-mla-eagle3", config=lambda c: c["eagle_config"].update(norm_before_fc=True)
    )
    assert "E333" not in _codes(draft, "sglang") and "E318" not in _codes(draft, "sglang")
    hit = _one(draft, "trtllm", "E333")
    assert hit.message.startswith(f"{TRT} applies norm_before_fc (it reads eagle_config.norm_before_fc")
    assert hit.message.endswith(
        "which the draft as trained does not (vLLM's Eagle3DeepseekV2ForCausalLM reads none here)"
    )


def test_norm_before_residual_only_vllm_honours(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=lambda c: (c.update(norm_before_residual=True), _nested([1, 3, 4])(c)))
    for engine, label in (("sglang", SG), ("trtllm", TRT)):
        hit = _one(draft, engine, "E332")
        assert (hit.level, hit.impact) == ("error", "computes-differently")
        assert f"but {label} always feeds the first layer's residual from the pre-norm state" in hit.message
    assert not [f for f in validate_checkpoint(draft, vllm_version="0.34.0").findings if f.level == "error"]


# ------------------------------------------------------------------ names, format, vocabulary, window


def test_architecture_names(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c.update(architectures=["Eagle3LlamaForCausalLM"]), _nested([1, 3, 4])(c))
    )
    hit = _one(draft, "sglang", "E330")
    assert hit.message.startswith(
        f"architectures[0] 'Eagle3LlamaForCausalLM': {SG} falls back to TransformersForCausalLM, not an EAGLE-3 draft"
    )
    assert hit.fix == f"Write architectures: ['LlamaForCausalLMEagle3'] for {SG}."
    assert "E330" not in _codes(draft, "trtllm")  # the name is ignored there
    target_name = edit_draft(
        tmp_path / "t", config=lambda c: (c.update(architectures=["LlamaForCausalLM"]), _nested([1, 3, 4])(c))
    )
    assert _one(target_name, "sglang", "E330").message.startswith(
        f"architectures[0] 'LlamaForCausalLM': {SG} builds the model it registers under that name (else "
        "TransformersForCausalLM), not an EAGLE-3 draft"
    )


def test_mla_draft_needs_the_mla_name_in_sglang(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "kimi-mla-eagle3", config=_set(architectures=["LlamaForCausalLMEagle3"]))
    hit = _one(draft, "sglang", "E330")
    assert "builds LlamaForCausalLMEagle3" in hit.message and "needs 'Eagle3DeepseekV2ForCausalLM'" in hit.message


def test_qwen3_draft(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-qwen3-eagle3", config=_nested([1, 3, 4]))
    assert "E330" in _codes(draft, "sglang")
    hit = _one(draft, "trtllm", "E306")
    assert hit.message.endswith("this Qwen3-architecture draft's q/k norms are never applied")


def test_speculators_format(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "speculators-eagle3")
    assert _codes(draft, "sglang") == ["E331"]
    assert _codes(draft, "trtllm") == ["E331"]
    assert not [f for f in validate_checkpoint(draft, vllm_version="0.34.0").findings if f.level == "error"]


def test_d2t_without_draft_vocab_size(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=lambda c: (c.pop("draft_vocab_size"), _nested([1, 3, 4])(c)))
    hit = _one(draft, "trtllm", "E411")
    assert hit.message.startswith(f"the draft ships d2t but config.json has no draft_vocab_size: {TRT} builds no d2t")
    assert "E411" not in _codes(draft, "sglang")


def test_draft_sliding_window(tmp_path: Path) -> None:
    draft = edit_draft(
        tmp_path / "d", config=lambda c: (c.update(sliding_window=2048, use_sliding_window=True), _nested([1, 3, 4])(c))
    )
    sg = _one(draft, "sglang", "W337")
    assert sg.fix == f"For {SG}: pass --speculative-draft-window-size 2048 to the server."
    trt = _one(draft, "trtllm", "W337")
    assert trt.fix == f"For {TRT}: it has no draft sliding window."
    mla = edit_draft(tmp_path / "m", "kimi-mla-eagle3", config=_set(sliding_window=2048))
    assert _one(mla, "sglang", "W337").fix == f"For {SG}: its MLA draft ignores --speculative-draft-window-size."


# ------------------------------------------------------------------ releases


def test_unknown_release_is_unverified_never_a_pass(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=_nested([1, 3, 4]))
    st = engine_status("sglang", "0.6.0")
    assert (st.release, st.outside, st.verified) == ("0.5.23", True, False)
    report = validate_for(draft, st)
    [hit] = report.findings
    assert (hit.code, hit.level, hit.impact) == ("E707", "error", "unverified")
    assert hit.message == (
        "SGLang 0.6.0 is not a release eagle-convert has read (known: 0.5.23): this verdict used SGLang 0.5.23's "
        "rules and is unverified"
    )
    assert report.failed()


def test_parse_for() -> None:
    assert [(s.engine, s.release) for s in parse_for(["sglang", "trtllm==main@00679c6", "vllm==0.33.0"])] == [
        ("sglang", "0.5.23"),
        ("trtllm", "main@00679c6"),
        ("vllm", "0.33.0"),
    ]
    every = parse_for(["all"])
    assert [s.engine for s in every].count("vllm") == len(ENGINES["vllm"].releases)
    assert {s.engine for s in every} == {"vllm", "sglang", "trtllm"}
    with pytest.raises(UsageError, match=r"unknown engine 'tgi'"):
        parse_for(["tgi"])
    with pytest.raises(UsageError, match="no version after '=='"):
        parse_for(["sglang=="])


def test_installed_version_is_read_without_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    seen: list[str] = []

    def version(dist: str) -> str:
        seen.append(dist)
        if dist == "sglang":
            return "0.5.23"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(metadata, "version", version)
    st = engine_status("sglang")
    assert (st.release, st.installed, st.why, st.outside) == ("0.5.23", "0.5.23", "the installed SGLang", False)
    assert engine_status("trtllm").why == "TensorRT-LLM is not installed: the newest known release"
    assert "sglang" in seen and "tensorrt_llm" in seen


# ------------------------------------------------------------------ the installed engine's deciding code


_FAKE = {
    "srt/models/llama.py": "class LlamaForCausalLM:\n    def set_eagle3_layers_to_capture(self, ids):\n"
    "        self.layers = [i + 1 for i in ids]\n\n\nclass LlamaModel:\n    def forward(self):\n        return 1\n",
}


def _fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, body: dict[str, str]) -> None:
    """An 'installed' SGLang `version` whose package holds `body`, and fingerprints read from `_FAKE` as 0.5.23."""
    from importlib import metadata

    from eagle_convert import extras
    from eagle_convert.engines import fingerprints

    def tree(root: Path, files: dict[str, str]) -> Path:
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    deciding = {"srt/models/llama.py": ("LlamaForCausalLM.set_eagle3_layers_to_capture", "LlamaModel.forward")}
    data = {
        "format": 1,
        "engines": {
            "sglang": {"0.5.23": {"units": fingerprints.fingerprint(tree(tmp_path / "wheel", _FAKE), deciding)}}
        },
    }
    monkeypatch.setattr(fingerprints, "fingerprint_data", lambda: data)
    monkeypatch.setattr(extras, "package_dir", lambda module: tree(tmp_path / "site" / module, body))
    monkeypatch.setitem(ENGINES, "sglang", replace(ENGINES["sglang"], deciding=deciding))
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda d: version if d == "sglang" else real(d))


def test_installed_release_with_its_wheel_code_is_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_engine(tmp_path, monkeypatch, "0.5.23", _FAKE)
    st = engine_status("sglang")
    assert (st.release, st.verified, st.warning()) == ("0.5.23", True, None)


def test_installed_release_with_other_code_is_unverified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    patched = {"srt/models/llama.py": _FAKE["srt/models/llama.py"].replace("i + 1", "i")}  # a fork without the +1
    _fake_engine(tmp_path, monkeypatch, "0.5.23", patched)
    st = engine_status("sglang")
    assert (st.release, st.verified) == ("0.5.23", False)
    assert st.warning() == (
        "the installed SGLang 0.5.23's deciding code differs from its wheel's: "
        "srt/models/llama.py::LlamaForCausalLM.set_eagle3_layers_to_capture changed: this verdict used SGLang "
        "0.5.23's rules and is unverified"
    )


def test_unread_version_with_a_known_release_code_borrows_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_engine(tmp_path, monkeypatch, "0.5.24", _FAKE)
    st = engine_status("sglang")
    assert (st.release, st.verified, st.warning()) == ("0.5.23", True, None)
    assert st.line() == (
        "SGLang 0.5.23 (the installed SGLang; SGLang 0.5.24 is not a release eagle-convert has read, but its "
        "deciding code matches 0.5.23's fingerprints)"
    )
    named = engine_status("sglang", "0.5.24")  # named, not installed: no code to compare, unverified
    assert named.verified is False


def test_shipped_fingerprints_cover_every_deciding_unit() -> None:
    from eagle_convert.engines import fingerprints

    data = fingerprints.fingerprint_data()["engines"]
    assert set(data["sglang"]) == set(ENGINES["sglang"].releases)
    for units in data["sglang"].values():
        for rel, names in ENGINES["sglang"].deciding.items():
            assert units["units"][rel], rel
            if names != ("*",):
                assert set(units["units"][rel]) == set(names), rel
    assert "trtllm" not in data  # no wheel of main@00679c6: an installed TensorRT-LLM is always unverified
