"""`check` gives its verdict for the vLLM release the draft will be served on, and fails only what
changes serving by default: hygiene warnings are reported and pass (a policy can make them fail).

The features stage of a named release reads `releases.py` (`features.features_of`), never the
installed vLLM, so these tests hold with or without vLLM installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.check import CheckOptions
from eagle_convert.check import checks as ck
from eagle_convert.check.policy import Policy
from eagle_convert.check.run import run_check
from eagle_convert.cli.app import main
from eagle_convert.validate.findings import Report, finding
from eagle_convert.vllm_model import features, releases

FEATURES = Policy({"features": {}}, "test")


def _feature_results(report) -> dict[str, dict]:
    return {c.name: c.to_dict() for c in report.results if c.stage == "features"}


def test_features_of_every_release_matches_the_changes() -> None:
    """The release model answers the features stage the way the detector reads each release's source
    (checked on every tree 0.21.0-0.34.0 when the tables were written; here: the boundaries)."""
    f21, f22, f23 = (features.features_of(releases.release(v)) for v in ("0.21.0", "0.22.1", "0.23.0"))
    assert (f21.fc_norm, f22.fc_norm, f23.fc_norm) == (False, True, True)
    assert (f22.mla_fc_norm_applied, f23.mla_fc_norm_applied) == (False, True)
    f24, f25 = (features.features_of(releases.release(v)) for v in ("0.24.0", "0.25.0"))
    assert (f24.speculators_propagates_31_flags, f25.speculators_propagates_31_flags) == (False, True)
    assert "PeagleQwen3ForCausalLM" in f24.registered_eagle3_archs
    assert "PeagleLlamaForCausalLM" not in f21.registered_eagle3_archs
    assert f22.evidence["mla_fc_norm_applied"].endswith("(vLLM #43482); releases 0.23.0 on")


@pytest.mark.skipif(not features.vllm_available(), reason="compares with the installed vLLM's source")
def test_features_of_the_installed_release_equal_the_detected_ones() -> None:
    found = features.detect_features()
    assert found is not None and found.version is not None
    known, _note = releases.nearest_known(found.version)
    assert known is not None
    expected = features.features_of(releases.release(known)).to_dict()
    got = found.to_dict()
    differ = {k for k in got if k not in ("evidence", "package_dir", "version") and got[k] != expected[k]}
    assert differ == set()


@pytest.mark.parametrize(
    "fixture, release, passed, message",
    [
        (
            "kimi-mla-eagle31",
            "0.22.1",
            False,
            "vLLM 0.22.1 does not apply fc_norm: 0.23.0 model_executor/models/deepseek_eagle3.py "
            "Eagle3DeepseekV2ForCausalLM.combine_hidden_states (vLLM #43482); releases 0.23.0 on; the engine would "
            "silently ignore it",
        ),
        ("kimi-mla-eagle31", "0.23.0", True, None),
        (
            "vllm-eagle31",
            "0.21.0",
            False,
            "vLLM 0.21.0 does not build fc_norm: 0.22.0 model_executor/models/llama_eagle3.py "
            "LlamaModel.__init__ and deepseek_eagle3.py DeepseekV2Model.__init__ (vLLM #42764); releases 0.22.0 on; "
            "the load fails on the fc_norm.* tensors (KeyError before 0.22.0)",
        ),
        ("vllm-eagle31", "0.22.0", True, None),
    ],
)
def test_features_stage_for_a_named_release(built_fixtures, fixture, release, passed, message) -> None:
    report = run_check(built_fixtures(fixture), CheckOptions(vllm_version=release, keep_going=True), policy=FEATURES)
    fc_norm = _feature_results(report)["feature fc_norm"]
    assert fc_norm["status"] == ("pass" if passed else "fail")
    if message is not None:
        assert fc_norm["message"] == message
    assert report.release.release == release and report.release.why == f"--vllm-version {release}"


def test_policy_names_the_release_and_the_flag_wins(built_fixtures) -> None:
    draft = built_fixtures("kimi-mla-eagle31")
    policy = Policy({"features": {}, "static": {"vllm_version": "0.22.0"}}, "test")
    report = run_check(draft, CheckOptions(keep_going=True), policy=policy)
    assert report.release.release == "0.22.0" and _feature_results(report)["feature fc_norm"]["status"] == "fail"
    report = run_check(draft, CheckOptions(keep_going=True, vllm_version="0.30.0"), policy=policy)
    assert report.release.release == "0.30.0" and _feature_results(report)["feature fc_norm"]["status"] == "pass"


def test_hygiene_warnings_pass_and_can_be_made_to_fail() -> None:
    rep = Report("d", families_run=["files", "config"])
    rep.add(finding("W204", "fp32 weights", tensor="fc.weight"))  # hygiene in the table
    rep.add(finding("W307", "implicit", field="norm_before_residual", impact="hygiene"))
    errors, warnings, hygiene = ck.static_checks(rep, [])
    assert (errors.passed, warnings.passed, hygiene.passed) == (True, True, True)
    assert warnings.message == "no warning changes what vLLM serves"
    assert hygiene.figure == 2 and hygiene.threshold == "reported"
    assert hygiene.message.startswith("served as trained: W204 unusual-dtype: fp32 weights; W307")
    *_, hygiene = ck.static_checks(rep, [], fail_on_hygiene=True)
    assert hygiene.passed is False and hygiene.threshold == "0"
    rep.add(finding("W323", "ids only in eagle_config", field="eagle_config"))  # computes-differently
    _, warnings, _ = ck.static_checks(rep, [])
    assert warnings.passed is False and warnings.details["impacts"] == ["computes-differently"]
    _, warnings, _ = ck.static_checks(rep, ["W323"])
    assert warnings.passed and warnings.message == "no warning changes what vLLM serves (1 allowed: W323)"


def test_check_cli_names_the_release(built_fixtures, tmp_path: Path) -> None:
    draft = built_fixtures("vllm-eagle31")
    res = CliRunner().invoke(main, ["check", str(draft), "--vllm-version", "0.25.1", "--json"])
    assert res.exit_code == 1, res.output  # the default policy's strict load needs --target: not run
    assert json.loads(res.stdout)["stopped_after"] == "engine"
    data = json.loads(res.stdout)
    assert data["release"]["release"] == "0.25.1" and data["release"]["why"] == "--vllm-version 0.25.1"
    text = " ".join(CliRunner().invoke(main, ["check", str(draft), "--vllm-version", "0.25.1"]).stdout.split())
    assert "verdict for vLLM 0.25.1 (--vllm-version 0.25.1)" in text
    bad = CliRunner().invoke(main, ["check", str(draft), "--vllm-version", "0.20.0"])
    assert bad.exit_code == 2
    assert bad.stderr == (
        "Error: --vllm-version 0.20.0: 0.20.0 is older than the oldest release eagle-convert knows (0.21.0) "
        f"(name a release 0.21.0 ... {releases.NEWEST_RELEASE}, or 'all')\n"
    )


# ------------------------------------------------------------- the default gate: no false alarm

STATIC = Policy({"engine": {"load": False}}, "the defaults, strict load off")


_UPGRADED = ("specforge-eagle3", "vllm-eagle3", "speculators-eagle3", "torchspec-eagle3", "vllm-qwen3-eagle3")


@pytest.fixture(scope="module")
def gate_drafts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Upgraded fixture drafts; the SpecForge draft as SpecForge publishes it (no aux ids: its trainer
    falls back to vLLM's default layers) and as the fixture writes it (ids only in eagle_config)."""
    from fixtures.drafts import FIXTURE_MATRIX, build_draft
    from fixtures.edits import edit_config, upgrade_draft

    base = tmp_path_factory.mktemp("gate")
    out = {}
    for name in _UPGRADED:
        src = build_draft(base / f"{name}-src", FIXTURE_MATRIX[name])
        out[f"{name}-upgraded"] = upgrade_draft(src, base / f"{name}-up")
    out["specforge-nested-ids"] = build_draft(base / "sf-nested", FIXTURE_MATRIX["specforge-eagle3"])
    plain = build_draft(base / "sf-plain", FIXTURE_MATRIX["specforge-eagle3"])
    out["specforge-plain"] = edit_config(plain, eagle_config=None)
    target = base / "target"
    target.mkdir()
    (target / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "num_hidden_layers": 8,
                "hidden_size": 64,
                "vocab_size": 256,
                "max_position_embeddings": 2048,
            }
        )
    )
    out["target"] = target
    return out


