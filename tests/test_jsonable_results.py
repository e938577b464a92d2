"""The JSON of smoke's, `smoke --server`'s and the engines' results, pinned byte for byte (key
order, rounding, omitted keys) to what their hand-written `to_dict`s wrote before these were
derived from their declarations (`jsonable`); the `GOLDEN` strings were recorded from that code."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest


def _smoke() -> Any:
    from eagle_convert.measure.control import Comparison, Divergence, SamplingControl
    from eagle_convert.measure.ksweep import StepCosts, k_sweep
    from eagle_convert.measure.prompts import PreparedPrompt, PromptSet, SkippedPrompt
    from eagle_convert.measure.results import Counts, Delta, DraftResult, Group, RequestResult, SmokeReport
    from eagle_convert.measure.throughput import EngineRates, LevelRate, ThroughputReport

    c1 = Counts(1, 12, 30, 9, 27, 14, [7, 5, 2], 10, 1.234567)
    c2 = Counts(1, 7, 20, 6, 18, 4, [3, 1, 0], 7, None)
    total = Counts(2, 19, 50, 15, 45, 18, [10, 6, 2], 17, None)
    reqs = [RequestResult("p1", "code", 0, c1), RequestResult("p2", "chat", 256, c2)]
    control = SamplingControl(
        0.01,
        Comparison(2, 1, [Divergence("p2", 3, 11, 12, 0.0625, 0.125, 12, True)]),
        Comparison(2, 1, [Divergence("p2", 4, 11, 13, None, None, None, False)]),
        "known",
    )
    sweep = k_sweep(total, StepCosts(0.001234567, 0.0105, 0.0, "reference"))
    a = DraftResult(
        "a", "/a", "EAGLE-3", total, [Group("code", 0, c1), Group("all", None, c2)], reqs, True, 1.5, control, sweep
    )
    b = DraftResult(
        "b", "/b", None, Counts(accepted_per_pos=[], seconds=0.0), [], [RequestResult("p1", "code", 0, None)], False
    )
    delta = Delta(
        "b", "a", -0.123456, 0.0456789, [0.111111, -0.2], 1.23456, [("code", 0, 0.5555555), ("all", None, -1.0)]
    )
    pset = PromptSet(
        [PreparedPrompt("p1", "code", 0, [1, 2, 3]), PreparedPrompt("p2", "chat", 256, [4] * 5, 17)],
        [SkippedPrompt("p3", "chat", 256, "too long")],
        "target",
        "built-in",
        {"p1": {"source": "x"}},
        ["refused line"],
    )
    lv = [
        LevelRate(1, 4, 12.3456789, 11.1111, 13.9999, 0.0123456, None),
        LevelRate(4, 4, 9.87654, 9.0, 10.5, 0.5, None),
    ]
    dl = [LevelRate(1, 4, 20.123456, 19.0, 21.0, 0.01, 2.345678), LevelRate(4, 4, 9.0, 8.0, 9.5, 0.02, 2.1)]
    tput = ThroughputReport(
        [1, 4], EngineRates("no speculation", None, lv), [EngineRates("a", "/a", dl)], "cpu", "0.34.0", {"x": 1}
    )
    return SmokeReport("/t", "vllm", "0.34.0", {"k": 3}, pset, [a, b], [delta], 12.345678, tput)


def _statuses() -> Any:
    from eagle_convert.engines.select import EngineStatus
    from eagle_convert.engines.serve import ServeCommand
    from eagle_convert.engines.serve_file import GivenServe
    from eagle_convert.vllm_model.fingerprints import Drift, FingerprintCheck
    from eagle_convert.vllm_model.versions import VllmVersionStatus

    vs = [
        VllmVersionStatus("0.35.0", "0.34.0", "the installed vLLM", True, "0.35.0 is newer", "0.34.0"),
        VllmVersionStatus(None, "0.32.0", "--vllm-version 0.32.0"),
    ]
    es = [
        EngineStatus("sglang", "0.5.23", "--for sglang==0.5.23", "0.5.30", True, "newer", None, "0.5.30"),
        EngineStatus("vllm", "0.34.0", "x", vllm=vs[0]),
    ]
    fp = [
        FingerprintCheck(
            "0.32.0", "/site/vllm", (Drift("a.py", "f", "changed"), Drift("b.py", "*", "missing")), 40, 7, "wheel"
        ),
        FingerprintCheck("0.34.0", "/site/vllm", (), 3, 1),
    ]
    cmds = [
        ServeCommand(
            "trtllm",
            "1.2.0",
            "TensorRT-LLM",
            ("trtllm-serve", "/t", "--config", "speculative.yaml"),
            (("--config", "speculative.yaml"),),
            (("max_draft_len", 3), ("layers", frozenset({3, 1})), ("name", "a b")),
            "speculative.yaml",
            ("read the draft as trained",),
        ),
        ServeCommand("vllm", "0.34.0", "vLLM", ("vllm", "serve", "/t"), (("--speculative-config", '{"k": 3}'),)),
    ]
    given = GivenServe("sglang", "serve.sh", {"speculative_num_steps": "3"})
    return _Both(*vs, *es, *fp, *cmds, given)


def _small() -> Any:
    from eagle_convert.draft.fcnorm import FcNormState
    from eagle_convert.finetune.calibrate import Calibration
    from eagle_convert.report.cache import StageRecord
    from eagle_convert.served_diff import ServedDiff, ServedDifference
    from eagle_convert.validate.deep import DeepSummary, TensorStats

    fc = FcNormState(
        "identity", ("fc_norm.0.weight", "fc_norm.1.weight"), ("fc_norm.0.weight",), "calibrated", "README.md"
    )
    sd = ServedDiff(
        "a",
        "b",
        "0.34.0",
        [
            ServedDifference("config", "norm_output", True, None, "n"),
            ServedDifference("tensor", "fc.weight", (4, 8), [4, 8]),
        ],
        ["fc_norm.0.weight: x"],
    )
    st = [
        StageRecord("smoke:a", "k" * 8, {"x": [1.5]}, {"a/b": "d"}, 1.23456, "eagle-convert smoke"),
        StageRecord("v", "k", {}),
    ]
    deep = DeepSummary(3, 4096, 0.123456, 1 << 20, [TensorStats("fc.weight", "F32", 32)])
    cal = Calibration(
        [1.5, 0.25],
        [{"median": 1.5, "mean": 1.25}],
        [1, 2],
        "/t",
        "builtin",
        "none",
        3,
        96,
        1,
        12,
        0.75,
        None,
        "cpu",
        2.5,
    )
    return _Both(fc, sd, *st, deep, cal)


def _capture() -> Any:
    from pathlib import Path

    from eagle_convert.cache.capture import CaptureResult
    from eagle_convert.cache.store import CachePlan, Manifest, ShardEntry

    plan = CachePlan("/t", "/d", "vllm", "bfloat16", [1, 3, 4], "r" * 8, "s" * 8, 5, 2)
    shards = {0: ShardEntry("s0", [0, 1], 700, 7000, "a", 0.5), 1: ShardEntry("s1", [2, 3], 300, 3001, "b", 0.25)}
    man = Manifest(plan, shards, {}, {"vllm": "0.34.0"})
    return _Both(
        CaptureResult(Path("/c"), man, [1], 1.23456, 300, 0.98765), CaptureResult(Path("c"), man, [], 0.0, 0, 0.0)
    )


def _features() -> Any:
    from eagle_convert.vllm_model.features import VllmFeatures

    f = VllmFeatures(
        "0.34.0", True, True, False, True, True, True, False, ["Eagle3LlamaForCausalLM"], {"fc_norm": "a.py"}
    )
    return _Both(f, VllmFeatures(None, False, False, False, False, False, False, False, package_dir="/v"))


class _Record:
    """A calibration's provenance record (`NormInit.record`), as the upgrade writes it."""

    def to_dict(self) -> list[Any]:
        from eagle_convert.finetune.calibrate import Calibration

        cal = Calibration([1.1234567, 0.25], [], [1, 2], "/t", "builtin", "none", 3, 96, 1, 12, 0.75, None, "cpu", 2.5)
        return [cal.norm_init().record, replace(cal, agreement=None).norm_init().record]


