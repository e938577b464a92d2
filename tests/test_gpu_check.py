"""scripts/gpu_check.py on a machine without a GPU: it starts, says in one line that there is no CUDA
device (exit 2), needs neither click, rich nor vLLM, and a failing check is one clear line (exit 1).
Its decisions on GPU results the CPU cannot produce (counters or accuracies that differ, a vLLM
smoke with impossible counters) are tested with faked runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
# Run the script with some top-level modules made unimportable (sys.modules[name] = None).
BLOCKED_RUN = """
import runpy, sys
for name in sys.argv[1].split(","):
    if name:
        sys.modules[name] = None
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_script(*args: str, blocked: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The script as a bare GPU machine runs it: from the source tree, no GPU visible, offline."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, blocked, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=600,
    )


def test_no_cuda_device_is_one_line_and_exit_2_without_click_rich_or_vllm() -> None:
    """A GPU machine may have only torch, transformers and safetensors: every module the checks use
    is imported before the device check, here with the CLI's and vLLM's packages unimportable."""
    res = run_script(blocked="click,rich,vllm,matplotlib,jsonschema")
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout.splitlines() == [res.stdout.strip()]
    assert res.stdout.startswith("gpu-check: no CUDA device (torch ") and "nothing was checked" in res.stdout
    assert "Traceback" not in res.stderr


def test_missing_torch_is_one_line_and_exit_2() -> None:
    res = run_script(blocked="torch")
    assert res.returncode == 2, res.stderr
    assert res.stdout.strip() == "gpu-check: torch not installed: nothing was checked"


def test_help_documents_the_exit_codes() -> None:
    res = run_script("--help")
    assert res.returncode == 0 and "exit codes: 0 passed, 1 a check failed, 2 nothing checked" in res.stdout