@pytest.mark.parametrize("name", [f"{n}-upgraded" for n in _UPGRADED] + ["specforge-plain"])
def test_the_default_gate_passes_good_drafts(gate_drafts, name: str) -> None:
    report = run_check(gate_drafts[name], policy=STATIC)
    assert report.passed, [r.to_dict() for r in report.results if r.passed is False]
    assert report.stage_status("engine") == "skip"
    bare = run_check(gate_drafts[name], policy=Policy())  # the strict load, asked by default, needs --target
    assert [r.name for r in bare.results if r.passed is False] == ["engine load"]
    assert bare.stage_status("engine") == "not-run" and bare.stage_status("static") == "pass"


def test_plain_specforge_hygiene_is_reported_not_failed(gate_drafts) -> None:
    report = run_check(gate_drafts["specforge-plain"], policy=STATIC)
    rows = {r.name: r for r in report.results}
    assert rows["static: warnings"].passed and rows["static: hygiene"].passed
    assert rows["static: hygiene"].details["codes"] == ["W307", "W320"]
    strict_policy = Policy({"static": {"fail_on_hygiene": True}, "engine": {"load": False}}, "t")
    strict = run_check(gate_drafts["specforge-plain"], policy=strict_policy)
    assert not strict.passed and {r.name for r in strict.results if r.passed is False} == {"static: hygiene"}


