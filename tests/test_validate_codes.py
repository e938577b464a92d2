"""One test per finding code: a fixture broken in exactly that way must produce that code.

Each case starts from a FIXTURE_MATRIX draft, changes one thing (a tensor, a config field, the
folder layout) and validates. `test_every_code_has_a_case` keeps this table in step with
schemas/findings.json; the vLLM engine codes also have real-vLLM tests in test_validate_vllm.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from eagle_convert.validate.findings import code_table
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import default_release
from fixtures.drafts import FIXTURE_MATRIX, DraftSpec, build_draft
from fixtures.edits import drop_tensors, edit_draft, nan_tensor, pop_config, put_tensor, set_config
from fixtures.producer_bugs import TWINS

State = dict[str, torch.Tensor]


def target_config(out: Path, **fields: Any) -> Path:
    """A folder holding only a target config.json (all --target reads), matching vllm-eagle3 by default."""
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": 256,
        "num_hidden_layers": 8,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
    } | fields
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _ids(top: list | None, nested: list | None = None) -> Callable[[dict], None]:
    def edit(cfg: dict) -> None:
        cfg.pop("eagle_aux_hidden_state_layer_ids", None)
        cfg.setdefault("eagle_config", {}).pop("eagle_aux_hidden_state_layer_ids", None)
        if top is not None:
            cfg["eagle_aux_hidden_state_layer_ids"] = top
        if nested is not None:
            cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = nested

    return edit


def _verifier(name: str) -> Callable[[dict], None]:
    def edit(cfg: dict) -> None:
        cfg["speculators_config"]["verifier"]["name_or_path"] = name

    return edit


def _no_aux(cfg: dict) -> None:
    cfg["eagle_config"]["use_aux_hidden_state"] = False


def _d2t_swap(s: State) -> None:
    t = s["d2t"] + torch.arange(len(s["d2t"]))
    t[[10, 11]] = t[[11, 10]]
    s["d2t"] = t - torch.arange(len(t))


def _d2t_collide(s: State) -> None:
    s["d2t"][11] = s["d2t"][10] - 1  # 11 + d2t[11] == 10 + d2t[10]


def _t2d_extra(s: State) -> None:
    first_unset = int((~s["t2d"]).nonzero()[0])
    s["t2d"][first_unset] = True


def _scaled(name: str, factor: float) -> Callable[[State], None]:
    return put_tensor(name, lambda s: (s[name].float() * factor).to(s[name].dtype))


def _ones_fc_norm(s: State) -> None:
    for i in range(3):
        s[f"fc_norm.{i}.weight"] = torch.ones_like(s[f"fc_norm.{i}.weight"])


def _subfolder(out: Path) -> Path:
    build_draft(out, FIXTURE_MATRIX["vllm-eagle3"])
    (out / "model").mkdir()
    shutil.move(out / "model.safetensors", out / "model" / "model.safetensors")
    return out


def _serve(**keys: Any) -> dict[str, Any]:
    """A speculative config that builds the EAGLE-3 drafter at k = 3, with `keys` on top."""
    return {"method": "eagle3", "num_speculative_tokens": 3, **keys}


@dataclass
class Case:
    """How to break a draft for one code: build it under tmp, then validate with `kwargs`."""

    build: Callable[[Path], Path]
    kwargs: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] | None = None  # target config.json fields (a folder is written)
    target_build: Callable[[Path, Path], Path] | None = None  # (out, draft) -> a target folder with weights


def edit(spec: DraftSpec | str = "vllm-eagle3", **kw: Any) -> Callable[[Path], Path]:
    return lambda out: edit_draft(out, spec, **kw)


BASE = FIXTURE_MATRIX["vllm-eagle3"]
CASES: dict[str, Case] = {
    "E001": Case(edit(tensors=lambda s: (s.clear(), s.update(foo=torch.ones(4, dtype=torch.bfloat16))))),
    "E002": Case(lambda out: (build_draft(out, BASE), (out / "config.json").unlink(), out)[-1]),
    "E003": Case(_subfolder),
    "E101": Case(edit(tensors=drop_tensors("layers.0.mlp.down_proj.weight"))),
    "E102": Case(
        edit(tensors=put_tensor("layers.0.self_attn.extra.weight", lambda s: torch.ones(4, dtype=torch.bfloat16)))
    ),
    "E103": Case(edit("nemo-eagle3")),
    "E104": Case(edit("vllm-eagle31", config=set_config(fc_norm=False))),
    "E105": Case(edit("legacy-aux-norm-eagle31")),
    "E106": Case(edit(replace(BASE, target_hidden=96))),
    "W107": Case(
        edit(tensors=put_tensor("layers.0.self_attn.o_proj.bias", lambda s: torch.zeros(64, dtype=torch.bfloat16)))
    ),
    "E108": Case(edit("kimi-mla-eagle31"), kwargs={"vllm_version": "0.22.1"}),  # per release: test_release_windows_load
    "E201": Case(edit(config=set_config(intermediate_size=100))),
    "E202": Case(
        edit(
            "vllm-eagle3-a4",
            config=pop_config("num_aux_hidden_states", "eagle_config.eagle_aux_hidden_state_layer_ids"),
        )
    ),
    "E203": Case(edit(tensors=put_tensor("fc.weight", lambda s: torch.ones(64, 192, dtype=torch.int64)))),
    "W204": Case(edit("vllm-eagle31-sharded-fp32")),
    "E301": Case(edit(config=set_config(architectures=["LlamaEagle3DraftModel"]))),
    "E302": Case(edit("kimi-mla-eagle3", config=set_config(model_type="deepseek_v3"))),
    "E303": Case(edit(config=set_config(hidden_act="gelu"))),
    "E304": Case(edit(config=pop_config("intermediate_size"))),
    "E305": Case(edit("vllm-norm-before-fc", config=set_config(fc_norm=True))),
    "E306": Case(edit("kimi-mla-eagle3", config=set_config(norm_before_fc=True))),
    "W307": Case(edit(config=pop_config("norm_before_residual"))),
    "W308": Case(edit("speculators-eagle31", config=pop_config("transformer_layer_config.fc_norm"))),
    "W309": Case(edit("vllm-eagle31", config=set_config(use_aux_norm=True))),
    "W310": Case(edit(), kwargs={"serving_context": 8192}),
    "W311": Case(
        edit(
            config=set_config(quantization_config={"quant_method": "fp8"}),
            tensors=put_tensor("layers.0.mlp.down_proj.weight_scale", lambda s: torch.ones(1)),
        )
    ),
    "E318": Case(edit("speculators-eagle31", config=pop_config("norm_output")), kwargs={"vllm_version": "0.32.0"}),
    "W319": Case(edit("speculators-eagle3", config=_verifier("/models/llama")), kwargs={"vllm_version": "0.33.0"}),
    "W320": Case(edit(config=_ids(None))),
    "E321": Case(edit(config=_ids([2, 2, 5], [2, 2, 5]))),
    "E322": Case(edit(config=_ids([2, 4, 9], [2, 4, 9])), target={}),
    "W323": Case(edit(config=_ids(None, [2, 4, 5]))),
    "W324": Case(edit(config=_ids([2, 4, 5], [2, 4, 6]))),  # [1, 3, 4] is SGLang's id - 1: no W324
    "I325": Case(edit("vllm-eagle3-a4")),
    "W326": Case(edit(config=_no_aux), kwargs={"vllm_version": "0.32.0"}),
    "E401": Case(edit(tensors=drop_tensors("d2t"))),
    "E402": Case(edit(tensors=drop_tensors("lm_head.weight"))),
    "E403": Case(edit("vllm-eagle3-full", tensors=put_tensor("d2t", lambda s: torch.zeros(256, dtype=torch.int64)))),
    "W410": Case(
        edit("vllm-eagle3-full", tensors=put_tensor("d2t", lambda s: torch.zeros(256, dtype=torch.int64))),
        kwargs={"vllm_version": "0.29.0"},
    ),
    "E404": Case(edit(tensors=put_tensor("d2t", lambda s: torch.cat([s["d2t"][:-1], torch.tensor([10_000])])))),
    "E405": Case(edit(tensors=_d2t_collide)),
    "W406": Case(edit(tensors=_d2t_swap)),
    "E407": Case(edit(tensors=_t2d_extra)),
    "E501": Case(edit(), target={"vocab_size": 512}),
    "E502": Case(edit(), target={"hidden_size": 128}),
    "E503": Case(edit(config=_ids(None)), target={"num_hidden_layers": 4}),
    "W504": Case(edit(), target={"rope_theta": 500000.0}),
    "W601": Case(edit("specforge-eagle31")),
    "W603": Case(edit("specforge-eagle3"), target={}),
    "W602": Case(lambda out: build_draft(out.parent / "nemo-llama-eagle3_1-recipe", FIXTURE_MATRIX["nemo-eagle3"])),
    "W604": Case(edit("vllm-eagle31", tensors=_ones_fc_norm)),  # tests/test_untrained_fc_norm.py: each record
    "E801": Case(edit(tensors=nan_tensor("layers.0.mlp.up_proj.weight")), kwargs={"deep": True}),
    "E802": Case(
        edit(tensors=put_tensor("fc.weight", lambda s: torch.zeros_like(s["fc.weight"]))), kwargs={"deep": True}
    ),
    "W803": Case(edit(tensors=_scaled("norm.weight", 1000.0)), kwargs={"deep": True}),
    "I804": Case(
        edit(
            "vllm-eagle31",
            tensors=_ones_fc_norm,
        ),
        kwargs={"deep": True},
    ),
    "W805": Case(
        edit(tensors=put_tensor("fc.weight", lambda s: torch.full_like(s["fc.weight"], 1e5))), kwargs={"deep": True}
    ),
    # the deployment's serve config (tests/test_serve_config.py has the messages)
    "E901": Case(edit(), kwargs={"speculative_config": {"method": "eagle", "num_speculative_tokens": 3}}),
    "E902": Case(edit(), kwargs={"speculative_config": {"method": "eagle3"}}),
    "W903": Case(edit("speculators-eagle3"), kwargs={"speculative_config": _serve(num_speculative_tokens=5)}),
    "E904": Case(
        edit(),
        kwargs={"speculative_config": _serve(rejection_sample_method="synthetic"), "identity_required": True},
    ),
    "W905": Case(
        edit(), kwargs={"speculative_config": _serve(rejection_sample_method="fly"), "vllm_version": "0.33.0"}
    ),
    "E906": Case(
        edit(), kwargs={"speculative_config": _serve(draft_lm_head_quantization="fp8"), "vllm_version": "0.33.0"}
    ),
    "E907": Case(
        edit(config=set_config(quantization_config={"quant_method": "compressed-tensors"})),
        kwargs={"speculative_config": _serve(quantization="fp8")},
    ),
    "W908": Case(edit(), kwargs={"speculative_config": _serve(quantization="fp8")}),
    "W909": Case(
        edit(tensors=put_tensor("mask_hidden", lambda s: torch.zeros(1, 192, dtype=torch.bfloat16))),
        kwargs={"speculative_config": _serve()},
    ),
    "E910": Case(edit(), kwargs={"speculative_config": _serve(parallel_drafting=True)}),
}
# The issue-10 producer bugs: the failing half of each twin (tests/test_validate_producer_bugs.py runs both).
CASES |= {code: Case(bad.draft, bad.kwargs, target_build=bad.target) for code, (bad, _good) in TWINS.items()}
ENGINE_CODES = {"E701", "E702", "E703"}  # fed from the vLLM check: unit-tested below, real vLLM in test_validate_vllm
MATRIX_CODES = {"E911"}  # a release that refuses the serve config: a matrix row, tests/test_serve_config.py
VERSION_CODES = {
    "E705",
    "E706",
}  # the installed or named vLLM, not the draft: tests/test_fingerprints.py (E705), tests/test_vllm_versions.py (E706)


# The verdict for engines other than vLLM (validate --for sglang|trtllm): tests/test_engines.py, test_engines_sharing.py
OTHER_ENGINE_CODES = {"E330", "E331", "E332", "E333", "W334", "E335", "E336", "W337", "W338", "E339", "E411", "E707"}
# A given SGLang / TensorRT-LLM serve config (--serve-config): tests/test_engines_serve_config.py
OTHER_ENGINE_CODES |= {"E912", "E913", "W914", "E915", "E916", "W917"}


def test_every_code_has_a_case() -> None:
    assert set(code_table()) == set(CASES) | ENGINE_CODES | VERSION_CODES | MATRIX_CODES | OTHER_ENGINE_CODES


@pytest.mark.parametrize("code", sorted(CASES))
def test_code(code: str, tmp_path: Path) -> None:
    case = CASES[code]
    draft = case.build(tmp_path / "draft")
    kwargs = dict(case.kwargs)
    if case.target is not None:
        kwargs["target"] = target_config(tmp_path / "target", **case.target)
    if case.target_build is not None:
        kwargs["target"] = case.target_build(tmp_path / "target", draft)
    report = validate_checkpoint(draft, **kwargs)
    assert code in report.codes(), [f"{f.code}: {f.message}" for f in report.findings]
    hit = next(f for f in report.findings if f.code == code)
    assert hit.level == code_table()[code].level and hit.slug == code_table()[code].slug
    assert hit.message and hit.fix


def test_missing_tensor_names_the_tensor(tmp_path: Path) -> None:
    report = validate_checkpoint(CASES["E101"].build(tmp_path / "d"))
    [hit] = [f for f in report.findings if f.code == "E101"]
    assert hit.tensor == "layers.0.mlp.down_proj.weight"
    assert hit.message == (
        "layers.0.mlp.down_proj.weight is missing: vLLM keeps uninitialised memory and loads without an error"
    )


def test_fc_norm_flag_without_tensors_is_missing_tensor(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=drop_tensors(*(f"fc_norm.{i}.weight" for i in range(3))))
    hits = [f for f in validate_checkpoint(draft).findings if f.code == "E101"]
    assert sorted(f.tensor for f in hits) == [f"fc_norm.{i}.weight" for i in range(3)]
    assert "keeps weight 1.0" in hits[0].message and "fc_norm is on: fc_norm" in hits[0].message


def test_empty_t2d_is_e407_naming_draft_id_0(tmp_path: Path) -> None:
    """A t2d of shape [0] leaves every d2t target unset (the numpy version raised IndexError here)."""
    draft = edit_draft(
        tmp_path / "d", "vllm-eagle3", tensors=put_tensor("t2d", lambda s: torch.zeros(0, dtype=torch.bool))
    )
    [hit] = [f for f in validate_checkpoint(draft).findings if f.code == "E407"]
    assert (
        "length 0 != vocab_size" in hit.message and "d2t targets not set in t2d (first: draft id 0 -> " in hit.message
    )


def test_d2t_target_ids_wrap_to_int64_as_vllm_adds_them(tmp_path: Path) -> None:
    """vLLM adds i + d2t[i] in int64: 1 + (2**63 - 1) wraps to -2**63, out of range (E404)."""
    top = put_tensor("d2t", lambda s: torch.cat([s["d2t"][:1], torch.tensor([2**63 - 1]), s["d2t"][2:]]))
    report = validate_checkpoint(edit_draft(tmp_path / "d", "vllm-eagle3", tensors=top))
    [hit] = [f for f in report.findings if f.code == "E404"]
    assert f"(first: draft id 1 -> target id {-(2**63)})" in hit.message


def test_aux_id_beyond_target_layers_only_with_target(tmp_path: Path) -> None:
    draft = CASES["E322"].build(tmp_path / "d")
    assert "E322" not in validate_checkpoint(draft).codes()  # 9 may be fine for a deeper target
    assert "E322" in validate_checkpoint(draft, target=target_config(tmp_path / "t")).codes()


# ------------------------------------------------------------------ engine codes (unit, fake reports)


def _engine_report(**kw: Any) -> SimpleNamespace:
    base = {
        "ok": False,
        "vllm_version": "0.32.0",
        "features": None,
        "loaded": [],
        "unwritten": [],
        "error": None,
        "seconds": 1.0,
        "unwritten_keys": [],
        "shared_from_target": [],
        "stage": None,
    }
    return SimpleNamespace(**(base | kw))


def test_e701_unwritten_parameter_from_engine_report() -> None:
    from eagle_convert.validate.rules.engine import from_engine

    rep = _engine_report(
        unwritten=["model.layers.0.mlp.down_proj.weight", "model.layers.1.hidden_norm.weight"],
        unwritten_keys=["layers.0.mlp.down_proj.weight", "layers.1.hidden_norm.weight"],
    )
    [hit] = from_engine(rep)  # hidden_norm of layer >= 1 is built but never used by vLLM: allowed
    assert (hit.code, hit.tensor) == ("E701", "layers.0.mlp.down_proj.weight")


def test_e702_engine_load_failed_from_engine_report() -> None:
    from eagle_convert.validate.rules.engine import from_engine

    [hit] = from_engine(
        _engine_report(error="ValueError: There is no module or parameter named 'model.bogus'", stage="load")
    )
    assert hit.code == "E702" and "model.bogus" in hit.message


def test_e703_feature_missing_from_installed_vllm(tmp_path: Path) -> None:
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe
    from eagle_convert.validate.rules.context import build_context
    from eagle_convert.validate.rules.engine import feature_findings

    ckpt = open_checkpoint(build_draft(tmp_path / "d", FIXTURE_MATRIX["speculators-eagle31"]))
    ctx = build_context(ckpt, describe(ckpt, default_release(), read_vocab=False))
    old = SimpleNamespace(
        version="0.21.0", fc_norm=False, norm_output=False, speculators_propagates_31_flags=False, evidence={}
    )
    hits = feature_findings(ctx, old)
    assert [f.code for f in hits] == ["E703"] * 3
    assert "PR #46488" in hits[2].message and "0.21.0" in hits[0].message
    new = SimpleNamespace(version="0.32.0", fc_norm=True, norm_output=True, speculators_propagates_31_flags=True)
    assert feature_findings(ctx, new) == []