class _Both:
    """Several results pinned together: their dicts in a list."""

    def __init__(self, *items: Any) -> None:
        self.items = items

    def to_dict(self) -> list[Any]:
        return [i.to_dict() for i in self.items]


def _served(sent: bool) -> Any:
    from eagle_convert.measure.prompts import Prompt
    from eagle_convert.served.buckets import BucketPrompt, Skipped
    from eagle_convert.served.http import ServedModel
    from eagle_convert.served.metrics import DecodeTimes, SpecCounters
    from eagle_convert.served.results import ServedLevel, ServedReport, ServedServer
    from eagle_convert.served.stream import RequestOutcome

    def outs(rate: float) -> list[RequestOutcome]:
        return [
            RequestOutcome("p1", 33, 12, 0.0123456, 32 / rate),
            RequestOutcome("p2", 17, 9, 0.02, 16 / (rate * 1.1)),
            RequestOutcome("p3", 0, None, None, None, "timeout"),
        ]

    model = ServedModel("m", 4096, "/models/t", "vllm", "vllm 0.34.0")
    spec = {"method": "eagle3", "num_speculative_tokens": 3}
    levels = [
        ServedLevel(
            1,
            outs(40.0),
            SpecCounters(20, 60, 25, (12, 9, 4)),
            3.456789,
            speedup=1.876543,
            decode=DecodeTimes(2, 48.0, 1.3),
            speedup_source="engine",
        ),
        ServedLevel(
            4,
            outs(30.0),
            SpecCounters(10, 30, 11, (6, 4, 1)),
            2.5,
            no_figure="counters did not move",
            notes=["other traffic"],
            bucket=256,
        ),
    ]
    base = ServedServer(
        "no speculation",
        "http://b",
        model,
        None,
        [ServedLevel(1, outs(21.0), None, 4.0), ServedLevel(4, outs(15.0), None, 3.0, bucket=256)],
    )
    server = ServedServer("a", "http://a", model, 3, levels, ["root names the target"], spec)
    bucketed = [BucketPrompt(Prompt("p1", "code", "x"), 256, 260, 40)] if sent else []
    return ServedReport(
        {"max_new_tokens": 64},
        "built-in",
        [("p1", "code"), ("p2", "chat"), ("p3", "chat")],
        [server],
        base,
        [1, 4],
        9.87654,
        False,
        [0, 256],
        bucketed,
        [Skipped("p2", "chat", 256, "too long")] if sent else [],
    )


def _check() -> Any:
    from eagle_convert.check.checks import CheckResult
    from eagle_convert.check.policy import Policy
    from eagle_convert.check.run import CheckReport
    from eagle_convert.vllm_model import parse_serve_config
    from eagle_convert.vllm_model.versions import VllmVersionStatus

    results = [
        CheckResult("acceptance length", "acceptance", True, 2.345678, ">= 2", "ok", 1.23456, {"x": (1, 2.5)}),
        CheckResult("loops", "alarms", False, 3, None, "bad"),
        CheckResult("static validation", "static", None, "E001", None, "off", not_run=True),
    ]
    serve = parse_serve_config('{"num_speculative_tokens": 3}', VllmVersionStatus(None, "0.34.0", "x").rules)
    report = CheckReport(
        "/d",
        "/t",
        None,
        Policy({"static": {"deep": True}}, "p.toml"),
        results,
        {"static": 0.123456},
        "alarms",
        3,
        1,
        1,
        0,
        "0.34.0",
        9.87654,
        {"k": 3},
        VllmVersionStatus(None, "0.34.0", "--vllm-version 0.34.0"),
        serve,
    )
    return _Both(report, CheckReport("/d", None, None, Policy()))


BUILDERS = {
    "calibration-record": _Record,
    "check": _check,
    "features": _features,
    "capture": _capture,
    "small": _small,
    "statuses": _statuses,
    "smoke": _smoke,
    "served": lambda: _served(False),
    "served-buckets": lambda: _served(True),
}