def test_the_default_gate_fails_ids_the_v2_runner_replaces(gate_drafts) -> None:
    report = run_check(gate_drafts["specforge-nested-ids"], policy=Policy())
    [warn] = [r for r in report.results if r.name == "static: warnings"]
    # SpecForge's [1, 3, 4] are layer outputs, A(2, 4, 5) (engines/producers.py): the V1 runner taps
    # A(1, 3, 4) (W603) whatever the target; V2's default layers need its depth to compare (W323)
    assert not report.passed and warn.passed is False and warn.details["codes"] == ["W323", "W603"]
    assert "[1, 3, 4]" in warn.message
    with_target = run_check(
        gate_drafts["specforge-nested-ids"],
        CheckOptions(target=gate_drafts["target"]),
        policy=Policy({"engine": {"load": False}}, "t"),
    )
    # with the target's depth, [1, 3, 4] is SGLang's name for V2's (2, 4, 5): V1 is the runner that
    # serves it differently (W603), so the gate still fails, on that
    [warn] = [r for r in with_target.results if r.name == "static: warnings"]
    assert warn.passed is False and warn.details["codes"] == ["W603"]
    assert "V2 reads no eagle_config ids" in warn.message


def test_the_gate_names_the_ids_v2_taps_instead(gate_drafts, tmp_path: Path) -> None:
    import shutil

    from fixtures.edits import edit_config

    draft = tmp_path / "other-ids"
    shutil.copytree(gate_drafts["specforge-nested-ids"], draft)
    edit_config(draft, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 6]})
    report = run_check(
        draft, CheckOptions(target=gate_drafts["target"]), policy=Policy({"engine": {"load": False}}, "t")
    )
    [warn] = [r for r in report.results if r.name == "static: warnings"]
    assert not report.passed and warn.details["codes"] == ["W323", "W603"]
    assert "so it taps (2, 4, 5) for this 8-layer target instead of [1, 2, 6]" in warn.message


# ------------------------------------------------------------- a release eagle-convert has not read


def test_unverified_findings_fail_unless_the_policy_accepts_the_risk() -> None:
    rep = Report("d", families_run=["files", "engine"])
    rep.add(finding("E706", "9.9.9 is newer than the newest release eagle-convert knows: unverified"))
    errors, warnings, unverified = ck.static_checks(rep, [])
    assert (errors.passed, warnings.passed, unverified.passed) == (True, True, False)
    assert unverified.name == "static: unverified" and unverified.details["policy_keys"] == ["unknown_release"]
    assert unverified.message == (
        "unverified, so not passed: E706 vllm-release-unverified: 9.9.9 is newer than the newest release "
        "eagle-convert knows: unverified"
    )
    *_, accepted = ck.static_checks(rep, [], accept={"unknown_release": "warn", "modified_source": "fail"})
    assert accepted.passed is True and accepted.threshold == '0 (accepted: [vllm] unknown_release = "warn")'
    assert accepted.message.startswith('risk accepted by the policy\'s [vllm] unknown_release = "warn": E706')
    *_, other_key = ck.static_checks(rep, [], accept={"modified_source": "warn"})
    assert other_key.passed is False