def test_a_failing_check_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    """--device cpu runs the checks on the CPU; a draft that cannot be read fails `prepare` clearly."""
    from fixtures.target import build_target

    build_target(tmp_path / "pair" / "target")
    draft = tmp_path / "pair" / "draft"
    draft.mkdir()
    (draft / "config.json").write_text("{}")
    (draft / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    res = run_script(
        "--device",
        "cpu",
        "--only",
        "reference",
        "--pair",
        str(tmp_path / "pair"),
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(tmp_path / "out"),
    )
    assert res.returncode == 1, res.stdout + res.stderr
    fails = [line for line in res.stdout.splitlines() if line.lstrip().startswith("FAIL prepare:")]
    assert len(fails) == 1 and "model.safetensors" in fails[0] and "traceback:" in fails[0], res.stdout
    assert "Traceback (most recent call last)" not in res.stdout
    assert "Traceback (most recent call last)" in (tmp_path / "work" / "gpu-check.log").read_text()
    assert "result: 0 passed, 0 passed with a note, 1 failed, 0 skipped" in res.stdout
    summary = json.loads((tmp_path / "out" / "gpu-check.json").read_text())  # --out: where the device tool looks
    assert summary["counts"] == {"PASS": 0, "WARN": 0, "FAIL": 1, "SKIP": 0}
    assert [(o["name"], o["status"]) for o in summary["outcomes"]] == [("prepare", "FAIL")]


@pytest.mark.slow
def test_cpu_self_test_passes_the_reference_and_finetune_checks(tmp_path: Path) -> None:
    """The GPU run's path on the CPU: the trained pair, both smokes, both fine-tunes. CPU against CPU
    only takes the "equal" branches; the others are the faked-run tests below."""
    res = run_script("--device", "cpu", "--only", "reference", "--only", "finetune", "--work", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS reference engine on cpu: counters equal the CPU run's at T=0" in res.stdout
    assert "PASS finetune on cpu: step acc" in res.stdout
    assert "result: 3 passed" in res.stdout


@pytest.mark.slow
def test_cpu_self_test_runs_capture_and_every_step_of_the_large_pair(tmp_path: Path) -> None:
    """capture CPU against CPU on the trained pair, then the large pair's build and five steps at toy
    size: the code the GPU run takes at 8B shape, each step timed in the JSON summary."""
    res = run_script("--device", "cpu", "--only", "capture", "--only", "large", "--work", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS capture --engine reference on cpu: " in res.stdout and "sequences equal: True" in res.stdout
    assert "result: 8 passed, 0 passed with a note, 0 failed, 0 skipped" in res.stdout
    outcomes = json.loads((tmp_path / "gpu-check.json").read_text())["outcomes"]
    assert [o["name"] for o in outcomes][2:] == [
        "small pair: build",
        *(
            f"small pair: {step} on cpu"
            for step in ("upgrade --init calibrated", "smoke --engine reference", "drift", "finetune")
        ),
        "small pair: capture --engine reference on cpu",
    ]
    assert all(o["seconds"] > 0 for o in outcomes[1:])


# ------------------------------------------------------------------ decisions, with faked runs


@pytest.fixture(scope="module")
def script() -> Iterator[ModuleType]:
    """The script as a module (registered first: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["gpu_check"]


@pytest.fixture
def make_run(script: ModuleType, tmp_path: Path):
    """make_run(device): the script's Run in tmp_path (its log closed afterwards)."""
    runs = []

    def make(device: str):
        runs.append(script.Run(tmp_path, 60, device))
        return runs[-1]

    yield make
    for run in runs:
        run.log.close()


def _counts(drafts: int, accepted_per_pos: list[int]):
    from eagle_convert.measure.results import Counts

    return Counts(
        num_drafts=drafts,
        num_draft_tokens=3 * drafts,
        num_accepted=sum(accepted_per_pos),
        accepted_per_pos=accepted_per_pos,
    )


def _report(*totals, requests=None) -> SimpleNamespace:
    """A smoke report with one draft per Counts in `totals` (its one request, unless `requests`)."""
    drafts = [
        SimpleNamespace(
            label=f"draft{i}",
            path=f"/drafts/{i}",
            total=t,
            requests=[SimpleNamespace(prompt_id="p1", counts=r) for r in ([t] if requests is None else [requests[i]])],
        )
        for i, t in enumerate(totals)
    ]
    prompts = SimpleNamespace(prompts=[SimpleNamespace(id="p1", token_ids=[1, 2, 3])])
    return SimpleNamespace(drafts=drafts, prompts=prompts, engine_version="reference 0.0", seconds=12.0)


def _fake_reference(monkeypatch, *, continuations: dict[str, list[int]], gap: float) -> list:
    """check_reference's second smoke run (the "GPU" one) counts differently on draft1; the replay
    decodes `continuations[device]` and the CPU's top-2 logits there are `gap` apart."""
    import torch

    import eagle_convert.measure.smoke
    import eagle_convert.reference.loop
    import eagle_convert.reference.target

    same, other = _counts(4, [3, 2, 1]), _counts(4, [2, 1, 0])
    runs = iter([_report(same, same), _report(same, same, requests=[same, other])])
    monkeypatch.setattr(eagle_convert.measure.smoke, "run_smoke", lambda *a, **kw: next(runs))
    forwards: list = []

    class Target:
        def __init__(self, device: str) -> None:
            self.device = device

        @classmethod
        def from_pretrained(cls, path, device: str):  # noqa: ANN001, ANN206
            return cls(device)

        def forward(self, ids, aux_ids):  # noqa: ANN001, ANN201
            forwards.append(ids.tolist())
            return SimpleNamespace(logits=torch.tensor([[[0.0, 5.0, 5.0 - gap]]]))

    monkeypatch.setattr(eagle_convert.reference.target, "TargetModel", Target)
    monkeypatch.setattr(eagle_convert.reference.loop, "greedy_generate", lambda t, ids, n: continuations[t.device])
    return forwards


def test_reference_counters_differ_at_a_near_tie_warns(script, make_run, monkeypatch, tmp_path: Path) -> None:
    forwards = _fake_reference(monkeypatch, continuations={"cpu": [7, 8, 9], "cuda:0": [7, 8, 4]}, gap=1e-3)
    out = script.check_reference(make_run("cuda:0"), tmp_path, [tmp_path / "a", tmp_path / "b"])
    assert (out.name, out.status) == ("reference engine on cuda:0", "WARN")
    assert out.detail == (
        "counters differ from the CPU run's for draft1 on request p1 ((4, 6, (3, 2, 1)) vs (4, 3, (2, 1, 0))): "
        "the target's greedy continuation differs at token 2 (CPU top-2 logit gap 1.00e-03: "
        "a near-tie that CPU and GPU float kernels break differently)"
    )
    assert forwards == [[[1, 2, 3, 7, 8]]]  # the prompt and the common continuation


def test_reference_counters_differ_without_a_tie_fail(script, make_run, monkeypatch, tmp_path: Path) -> None:
    _fake_reference(monkeypatch, continuations={"cpu": [7, 8, 9], "cuda:0": [6, 8, 9]}, gap=0.5)
    out = script.check_reference(make_run("cuda:0"), tmp_path, [tmp_path / "a", tmp_path / "b"])
    assert out.status == "FAIL"
    assert out.detail.endswith(
        "the target's greedy continuation differs at token 0 (CPU top-2 logit gap 5.00e-01: not a tie)"
    )


def test_reference_counters_differ_with_the_same_target_tokens_warns(
    script, make_run, monkeypatch, tmp_path: Path
) -> None:
    forwards = _fake_reference(monkeypatch, continuations={"cpu": [7, 8], "cuda:0": [7, 8]}, gap=0.5)
    out = script.check_reference(make_run("cuda:0"), tmp_path, [tmp_path / "a", tmp_path / "b"])
    assert out.status == "WARN" and forwards == []
    assert out.detail.endswith(
        "the target decodes the same tokens on both devices, so the drafts' proposals differ "
        "(drafter float kernels at a near-tie)"
    )


@pytest.mark.parametrize("second", [0.3, 0.15])
def test_finetune_accuracy_gap_decides(script, make_run, monkeypatch, tmp_path: Path, second: float) -> None:
    import eagle_convert.finetune.run
    import eagle_convert.validate.run

    runs = iter(
        [
            SimpleNamespace(step_acc_before=[0.1, 0.0], step_acc_after=[0.5, 0.1], seconds=3.0),
            SimpleNamespace(step_acc_before=[0.1, 0.0], step_acc_after=[0.5, second], seconds=2.0),
        ]
    )
    monkeypatch.setattr(eagle_convert.finetune.run, "finetune_draft", lambda *a, **kw: next(runs))
    monkeypatch.setattr(eagle_convert.validate.run, "validate_checkpoint", lambda path: SimpleNamespace(errors=[]))
    out = script.check_finetune(make_run("cpu"), tmp_path, tmp_path / "up")
    detail = (
        f"step acc [0.10, 0.00] -> [0.50, {second:.2f}] in 2s (CPU: [0.10, 0.00] -> [0.50, 0.10] in 3s); "
        "written draft validates: True"
    )
    if second == 0.15:  # a gap of 0.05: within the tolerance
        assert (out.status, out.detail) == ("PASS", detail)
    else:
        assert (out.name, out.status) == ("finetune on cpu", "FAIL")
        assert out.detail == f"{detail}; largest per-step gap 0.200 > 0.1"


def test_vllm_smoke_passes_possible_counters(script) -> None:
    out = script.vllm_smoke_outcome(_report(_counts(4, [4, 4, 4]), _counts(4, [0, 0, 0])), k=3)
    assert (out.name, out.status) == ("smoke --engine vllm", "PASS")
    assert out.detail == "AL 4.00 / 1.00 (EAGLE-3 / EAGLE-3.1 identity upgrade), reference 0.0, 12s"


def test_vllm_smoke_without_draft_rounds_fails(script) -> None:
    """No rounds: vLLM never speculated with the draft, though its AL reads 1.0."""
    out = script.vllm_smoke_outcome(_report(_counts(4, [2, 1, 0]), _counts(0, [])), k=3)
    assert out.status == "FAIL" and out.detail.endswith("12s; draft1: no draft rounds")


def test_vllm_smoke_with_an_impossible_acceptance_length_fails(script) -> None:
    """A round emits at most k + 1 tokens: AL 5 at k = 3 is a counting bug."""
    out = script.vllm_smoke_outcome(_report(_counts(2, [4, 4, 0]), _counts(4, [1, 0, 0])), k=3)
    assert out.status == "FAIL" and out.detail.endswith("12s; draft0: AL outside [1, 4]")


def _drift_report(verdict: str, sink: float, rms: float) -> SimpleNamespace:
    row = SimpleNamespace(sink=sink, context=1 - sink, own=0.0, fed_rms=rms)
    v = SimpleNamespace(status=verdict, sink_min=sink)
    return SimpleNamespace(
        drafts=[SimpleNamespace(label="d", verdict=v, overall=SimpleNamespace(depths=[row]))], seconds=1.0
    )


@pytest.mark.parametrize(
    ("gpu", "status", "tail"),
    [
        (("stable", 0.50, 1.0), "PASS", "fed-back RMS 0.00% in 1.0s (CPU 1.0s)"),
        (("stable", 0.45, 1.0), "WARN", "(beyond 0.02 / 2%: the decoded tokens may differ at a near-tie)"),
        (("drifts", 0.50, 1.0), "FAIL", "d: verdict stable on the CPU, drifts on cuda:0"),
        (("stable", 0.50, float("nan")), "FAIL", "a share or RMS is not finite"),
    ],
)
def test_drift_comparison_decides(script, make_run, monkeypatch, tmp_path: Path, gpu, status: str, tail: str) -> None:
    import eagle_convert.drift

    runs = iter([_drift_report("stable", 0.50, 1.0), _drift_report(*gpu)])
    monkeypatch.setattr(eagle_convert.drift, "run_drift", lambda *a, **kw: next(runs))
    out = script.check_drift(make_run("cuda:0"), tmp_path, [tmp_path / "d"])
    assert (out.name, out.status) == ("drift on cuda:0", status)
    assert out.detail.endswith(tail), out.detail


def test_compare_caches_measures_each_kind_and_the_token_ids(script, tmp_path: Path) -> None:
    """Real safetensors shards: the relative gap per tensor kind, ids that differ, a NaN."""
    import torch
    from safetensors.torch import save_file

    aux = torch.ones(4, 8)
    base = {"s0.ids": torch.tensor([1, 2, 3, 4]), "s0.aux": aux, "s0.logits": torch.full((4, 6), 2.0)}
    for name, t in (("a", base), ("b", {**base, "s0.aux": aux + 1e-4, "s0.logits": base["s0.logits"] * 1.01})):
        (tmp_path / name).mkdir()
        save_file(t, str(tmp_path / name / "shard-00000.safetensors"))
    gaps, same, finite = script.compare_caches(tmp_path / "a", tmp_path / "b")
    assert same and finite
    assert gaps["aux"] == pytest.approx(1e-4, rel=1e-3) and gaps["logits"] == pytest.approx(0.01, rel=1e-3)
    (tmp_path / "c").mkdir()
    save_file(
        {**base, "s0.ids": torch.tensor([1, 2, 3, 5]), "s0.aux": aux * float("nan")},
        str(tmp_path / "c" / "shard-00000.safetensors"),
    )
    _, same, finite = script.compare_caches(tmp_path / "a", tmp_path / "c")
    assert not same and not finite