# Recorded from the hand-written to_dicts (before the conversion), by json.dumps of each builder.
GOLDEN: dict[str, str] = {
    "check": '[{"schema_version": 1, "draft": "/d", "target": "/t", "baseline": null, "passed": false, "verdict": "FAIL: 1 check(s) failed, 1 stage(s) the policy asks for could not run (static validation); stopped after the output alarms stage", "policy": {"source": "p.toml", "tables": {"static": {"deep": true}}}, "stopped_after": "alarms", "stages": [{"stage": "static", "title": "static validation", "status": "not-run", "seconds": 0.123}, {"stage": "features", "title": "EAGLE-3.1 features", "status": "skip", "seconds": 0.0}, {"stage": "engine", "title": "engine load", "status": "skip", "seconds": 0.0}, {"stage": "acceptance", "title": "acceptance", "status": "pass", "seconds": 0.0}, {"stage": "alarms", "title": "output alarms", "status": "fail", "seconds": 0.0}, {"stage": "baseline", "title": "baseline comparison", "status": "skip", "seconds": 0.0}, {"stage": "identity", "title": "output identity (T=0)", "status": "skip", "seconds": 0.0}, {"stage": "sampling", "title": "sampling sanity (T->0)", "status": "skip", "seconds": 0.0}, {"stage": "drift", "title": "attention drift", "status": "skip", "seconds": 0.0}, {"stage": "serve", "title": "served deployment", "status": "skip", "seconds": 0.0}], "checks": [{"name": "acceptance length", "stage": "acceptance", "status": "pass", "passed": true, "figure": 2.3457, "threshold": ">= 2", "message": "ok", "seconds": 1.235, "details": {"x": [1, 2.5]}}, {"name": "loops", "stage": "alarms", "status": "fail", "passed": false, "figure": 3, "threshold": null, "message": "bad", "seconds": 0.0, "details": {}}, {"name": "static validation", "stage": "static", "status": "not-run", "passed": null, "figure": "E001", "threshold": null, "message": "off", "seconds": 0.0, "details": {}}], "engine_starts": 3, "draft_swaps": 1, "load_checks": 1, "worker_starts": 0, "vllm_version": "0.34.0", "release": {"installed": null, "release": "0.34.0", "why": "--vllm-version 0.34.0", "outside_known_releases": false, "verified": true, "matched_by_fingerprint": null, "note": "", "known_releases": ["0.21.0", "0.34.0"], "engine_tested": false}, "serve": {"speculative_config": {"num_speculative_tokens": 3}, "max_model_len": null}, "seconds": 9.877, "settings": {"k": 3}}, {"schema_version": 1, "draft": "/d", "target": null, "baseline": null, "passed": true, "verdict": "PASS: every check the policy asks for passed; not checked (off in the policy): static validation, EAGLE-3.1 features, engine load, acceptance, output alarms, baseline comparison, output identity (T=0), sampling sanity (T->0), attention drift, served deployment", "policy": {"source": "(defaults)", "tables": {}}, "stopped_after": null, "stages": [{"stage": "static", "title": "static validation", "status": "skip", "seconds": 0.0}, {"stage": "features", "title": "EAGLE-3.1 features", "status": "skip", "seconds": 0.0}, {"stage": "engine", "title": "engine load", "status": "skip", "seconds": 0.0}, {"stage": "acceptance", "title": "acceptance", "status": "skip", "seconds": 0.0}, {"stage": "alarms", "title": "output alarms", "status": "skip", "seconds": 0.0}, {"stage": "baseline", "title": "baseline comparison", "status": "skip", "seconds": 0.0}, {"stage": "identity", "title": "output identity (T=0)", "status": "skip", "seconds": 0.0}, {"stage": "sampling", "title": "sampling sanity (T->0)", "status": "skip", "seconds": 0.0}, {"stage": "drift", "title": "attention drift", "status": "skip", "seconds": 0.0}, {"stage": "serve", "title": "served deployment", "status": "skip", "seconds": 0.0}], "checks": [], "engine_starts": 0, "draft_swaps": 0, "load_checks": 0, "worker_starts": 0, "vllm_version": null, "release": null, "serve": null, "seconds": 0.0, "settings": {}}]',
    "calibration-record": '[{"statistic": "median over calibration tokens of each aux hidden state\'s RMS (eps included), broadcast", "values": [1.123457, 0.25], "aux_layer_ids": [1, 2], "target": "/t", "prompts": "builtin", "chat_template": "none", "fit_prompts": 3, "tokens": 96, "first_step_top1_agreement_with_eagle3": {"calibrated": 0.75, "identity": 0.0, "held_out_prompts": 1, "positions": 12}}, {"statistic": "median over calibration tokens of each aux hidden state\'s RMS (eps included), broadcast", "values": [1.123457, 0.25], "aux_layer_ids": [1, 2], "target": "/t", "prompts": "builtin", "chat_template": "none", "fit_prompts": 3, "tokens": 96}]',
    "features": '[{"version": "0.34.0", "fc_norm": true, "norm_output": true, "speculators_propagates_31_flags": false, "reads_eagle_config_aux_ids": true, "num_aux_hidden_states": true, "qwen3_eagle3": true, "mla_eagle3": false, "registered_eagle3_archs": ["Eagle3LlamaForCausalLM"], "evidence": {"fc_norm": "a.py"}, "norm_before_fc": false, "mla_fc_norm_applied": false, "v2_runner_reads_eagle_config_aux_ids": false, "loader_is_lenient": false, "per_request_spec_decode_metrics": false, "package_dir": null}, {"version": null, "fc_norm": false, "norm_output": false, "speculators_propagates_31_flags": false, "reads_eagle_config_aux_ids": false, "num_aux_hidden_states": false, "qwen3_eagle3": false, "mla_eagle3": false, "registered_eagle3_archs": [], "evidence": {}, "norm_before_fc": false, "mla_fc_norm_applied": false, "v2_runner_reads_eagle_config_aux_ids": false, "loader_is_lenient": false, "per_request_spec_decode_metrics": false, "package_dir": "/v"}]',
    "capture": '[{"cache": "/c", "engine": "vllm", "engine_info": {"vllm": "0.34.0"}, "aux_layer_ids": [1, 3, 4], "sequences": 5, "shards": 2, "captured_shards": [1], "tokens": 1000, "captured_tokens": 300, "seconds": 1.235, "prefill_seconds": 0.988, "tokens_per_s": 243.0, "bytes": 10001, "bytes_per_token": 10.0}, {"cache": "c", "engine": "vllm", "engine_info": {"vllm": "0.34.0"}, "aux_layer_ids": [1, 3, 4], "sequences": 5, "shards": 2, "captured_shards": [], "tokens": 1000, "captured_tokens": 0, "seconds": 0.0, "prefill_seconds": 0.0, "tokens_per_s": 0.0, "bytes": 10001, "bytes_per_token": 10.0}]',
    "small": '[{"values": "identity", "tensors": ["fc_norm.0.weight", "fc_norm.1.weight"], "identity": ["fc_norm.0.weight"], "claim": "calibrated", "claim_source": "README.md"}, {"release": "0.34.0", "same": false, "differences": [{"kind": "config", "key": "norm_output", "a": true, "b": null, "note": "n"}, {"kind": "tensor", "key": "fc.weight", "a": [4, 8], "b": [4, 8], "note": ""}], "equivalent": ["fc_norm.0.weight: x"]}, {"name": "smoke:a", "key": "kkkkkkkk", "result": {"x": [1.5]}, "outputs": {"a/b": "d"}, "seconds": 1.235, "command": "eagle-convert smoke"}, {"name": "v", "key": "k", "result": {}, "outputs": {}, "seconds": 0.0, "command": null}, {"tensors": 3, "bytes_read": 4096, "seconds": 0.123456, "chunk_bytes": 1048576}, {"values": [1.5, 0.25], "rms": [{"median": 1.5, "mean": 1.25}], "aux_ids": [1, 2], "target": "/t", "prompts": "builtin", "chat_template": "none", "fit_prompts": 3, "tokens": 96, "held_out_prompts": 1, "positions": 12, "agreement": 0.75, "agreement_identity": null, "device": "cpu", "seconds": 2.5, "statistic": "median over calibration tokens of each aux hidden state\'s RMS (eps included), broadcast"}]',
    "statuses": '[{"installed": "0.35.0", "release": "0.34.0", "why": "the installed vLLM", "outside_known_releases": true, "verified": true, "matched_by_fingerprint": "0.34.0", "note": "0.35.0 is newer", "known_releases": ["0.21.0", "0.34.0"], "engine_tested": false}, {"installed": null, "release": "0.32.0", "why": "--vllm-version 0.32.0", "outside_known_releases": false, "verified": true, "matched_by_fingerprint": null, "note": "", "known_releases": ["0.21.0", "0.34.0"], "engine_tested": true}, {"engine": "sglang", "release": "0.5.23", "why": "--for sglang==0.5.23", "installed": "0.5.30", "outside_known_releases": true, "verified": false, "note": "newer", "known_releases": ["0.5.23"]}, {"engine": "vllm", "release": "0.34.0", "why": "x", "installed": null, "outside_known_releases": false, "verified": true, "note": "", "known_releases": ["0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"]}, {"release": "0.32.0", "package_dir": "/site/vllm", "same": false, "units": 40, "files": 7, "source": "wheel", "drifts": [{"file": "a.py", "unit": "f", "kind": "changed"}, {"file": "b.py", "unit": "*", "kind": "missing"}], "line": "the installed vLLM\'s deciding code differs from vLLM 0.32.0\'s: 1 changed, 1 missing (of 40 units in 7 files)"}, {"release": "0.34.0", "package_dir": "/site/vllm", "same": true, "units": 3, "files": 1, "source": "", "drifts": [], "line": "vLLM 0.34.0\'s deciding code matches the fingerprints eagle-convert read (3 units in 1 files)"}, {"engine": "trtllm", "release": "1.2.0", "command": "trtllm-serve /t --config speculative.yaml", "argv": ["trtllm-serve", "/t", "--config", "speculative.yaml"], "flags": {"--config": "speculative.yaml"}, "fields": {"max_draft_len": 3, "layers": [1, 3], "name": "a b"}, "config_file": "speculative.yaml", "config_text": "speculative_config:\\n  max_draft_len: 3\\n  layers: frozenset({1, 3})\\n  name: \\"a b\\"\\n", "notes": ["read the draft as trained"]}, {"engine": "vllm", "release": "0.34.0", "command": "vllm serve /t", "argv": ["vllm", "serve", "/t"], "flags": {"--speculative-config": "{\\"k\\": 3}"}, "fields": {}, "config_file": null, "config_text": null, "notes": []}, {"engine": "sglang", "source": "serve.sh", "values": {"speculative_num_steps": "3"}}]',
    "smoke": '{"target": "/t", "engine": "vllm", "engine_version": "0.34.0", "settings": {"k": 3}, "seconds": 12.346, "prompts": {"chat_template": "target", "suite": "built-in", "count": 2, "items": [{"id": "p1", "category": "code", "bucket": 0, "prompt_tokens": 3, "filler_words": 0, "provenance": {"source": "x"}}, {"id": "p2", "category": "chat", "bucket": 256, "prompt_tokens": 5, "filler_words": 17}], "skipped": [{"id": "p3", "category": "chat", "bucket": 256, "reason": "too long"}], "refused": ["refused line"]}, "drafts": [{"label": "a", "path": "/a", "variant": "EAGLE-3", "per_request": true, "load_seconds": 1.5, "total": {"acceptance_length": 2.2, "acceptance_rate": 0.4, "per_position": [0.6667, 0.4, 0.1333], "requests": 2, "prompt_tokens": 19, "generated_tokens": 50, "num_drafts": 15, "num_draft_tokens": 45, "num_accepted": 18, "accepted_per_pos": [10, 6, 2], "target_forwards": 17, "tokens_per_forward": 2.9412, "seconds": null, "tokens_per_s": null}, "sampling_control": {"temperature": 0.01, "passed": false, "summary": "with speculation at T=0.01, 2 prompts converge to greedy; without speculation 1 of 2 do", "with_speculation": {"compared": 2, "identical": 1, "passed": true, "divergences": [{"prompt": "p2", "position": 3, "expected": 11, "got": 12, "margin": 0.0625, "tolerance": 0.125, "runner_up": 12, "excused": true, "text": "prompt \'p2\' token 4: 12 instead of 11 (near-tie: top-2 margin 0.0625 <= tolerance 0.125)"}]}, "without_speculation": {"compared": 2, "identical": 1, "passed": false, "divergences": [{"prompt": "p2", "position": 4, "expected": 11, "got": 13, "margin": null, "tolerance": null, "runner_up": null, "excused": false, "text": "prompt \'p2\' token 5: 13 instead of 11"}]}, "cause": "known"}, "k_sweep": {"k_max": 3, "rounds": 15, "estimator": "AL(k) = 1 + sum(accepted_per_pos[i] for i < k) / rounds: each round\'s accepted count capped at k", "rows": [{"k": 1, "acceptance_length": 1.6667, "acceptance_rate": 0.6667, "standard_error": 0.126, "expected_speedup": 1.4913}, {"k": 2, "acceptance_length": 2.0667, "acceptance_rate": 0.5333, "standard_error": 0.2282, "expected_speedup": 1.6732}, {"k": 3, "acceptance_length": 2.2, "acceptance_rate": 0.4, "standard_error": 0.2795, "expected_speedup": 1.6263}], "step_costs": {"draft_s": 0.001234567, "target_s": 0.0105, "verify_extra_s": 0.0, "draft_to_target": 0.117578, "source": "reference"}, "recommended_k": 2, "recommended_speedup": 1.6732, "at_edge": false}, "groups": [{"category": "code", "bucket": 0, "acceptance_length": 2.5556, "acceptance_rate": 0.5185, "per_position": [0.7778, 0.5556, 0.2222], "requests": 1, "prompt_tokens": 12, "generated_tokens": 30, "num_drafts": 9, "num_draft_tokens": 27, "num_accepted": 14, "accepted_per_pos": [7, 5, 2], "target_forwards": 10, "tokens_per_forward": 3.0, "seconds": 1.2346, "tokens_per_s": 24.3}, {"category": "all", "bucket": null, "acceptance_length": 1.6667, "acceptance_rate": 0.2222, "per_position": [0.5, 0.1667, 0.0], "requests": 1, "prompt_tokens": 7, "generated_tokens": 20, "num_drafts": 6, "num_draft_tokens": 18, "num_accepted": 4, "accepted_per_pos": [3, 1, 0], "target_forwards": 7, "tokens_per_forward": 2.8571, "seconds": null, "tokens_per_s": null}], "requests": [{"id": "p1", "category": "code", "bucket": 0, "acceptance_length": 2.5556, "acceptance_rate": 0.5185, "per_position": [0.7778, 0.5556, 0.2222], "requests": 1, "prompt_tokens": 12, "generated_tokens": 30, "num_drafts": 9, "num_draft_tokens": 27, "num_accepted": 14, "accepted_per_pos": [7, 5, 2], "target_forwards": 10, "tokens_per_forward": 3.0, "seconds": 1.2346, "tokens_per_s": 24.3}, {"id": "p2", "category": "chat", "bucket": 256, "acceptance_length": 1.6667, "acceptance_rate": 0.2222, "per_position": [0.5, 0.1667, 0.0], "requests": 1, "prompt_tokens": 7, "generated_tokens": 20, "num_drafts": 6, "num_draft_tokens": 18, "num_accepted": 4, "accepted_per_pos": [3, 1, 0], "target_forwards": 7, "tokens_per_forward": 2.8571, "seconds": null, "tokens_per_s": null}]}, {"label": "b", "path": "/b", "variant": null, "per_request": false, "load_seconds": null, "total": {"acceptance_length": 1.0, "acceptance_rate": 0.0, "per_position": [], "requests": 0, "prompt_tokens": 0, "generated_tokens": 0, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted": 0, "accepted_per_pos": [], "target_forwards": 0, "tokens_per_forward": 0.0, "seconds": 0.0, "tokens_per_s": null}, "sampling_control": null, "k_sweep": null, "groups": [], "requests": [{"id": "p1", "category": "code", "bucket": 0}]}], "deltas": [{"draft": "b", "baseline": "a", "acceptance_length": -0.1235, "acceptance_rate": 0.0457, "per_position": [0.1111, -0.2], "tokens_per_s_ratio": 1.235, "groups": [{"category": "code", "bucket": 0, "acceptance_length": 0.5556}, {"category": "all", "bucket": null, "acceptance_length": -1.0}]}], "throughput": {"concurrency": [1, 4], "device": "cpu", "engine_version": "0.34.0", "settings": {"x": 1}, "note": "measured on a CPU: what speculation saves here depends on what one decode step costs on this machine (fixed per-step overhead for a tiny model, compute for a large one, where verifying k+1 tokens costs nearly k+1 steps), not on a GPU\'s memory-bound step, where verifying k+1 tokens costs about as much as one. These speedups do not predict a GPU deployment; the acceptance lengths beside them do carry over.", "metric": "per-user decode tokens/s: median over requests of (tokens - 1) / (last - first token time)", "baseline": {"label": "no speculation", "path": null, "levels": [{"concurrency": 1, "requests": 4, "per_user_tokens_per_s": 12.346, "min_per_user_tokens_per_s": 11.111, "max_per_user_tokens_per_s": 14.0, "ttft_s": 0.0123, "acceptance_length": null}, {"concurrency": 4, "requests": 4, "per_user_tokens_per_s": 9.877, "min_per_user_tokens_per_s": 9.0, "max_per_user_tokens_per_s": 10.5, "ttft_s": 0.5, "acceptance_length": null}]}, "drafts": [{"label": "a", "path": "/a", "levels": [{"concurrency": 1, "requests": 4, "per_user_tokens_per_s": 20.123, "min_per_user_tokens_per_s": 19.0, "max_per_user_tokens_per_s": 21.0, "ttft_s": 0.01, "acceptance_length": 2.3457}, {"concurrency": 4, "requests": 4, "per_user_tokens_per_s": 9.0, "min_per_user_tokens_per_s": 8.0, "max_per_user_tokens_per_s": 9.5, "ttft_s": 0.02, "acceptance_length": 2.1}]}], "speedup": {"a": {"1": 1.63, "4": 0.9113}}}}',
    "served": '{"target": "/models/t", "engine": "server", "engine_version": "vllm 0.34.0", "settings": {"max_new_tokens": 64}, "seconds": 9.877, "interrupted": false, "prompts": {"chat_template": "server", "suite": "built-in", "count": 3, "items": [{"id": "p1", "category": "code", "bucket": 0, "prompt_tokens": 12, "filler_words": 0}, {"id": "p2", "category": "chat", "bucket": 0, "prompt_tokens": 9, "filler_words": 0}, {"id": "p3", "category": "chat", "bucket": 0, "prompt_tokens": 0, "filler_words": 0}], "skipped": [], "refused": []}, "drafts": [{"label": "a", "path": "http://a", "variant": null, "per_request": false, "load_seconds": null, "total": {"acceptance_length": 2.25, "acceptance_rate": 0.4167, "per_position": [0.6, 0.45, 0.2], "requests": 2, "prompt_tokens": 21, "generated_tokens": 50, "num_drafts": 20, "num_draft_tokens": 60, "num_accepted": 25, "accepted_per_pos": [12, 9, 4], "target_forwards": 22, "tokens_per_forward": 2.2727, "seconds": 3.4568, "tokens_per_s": 14.46}, "sampling_control": null, "k_sweep": null, "groups": [], "requests": []}], "deltas": [], "throughput": {"concurrency": [1, 4], "device": "server", "engine_version": "vllm 0.34.0", "settings": {"max_new_tokens": 64}, "note": null, "metric": "per-user decode tokens/s: the engine\'s (vllm:request_decode_time_seconds and vllm:request_generation_tokens deltas: tokens after the first over decode time), else the median over requests of (tokens - 1) / (last - first streamed token time)", "baseline": {"label": "no speculation", "path": "http://b", "levels": [{"concurrency": 1, "requests": 2, "per_user_tokens_per_s": 22.05, "min_per_user_tokens_per_s": 21.0, "max_per_user_tokens_per_s": 23.1, "ttft_s": 0.0162, "acceptance_length": null}]}, "drafts": [{"label": "a", "path": "http://a", "levels": [{"concurrency": 1, "requests": 2, "per_user_tokens_per_s": 35.385, "min_per_user_tokens_per_s": 35.385, "max_per_user_tokens_per_s": 35.385, "ttft_s": 0.0162, "acceptance_length": 2.25}]}], "speedup": {"a": {"1": 1.8765, "4": null}}}, "servers": [{"label": "a", "url": "http://a", "model": "m", "root": "/models/t", "max_model_len": 4096, "engine": "vllm 0.34.0", "k": 3, "identity": ["root names the target"], "speculative_config": {"method": "eagle3", "num_speculative_tokens": 3}, "levels": [{"concurrency": 1, "bucket": 0, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": 2.25, "per_position": [0.6, 0.45, 0.2], "num_drafts": 20, "num_draft_tokens": 60, "num_accepted": 25, "accepted_per_pos": [12, 9, 4], "per_user_tokens_per_s": 35.385, "rate_source": "engine", "engine_tokens_per_s": 35.385, "stream_tokens_per_s": 42.0, "speedup_source": "engine", "ttft_s": 0.0162, "speedup": 1.8765, "seconds": 3.457, "no_figure": null, "notes": []}, {"concurrency": 4, "bucket": 256, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 10, "num_draft_tokens": 30, "num_accepted": 11, "accepted_per_pos": [6, 4, 1], "per_user_tokens_per_s": null, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": null, "speedup_source": null, "ttft_s": null, "speedup": null, "seconds": 2.5, "no_figure": "counters did not move", "notes": ["other traffic"]}]}], "baseline_server": {"label": "no speculation", "url": "http://b", "model": "m", "root": "/models/t", "max_model_len": 4096, "engine": "vllm 0.34.0", "k": null, "identity": [], "speculative_config": null, "levels": [{"concurrency": 1, "bucket": 0, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted": 0, "accepted_per_pos": [], "per_user_tokens_per_s": 22.05, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": 22.05, "speedup_source": null, "ttft_s": 0.0162, "speedup": null, "seconds": 4.0, "no_figure": null, "notes": []}, {"concurrency": 4, "bucket": 256, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted": 0, "accepted_per_pos": [], "per_user_tokens_per_s": 15.75, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": 15.75, "speedup_source": null, "ttft_s": 0.0162, "speedup": null, "seconds": 3.0, "no_figure": null, "notes": []}]}}',
    "served-buckets": '{"target": "/models/t", "engine": "server", "engine_version": "vllm 0.34.0", "settings": {"max_new_tokens": 64}, "seconds": 9.877, "interrupted": false, "prompts": {"chat_template": "server", "suite": "built-in", "count": 4, "items": [{"id": "p1", "category": "code", "bucket": 0, "prompt_tokens": 12, "filler_words": 0}, {"id": "p2", "category": "chat", "bucket": 0, "prompt_tokens": 9, "filler_words": 0}, {"id": "p3", "category": "chat", "bucket": 0, "prompt_tokens": 0, "filler_words": 0}, {"id": "p1", "category": "code", "bucket": 256, "prompt_tokens": 260, "filler_words": 40}], "skipped": [{"id": "p2", "category": "chat", "bucket": 256, "reason": "too long"}], "refused": []}, "drafts": [{"label": "a", "path": "http://a", "variant": null, "per_request": false, "load_seconds": null, "total": {"acceptance_length": 2.25, "acceptance_rate": 0.4167, "per_position": [0.6, 0.45, 0.2], "requests": 2, "prompt_tokens": 21, "generated_tokens": 50, "num_drafts": 20, "num_draft_tokens": 60, "num_accepted": 25, "accepted_per_pos": [12, 9, 4], "target_forwards": 22, "tokens_per_forward": 2.2727, "seconds": 3.4568, "tokens_per_s": 14.46}, "sampling_control": null, "k_sweep": null, "groups": [], "requests": []}], "deltas": [], "throughput": {"concurrency": [1, 4], "device": "server", "engine_version": "vllm 0.34.0", "settings": {"max_new_tokens": 64}, "note": null, "metric": "per-user decode tokens/s: the engine\'s (vllm:request_decode_time_seconds and vllm:request_generation_tokens deltas: tokens after the first over decode time), else the median over requests of (tokens - 1) / (last - first streamed token time)", "baseline": {"label": "no speculation", "path": "http://b", "levels": [{"concurrency": 1, "requests": 2, "per_user_tokens_per_s": 22.05, "min_per_user_tokens_per_s": 21.0, "max_per_user_tokens_per_s": 23.1, "ttft_s": 0.0162, "acceptance_length": null}]}, "drafts": [{"label": "a", "path": "http://a", "levels": [{"concurrency": 1, "requests": 2, "per_user_tokens_per_s": 35.385, "min_per_user_tokens_per_s": 35.385, "max_per_user_tokens_per_s": 35.385, "ttft_s": 0.0162, "acceptance_length": 2.25}]}], "speedup": {"a": {"1": 1.8765, "4": null}}}, "servers": [{"label": "a", "url": "http://a", "model": "m", "root": "/models/t", "max_model_len": 4096, "engine": "vllm 0.34.0", "k": 3, "identity": ["root names the target"], "speculative_config": {"method": "eagle3", "num_speculative_tokens": 3}, "levels": [{"concurrency": 1, "bucket": 0, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": 2.25, "per_position": [0.6, 0.45, 0.2], "num_drafts": 20, "num_draft_tokens": 60, "num_accepted": 25, "accepted_per_pos": [12, 9, 4], "per_user_tokens_per_s": 35.385, "rate_source": "engine", "engine_tokens_per_s": 35.385, "stream_tokens_per_s": 42.0, "speedup_source": "engine", "ttft_s": 0.0162, "speedup": 1.8765, "seconds": 3.457, "no_figure": null, "notes": []}, {"concurrency": 4, "bucket": 256, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 10, "num_draft_tokens": 30, "num_accepted": 11, "accepted_per_pos": [6, 4, 1], "per_user_tokens_per_s": null, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": null, "speedup_source": null, "ttft_s": null, "speedup": null, "seconds": 2.5, "no_figure": "counters did not move", "notes": ["other traffic"]}]}], "baseline_server": {"label": "no speculation", "url": "http://b", "model": "m", "root": "/models/t", "max_model_len": 4096, "engine": "vllm 0.34.0", "k": null, "identity": [], "speculative_config": null, "levels": [{"concurrency": 1, "bucket": 0, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted": 0, "accepted_per_pos": [], "per_user_tokens_per_s": 22.05, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": 22.05, "speedup_source": null, "ttft_s": 0.0162, "speedup": null, "seconds": 4.0, "no_figure": null, "notes": []}, {"concurrency": 4, "bucket": 256, "requests": 3, "failed": 1, "failures": {"timeout": 1}, "output_tokens": 50, "acceptance_length": null, "per_position": null, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted": 0, "accepted_per_pos": [], "per_user_tokens_per_s": 15.75, "rate_source": "stream", "engine_tokens_per_s": null, "stream_tokens_per_s": 15.75, "speedup_source": null, "ttft_s": 0.0162, "speedup": null, "seconds": 3.0, "no_figure": null, "notes": []}]}}',
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_json_is_unchanged_by_the_conversion(name: str) -> None:
    assert json.dumps(BUILDERS[name]().to_dict()) == GOLDEN[name]


def _inspect() -> Any:
    from dataclasses import replace

    from eagle_convert.draft import inspect_checkpoint
    from eagle_convert.vllm_model.versions import VllmVersionStatus

    report = inspect_checkpoint("specforge-eagle31", vllm_version="0.34.0")
    return replace(report, vllm=VllmVersionStatus(None, "0.34.0", "--vllm-version 0.34.0"))  # not the installed one


def test_inspect_json_of_a_real_draft_is_unchanged(built_fixtures, monkeypatch) -> None:
    """On a fixture draft named by a relative path (the JSON names it)."""
    monkeypatch.chdir(built_fixtures("specforge-eagle31").parent)
    assert json.dumps(_inspect().to_dict()) == INSPECT


INSPECT = '{"schema_version": 2, "source": "specforge-eagle31", "is_hub": false, "has_config": true, "layout": "specforge", "producer": "sgl-project/SpecForge (and most community drafts)", "layout_reasons": ["tensor names start with \'midlayer.\' (e.g. \'midlayer.hidden_norm.weight\')"], "attention": "llama", "attention_reason": "standard q/k/v/o projections", "architectures": ["LlamaForCausalLMEagle3"], "vllm_architecture": "LlamaForCausalLMEagle3", "vllm_class": "Eagle3LlamaForCausalLM", "vllm_note": null, "model_type": "llama", "variant": "EAGLE-3.1", "variant_reasons": ["fc_norm is true (fc_norm)", "norm_output is true (norm_output)", "has 3 fc_norm.i tensors"], "flags": {"fc_norm": {"value": true, "where": ["fc_norm"], "vllm": true}, "norm_output": {"value": true, "where": ["norm_output"], "vllm": true}, "norm_before_fc": {"value": false, "where": [], "vllm": false}, "norm_before_residual": {"value": false, "where": [], "vllm": false}}, "hidden_size": 64, "target_hidden_size": 64, "num_aux": 3, "num_aux_source": "fc.weight width 192 / target_hidden_size 64", "aux_layer_ids": [1, 3, 4], "aux_layer_ids_where": ["eagle_config.eagle_aux_hidden_state_layer_ids"], "num_layers": 1, "vocab_size": 256, "draft_vocab_size": 128, "vocab": {"reduced": true, "d2t": {"shape": [128], "dtype": "I64", "min_target_id": 0, "max_target_id": 255, "unique": true, "increasing": true}, "t2d": {"shape": [256], "dtype": "BOOL", "count": 128, "consistent_with_d2t": true}}, "has_embed": false, "dtypes": {"I64": 1, "BF16": 16, "BOOL": 1}, "num_tensors": 18, "total_bytes": 133248, "storage": "single", "files": ["model.safetensors"], "vllm": {"installed": null, "release": "0.34.0", "why": "--vllm-version 0.34.0", "outside_known_releases": false, "verified": true, "matched_by_fingerprint": null, "note": "", "known_releases": ["0.21.0", "0.34.0"], "engine_tested": false}, "fc_norm": {"values": "trained", "tensors": ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"], "identity": [], "claim": null, "claim_source": ""}, "tensors": [{"name": "d2t", "canonical": "d2t", "dtype": "I64", "shape": [128], "bytes": 1024, "file": "model.safetensors"}, {"name": "fc.weight", "canonical": "fc.weight", "dtype": "BF16", "shape": [64, 192], "bytes": 24576, "file": "model.safetensors"}, {"name": "fc_norm.0.weight", "canonical": "fc_norm.0.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "fc_norm.1.weight", "canonical": "fc_norm.1.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "fc_norm.2.weight", "canonical": "fc_norm.2.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "lm_head.weight", "canonical": "lm_head.weight", "dtype": "BF16", "shape": [128, 64], "bytes": 16384, "file": "model.safetensors"}, {"name": "midlayer.hidden_norm.weight", "canonical": "layers.0.hidden_norm.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "midlayer.input_layernorm.weight", "canonical": "layers.0.input_layernorm.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "midlayer.mlp.down_proj.weight", "canonical": "layers.0.mlp.down_proj.weight", "dtype": "BF16", "shape": [64, 128], "bytes": 16384, "file": "model.safetensors"}, {"name": "midlayer.mlp.gate_proj.weight", "canonical": "layers.0.mlp.gate_proj.weight", "dtype": "BF16", "shape": [128, 64], "bytes": 16384, "file": "model.safetensors"}, {"name": "midlayer.mlp.up_proj.weight", "canonical": "layers.0.mlp.up_proj.weight", "dtype": "BF16", "shape": [128, 64], "bytes": 16384, "file": "model.safetensors"}, {"name": "midlayer.post_attention_layernorm.weight", "canonical": "layers.0.post_attention_layernorm.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "midlayer.self_attn.k_proj.weight", "canonical": "layers.0.self_attn.k_proj.weight", "dtype": "BF16", "shape": [32, 128], "bytes": 8192, "file": "model.safetensors"}, {"name": "midlayer.self_attn.o_proj.weight", "canonical": "layers.0.self_attn.o_proj.weight", "dtype": "BF16", "shape": [64, 64], "bytes": 8192, "file": "model.safetensors"}, {"name": "midlayer.self_attn.q_proj.weight", "canonical": "layers.0.self_attn.q_proj.weight", "dtype": "BF16", "shape": [64, 128], "bytes": 16384, "file": "model.safetensors"}, {"name": "midlayer.self_attn.v_proj.weight", "canonical": "layers.0.self_attn.v_proj.weight", "dtype": "BF16", "shape": [32, 128], "bytes": 8192, "file": "model.safetensors"}, {"name": "norm.weight", "canonical": "norm.weight", "dtype": "BF16", "shape": [64], "bytes": 128, "file": "model.safetensors"}, {"name": "t2d", "canonical": "t2d", "dtype": "BOOL", "shape": [256], "bytes": 256, "file": "model.safetensors"}]}'


# Where each pinned result's objects are described: (result, path in its JSON, schema, pointer in the schema).
SCHEMA_OBJECTS = [
    ("smoke", "", "smoke-report", ""),
    ("smoke", "drafts/0", "smoke-report", "properties/drafts/items"),
    ("smoke", "drafts/0/total", "smoke-report", "$defs/counts"),
    ("smoke", "drafts/0/k_sweep", "smoke-report", "$defs/kSweep"),
    ("smoke", "drafts/0/sampling_control/with_speculation", "smoke-report", "$defs/comparison"),
    ("smoke", "throughput/baseline", "smoke-report", "$defs/engineRates"),
    ("served", "", "smoke-report", ""),
    ("served", "servers/0", "smoke-report", "$defs/servedServer"),
    ("served", "servers/0/levels/0", "smoke-report", "$defs/servedLevel"),
    ("capture", "0", "capture-report", ""),
    ("inspect", "", "inspect-report", ""),
]


def _at(node: Any, path: str) -> Any:
    for part in filter(None, path.split("/")):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


@pytest.mark.parametrize(("name", "path", "schema", "pointer"), SCHEMA_OBJECTS)
def test_every_key_written_is_in_its_schema(name: str, path: str, schema: str, pointer: str) -> None:
    """The schemas allow new fields, so validating an output never notices an undescribed key; this does."""
    from eagle_convert.draft import load_schema

    obj = _at(json.loads(INSPECT if name == "inspect" else GOLDEN[name]), path)
    spec = _at(load_schema(f"{schema}.schema.json"), pointer)
    assert sorted(set(obj) - set(spec["properties"])) == []
    assert sorted(set(spec.get("required", ())) - set(obj)) == []


def test_derived_readers_read_back_what_was_written() -> None:
    """The readers `load` derives: a stage record (seconds as written, 3 digits) and smoke's throughput."""
    from eagle_convert.measure.throughput import ThroughputReport
    from eagle_convert.report.cache import StageRecord

    rec = StageRecord("smoke:a", "k", {"x": [1.5]}, {"a/b": "d"}, 1.2345, "eagle-convert smoke")
    assert StageRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == replace(rec, seconds=1.234)
    assert StageRecord.from_dict({"name": "v", "key": "k", "result": {}}) == StageRecord("v", "k", {})
    tput = _smoke().throughput
    written = tput.to_dict()
    again = ThroughputReport.from_dict(json.loads(json.dumps(written))).to_dict()
    # The rates are written rounded (rounding again changes nothing); the speedups are computed from them.
    assert {**again, "speedup": None} == {**written, "speedup": None}