@pytest.mark.parametrize("version", ["0.99.0", "9.9.9"])
def test_check_fails_a_release_it_has_not_read(built_fixtures, tmp_path: Path, version: str) -> None:
    """`check --vllm-version 0.99.0` never passes with borrowed rules; the message names the newest known release."""
    draft = built_fixtures("vllm-eagle31")
    res = CliRunner().invoke(main, ["check", str(draft), "--vllm-version", version, "--json"])
    assert res.exit_code == 1, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["checks"]}
    row = rows["static: unverified"]
    newest = releases.NEWEST_RELEASE
    assert (row["status"], row["details"]["codes"]) == ("fail", ["E706"])
    assert (
        f"newer than the newest release eagle-convert knows ({newest}): this verdict used {newest}'s"
        in (row["message"])
    )
    policy = tmp_path / "eagle-check.toml"
    policy.write_text('[vllm]\nunknown_release = "warn"\n')
    res = CliRunner().invoke(main, ["check", str(draft), "--vllm-version", version, "--json", "--policy", str(policy)])
    row = {r["name"]: r for r in json.loads(res.stdout)["checks"]}["static: unverified"]
    assert (row["status"], row["details"]["accepted"]) == ("pass", True)
    assert row["message"].startswith('risk accepted by the policy\'s [vllm] unknown_release = "warn": E706')


def test_the_features_and_engine_stages_share_one_opened_draft(gate_drafts, monkeypatch) -> None:
    import eagle_convert.draft as draft_face
    from eagle_convert.check import stages
    from eagle_convert.measure import Engines
    from eagle_convert.vllm_model import installed_status

    opened: list[str] = []
    real = draft_face.open_checkpoint
    monkeypatch.setattr(draft_face, "open_checkpoint", lambda ref: opened.append(str(ref)) or real(ref))
    draft = gate_drafts["specforge-plain"]
    policy = Policy({"static": {"enabled": False}}, "t")  # no validation report: check describes the draft itself
    s = stages.State(str(draft), None, None, policy, None, Engines({}), release=installed_status("0.32.0"))
    info = stages._info(s)  # the features stage
    assert stages._info(s) is info and s.checkpoint() is s.checkpoint()  # the engine stage's
    assert opened == [str(draft)] and info.view is not None


def test_the_engine_stage_reads_the_draft_not_the_target_again(gate_drafts, monkeypatch) -> None:
    """The features an engine lacks are judged on the draft alone: the target is vLLM's to load,
    not opened a second time by the stage."""
    from types import SimpleNamespace

    import eagle_convert.validate.rules.target as target_rules
    from eagle_convert.check import stages
    from eagle_convert.measure import Engines
    from eagle_convert.vllm.load_report import EngineReport
    from eagle_convert.vllm_model import installed_status

    monkeypatch.setattr(target_rules, "open_target", lambda *a, **kw: pytest.fail("the target was opened again"))
    draft, target = gate_drafts["vllm-eagle3-upgraded"], gate_drafts["target"]
    policy = Policy({"static": {"enabled": False}}, "t")
    s = stages.State(str(draft), str(target), None, policy, None, Engines({}), release=installed_status("0.32.0"))
    s.measure = SimpleNamespace(k=3)  # type: ignore[assignment]  # the stage reads only k
    lacking = SimpleNamespace(version="0.20.0", fc_norm=False)  # every feature not named here is present
    report = EngineReport(True, "0.20.0", lacking, loaded=["fc.weight"])  # type: ignore[arg-type]
    key = ("load", str(s.folder("draft")), str(s.folder("target")), 3, "{}")
    s.engines.cache[key] = report
    [row] = stages.engine(s)
    assert not row.passed and row.details["codes"] == ["E703"]
    assert "fc_norm (EAGLE-3.1, PR #42764), which the installed vLLM 0.20.0 lacks" in row.message
