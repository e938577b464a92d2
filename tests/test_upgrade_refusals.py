"""`upgrade` writes only what `validate` accepts (`upgrade/preflight.py`): the same verdict in both commands.

TorchSpec's GLM-4 MoE EAGLE-3 draft (tests/data/realconfigs/, built sparse at real size) used to be
upgraded into a draft validate rejected: its routed-expert MLP fits no vLLM 0.32 EAGLE-3 class
(all have a dense MLP: llama_eagle3.py LlamaMLP, deepseek_eagle3.py "Always uses MLP (not MoE)"),
so under the LlamaForCausalLMEagle3 the upgrade wrote, gate/up/down_proj load nothing (E101) and
the expert tensors have no parameter (E102). Both are in the input already; the upgrade cannot fix
them, so it refuses. Errors it does fix (E302: config only) do not stop it; a P-EAGLE draft
(E301 in the input) is refused by every entry point, the library's included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.errors import EagleConvertError, NotADraftError, UpgradeRefusedError
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.linkplan import plan_link
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.upgrade.preflight import output_errors, planned_checkpoint, refuse_invalid_output
from eagle_convert.upgrade.run import plan_upgrade_draft, upgrade_draft
from eagle_convert.validate.rules import run_static
from eagle_convert.validate.rules.context import build_context
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import default_release
from fixtures.realconfigs import build_all, materialize_plan, plan_for

GLM = "torchspec-glm4-moe"


def glm_message(src: Path) -> str:
    return (
        f"{src}: validate would reject the upgraded draft (vLLM class Eagle3LlamaForCausalLM): "
        "E101 missing-tensor (layers.0.mlp.down_proj.weight and 2 more) and "
        "E102 unknown-tensor (layers.0.mlp.experts.down_proj and 6 more), as in the input: the upgrade "
        "carries every tensor but fc_norm as it is, so it cannot fix them "
        f"(fix the draft first; eagle-convert validate {src} gives each finding's fix)"
    )


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    return build_all(tmp_path_factory.mktemp("real"))


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_glm_moe_errors_are_the_inputs_and_upgrade_refuses_them(real, tmp_path: Path) -> None:
    draft, target = real[GLM]
    given = {f.code for f in validate_checkpoint(draft, target=target).errors}
    assert given == {"E101", "E102", "E301"}
    plan = plan_for(GLM, draft, target)  # the plan itself is pure; writing it is what is refused
    assert plan.config_after["architectures"] == ["LlamaForCausalLMEagle3"]  # E301 is the upgrade's to fix
    assert sorted({f.code for f in output_errors(plan)}) == ["E101", "E102"]
    with pytest.raises(UpgradeRefusedError) as exc:
        apply_upgrade(plan, tmp_path / "out")
    assert str(exc.value) == glm_message(draft)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "extra",
    [[], ["--dry-run"], ["--json"], ["--dry-run", "--json"], ["--layout", "keep"], ["--layout", "keep", "--link"]],
)
def test_cli_refuses_the_glm_moe_draft_in_one_line(real, tmp_path: Path, extra: list[str]) -> None:
    draft, _ = real[GLM]
    res = run("upgrade", draft, "--out", tmp_path / "out", *extra)
    message = glm_message(draft)
    if "keep" in extra:  # the input's tensor names
        message = message.replace("(layers.0.mlp.experts.down_proj", "(midlayer.mlp.experts.down_proj")
    assert (res.exit_code, res.output) == (1, f"Error: {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_errors_the_upgrade_fixes_do_not_stop_it(real, tmp_path: Path) -> None:
    """E302 (MTP model_type) lives in the config the upgrade rewrites."""
    key = "torchspec-qwen3-8b-mla"
    draft, target = real[key]
    assert {f.code for f in validate_checkpoint(draft, target=target).errors} == {"E302"}
    plan = plan_for(key, draft, target)
    refuse_invalid_output(plan)
    assert output_errors(plan) == []
    out = materialize_plan(plan, tmp_path / key)
    assert validate_checkpoint(out, target=target).errors == []


def test_the_plans_own_check_is_reused_and_a_changed_plan_checked_again(real, monkeypatch) -> None:
    """The plan validates its output once (for the card); the preflight reuses that answer, and
    checks again when the plan changed after planning (a stale answer would let a bad output pass)."""
    import eagle_convert.upgrade.preflight as preflight

    draft, target = real[GLM]
    plan = plan_for(GLM, draft, target)
    assert plan.output_check is not None and {f.code for f in plan.output_check.errors} == {"E101", "E102"}
    calls: list[int] = []
    real_check = preflight.static_errors
    monkeypatch.setattr(preflight, "static_errors", lambda *a: calls.append(1) or real_check(*a))
    assert sorted({f.code for f in output_errors(plan)}) == ["E101", "E102"] and calls == []
    plan.config_after = {**plan.config_after, "architectures": ["NoSuchArchitecture"]}
    assert "E301" in {f.code for f in output_errors(plan)} and calls == [1]  # checked again, and kept
    assert "E301" in {f.code for f in output_errors(plan)} and calls == [1]


PEAGLE = "specforge-qwen3-8b-peagle"


def peagle_message(src: Path) -> str:
    return (
        f"{src}: a P-EAGLE (parallel drafting) draft ('PEagleDraftModel' is a parallel-drafting (P-EAGLE) "
        "architecture in vLLM's registry; embed_tokens.weight [151936, 4096]; lm_head.weight [32000, 4096]): "
        "P-EAGLE drafts are inspected and validated, but upgrade supports sequential EAGLE-3 drafts only"
    )


@pytest.mark.parametrize("call", ["upgrade_draft", "plan_upgrade_draft", "dry_run"])
def test_the_library_refuses_a_peagle_draft_as_the_cli_does(real, tmp_path: Path, call: str) -> None:
    """One policy for every entry point: the library refuses P-EAGLE (E301 in the input) before planning."""
    draft, target = real[PEAGLE]
    assert {f.code for f in validate_checkpoint(draft, target=target).errors} == {"E301"}
    with pytest.raises(NotADraftError) as exc:
        if call == "plan_upgrade_draft":
            plan_upgrade_draft(draft, target=target)
        else:
            upgrade_draft(draft, tmp_path / "out", target=target, dry_run=call == "dry_run")
    assert (str(exc.value), exc.value.kind) == (peagle_message(draft), "peagle")
    assert list(tmp_path.iterdir()) == []
    res = run("upgrade", draft, "--out", tmp_path / "out", "--target", target)
    assert (res.exit_code, res.output) == (1, f"Error: {peagle_message(draft)}\n")
    assert list(tmp_path.iterdir()) == []


def _findings(ckpt) -> list[tuple[str, str, str]]:
    return sorted(
        (f.code, f.where, f.message)
        for f in run_static(build_context(ckpt, describe(ckpt, default_release(), read_vocab=False)))[0]
    )


@pytest.mark.parametrize("layout", ["vllm", "keep", "speculators"])
def test_the_planned_output_validates_as_the_written_one(real, tmp_path: Path, layout: str) -> None:
    """Every real config: the preflight's findings (all levels) are validate's on the written output,
    and an upgrade that is not refused writes a draft without errors."""
    checked = 0
    for key, (draft, target) in real.items():
        try:
            plan = plan_for(key, draft, target, layout=layout)
        except EagleConvertError:  # already 3.1, norm_before_fc, no ids, no speculators MLA, P-EAGLE
            continue
        out = materialize_plan(plan, tmp_path / key)
        written = open_checkpoint(out)
        virtual = planned_checkpoint(plan)
        assert [(c, w, m.replace(virtual.description, str(out))) for c, w, m in _findings(virtual)] == _findings(
            written
        ), key
        refused = key == GLM
        try:
            refuse_invalid_output(plan)
        except UpgradeRefusedError:
            assert refused, key
        else:
            assert not refused, key
            assert validate_checkpoint(out).errors == [], key
        checked += 1
    # of 25 (P-EAGLE is refused before planning, as in the CLI; SpecForge's Kimi [2, 30, 58], whose two
    # capture paths trained different layers, is refused: engines/producers.py)
    assert checked >= 16


def test_keep_layout_refused_where_vllm_misreads_its_names(built_fixtures, tmp_path: Path) -> None:
    """NeMo's `model.` prefix, kept by --layout keep, is what vLLM reads as model.model.* (E103)."""
    src = built_fixtures("nemo-eagle3")
    message = (
        f"Error: {src}: validate would reject the upgraded draft (vLLM class Eagle3LlamaForCausalLM): "
        "E103 model-prefix (model.embed_tokens.weight), kept from the input by --layout keep "
        "(use --layout vllm, whose output validate accepts)\n"
    )
    for extra in ([], ["--link"], ["--dry-run"]):
        res = run("upgrade", src, "--out", tmp_path / "out", "--layout", "keep", "--aux-layer-ids", "2,4,5", *extra)
        assert (res.exit_code, res.output) == (1, message)
    assert not (tmp_path / "out").exists()
    res = run("upgrade", src, "--out", tmp_path / "out", "--aux-layer-ids", "2,4,5")
    assert res.exit_code == 0, res.output
    assert validate_checkpoint(tmp_path / "out").errors == []
    # The plan still spells new norms like the input's fc, and --link names its own reason.
    ckpt = open_checkpoint(src)
    plan = plan_upgrade(
        ckpt, describe(ckpt, default_release(), read_vocab=False), layout="keep", aux_layer_ids=[2, 4, 5]
    )
    assert "model.fc_norm.0.weight" in {t.name for t in plan.additions}
    with pytest.raises(UpgradeRefusedError, match="vLLM loads 'model.embed_tokens.weight' as 'model.model"):
        plan_link(plan)


def test_an_error_of_the_upgrades_own_making_is_called_a_bug(built_fixtures, tmp_path: Path) -> None:
    src = built_fixtures("vllm-eagle3")
    ckpt = open_checkpoint(src)
    plan = plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False))
    plan.config_after["architectures"] = ["Glm4MoeForCausalLMEagle3"]  # as if the config writer broke
    with pytest.raises(UpgradeRefusedError) as exc:
        apply_upgrade(plan, tmp_path / "out")
    assert str(exc.value) == (
        f"{src}: validate would reject the upgraded draft (vLLM class none): E301 unregistered-architecture "
        "(architectures), none in the input: the upgrade's own doing "
        "(an eagle-convert bug: please report it with the draft's config.json)"
    )
    assert not (tmp_path / "out").exists()
