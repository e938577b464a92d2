"""`smoke --engine vllm` at T > 0 runs the T -> 0 sampling control once per engine and warns loudly
when the engine fails it. The engine is replaced by recorded answers here (the real vLLM run of the
same control is in tests/test_check_vllm.py), so the wiring is checked without an engine start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.vllm import EngineRun, EngineSession, PassResult
from eagle_convert.vllm_model.features import vllm_available

pytestmark = pytest.mark.skipif(not vllm_available(), reason="smoke --engine vllm checks that vLLM is installed")

GEN = 6


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("smoke-control")
    return {"target": build_target(base / "target"), "draft": build_draft(base / "draft", VLLM_TINY)}


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch):
    """Replace the engine: greedy gives 1..6 with clear margins; T = eps gives `eps_output`."""
    calls: list[list] = []
    state = {"eps": [1, 2, 3, 4, 5, 6]}

    def engine(self, target, draft, prompts, passes, **kw):
        calls.append(list(passes))
        out = {}
        for p in passes:
            idx = list(range(len(prompts))) if p.prompts is None else list(p.prompts)
            greedy = [1, 2, 3, 4, 5, 6]
            outputs = [state["eps"] if p.temperature == 0.01 else greedy for _ in idx]
            top2 = [[[t, 10.0, 99, 2.0] for t in greedy] for _ in idx] if p.logprobs else None
            hist = [{"acceptance_histogram": [0, 1, 0, 1], "num_draft_tokens": 6}] * len(idx)
            out[p.name] = PassResult(idx, outputs, top2, 2 * len(idx), 6 * len(idx), 4 * len(idx), [2, 1, 1], 0.1, hist)
        return EngineRun(str(draft), "0.32.0", out, {"engine_start_s": 1.0, "total_s": 2.0})

    monkeypatch.setattr(EngineSession, "engine", engine)
    monkeypatch.setattr(EngineSession, "close", lambda self: None)
    return calls, state


def _smoke(models, *args: str):
    return CliRunner().invoke(
        main,
        [
            "smoke",
            str(models["draft"]),
            "--target",
            str(models["target"]),
            "--engine",
            "vllm",
            "--limit",
            "1",
            "--max-new-tokens",
            str(GEN),
            *args,
        ],
    )


def test_t0_runs_no_control(models, fake_engine) -> None:
    calls, _ = fake_engine
    res = _smoke(models, "--json")
    assert res.exit_code == 0, res.output
    assert [[p.name for p in c] for c in calls] == [["main"]]
    assert json.loads(res.stdout)["drafts"][0]["sampling_control"] is None


def test_sampling_control_passes_quietly(models, fake_engine) -> None:
    calls, _ = fake_engine
    res = _smoke(models, "--temperature", "0.7", "--json")
    assert res.exit_code == 0, res.output
    [passes] = calls
    assert [(p.name, p.temperature, p.prompts, p.logprobs) for p in passes] == [
        ("main", 0.7, None, 0),
        ("control-greedy", 0.0, (0, 1), 2),
        ("control-eps", 0.01, (0, 1), 0),
    ]
    control = json.loads(res.stdout)["drafts"][0]["sampling_control"]
    assert control["passed"] and control["cause"] is None
    assert "WARNING" not in res.stderr


def test_failed_control_warns_loudly(models, fake_engine) -> None:
    from eagle_convert.vllm.known_issues import sampling_issues

    _, state = fake_engine
    state["eps"] = [1, 7, 7, 7, 7, 7]  # leaves greedy at token 2, margin 8 logits: not a near-tie
    res = _smoke(models, "--temperature", "0.7")
    assert res.exit_code == 0, res.output
    assert "WARNING: the engine failed the sampling control for draft" in res.stdout
    assert "measures a broken speculative sampler, not the draft" in res.stdout
    warning = [ln for ln in res.stderr.splitlines() if ln.startswith("WARNING: draft:")]
    assert len(warning) == 1 and "2 of 2 prompts leave the greedy result" in warning[0]
    assert "its AL at T=0.7 measures the engine, not the draft" in warning[0]
    res = _smoke(models, "--temperature", "0.7", "--json")
    control = json.loads(res.stdout)["drafts"][0]["sampling_control"]
    assert not control["passed"] and control["with_speculation"]["divergences"][0]["position"] == 1
    known = sampling_issues()
    assert control["cause"] == (known[0].summary if known else None)
