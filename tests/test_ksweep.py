"""Every k from one run (`measure/ksweep.py`): the estimator on counters, and on drafts of known
behaviour against separate runs at k = 1..K on the reference engine.

Tolerance. The one-run estimate AL_K(k) and a separate run's AL(k) score the same greedy text
(T = 0: the target decides every token), cut into different rounds. Each is a mean of per-round
accepted counts over its own rounds; the rounds of the two runs are only partly the same, so they
are compared as two independent samples: |AL_K(k) - AL(k)| <= 3 * sqrt(se_K(k)^2 + se(k)^2), each
standard error from its run's own counters (`al_standard_error`, rounds as independent draws). A
normal approximation fails that bound by chance in under 0.3 % of comparisons; a bias of the
estimator larger than its noise (round starts after a rejection land on harder positions than
average, the draft restarts from the target's states at depth k) would exceed it. Drafts whose
counts do not depend on where a round starts are exact: the perfect draft (every round accepts
all k, both standard errors 0) and the random draft (no round accepts anything here).

Measured on the trained pair (K = 7, 16 held-out prompts x 96 tokens, this machine): estimate -
separate run = -0.041, -0.052, -0.095, -0.058, +0.022, -0.055, 0 for k = 1..7 (the estimate low,
i.e. conservative, as the restart argument predicts), against bounds of 0.051 .. 0.48.
"""

from __future__ import annotations

import math
import shutil
import statistics
from pathlib import Path

import pytest

from eagle_convert.measure.ksweep import (
    KSweep,
    StepCosts,
    acceptance_at,
    acceptance_rate_at,
    al_standard_error,
    costs_from_rates,
    expected_speedup,
    k_sweep,
)
from eagle_convert.vllm_model import AcceptanceMetrics, default_release


class _Counts(AcceptanceMetrics):
    def __init__(self, accepted: list[int], k: int) -> None:
        self.num_drafts = len(accepted)
        self.num_draft_tokens = k * len(accepted)
        self.num_accepted = sum(accepted)
        self.accepted_per_pos = [sum(a > i for a in accepted) for i in range(k)]


ROUNDS = [0, 1, 3, 3, 2, 5, 5, 0, 4, 1]  # accepted counts of ten rounds at K = 5


def test_estimator_caps_each_round_at_k() -> None:
    c = _Counts(ROUNDS, 5)
    sweep = k_sweep(c)
    assert sweep.k_max == 5 and sweep.rounds == 10 and sweep.recommended_k is None
    for k in range(1, 6):
        capped = [min(a, k) for a in ROUNDS]
        assert acceptance_at(c.num_drafts, c.accepted_per_pos, k) == pytest.approx(1 + statistics.mean(capped))
        assert acceptance_rate_at(c.num_drafts, c.accepted_per_pos, k) == pytest.approx(sum(capped) / (10 * k))
        se = statistics.stdev(capped) / math.sqrt(len(capped))
        assert al_standard_error(c.num_drafts, c.accepted_per_pos, k) == pytest.approx(se)
        assert sweep.row(k).acceptance_length == pytest.approx(1 + statistics.mean(capped))
    assert sweep.row(5).acceptance_length == c.acceptance_length  # k = K: the run's own AL


def test_estimator_refuses_what_one_run_cannot_tell() -> None:
    with pytest.raises(ValueError, match=r"^k = 4 exceeds the run's k = 3"):
        acceptance_at(5, [3, 2, 1], 4)
    with pytest.raises(ValueError, match=r"^counters out of range"):
        acceptance_at(2, [3, 2, 1], 1)
    with pytest.raises(ValueError, match="per-position counters"):
        k_sweep(_Counts([], 0))
    assert acceptance_at(0, [0, 0], 2) == 1.0 and al_standard_error(0, [0, 0], 2) == 0.0


def test_speedup_and_recommended_k() -> None:
    c = _Counts(ROUNDS, 5)
    costs = StepCosts(draft_s=0.1, target_s=1.0, verify_extra_s=0.05, source="test")
    sweep = k_sweep(c, costs)
    for r in sweep.rows:
        assert r.expected_speedup == pytest.approx(r.acceptance_length / (1.0 + r.k * 0.15))
    best = max(sweep.rows, key=lambda r: r.expected_speedup or 0.0)
    assert sweep.recommended_k == 3 and best.k in (3, 4)  # 2.9 / 1.45 = 3.2 / 1.6: a tie goes to the smaller k
    # A free draft: AL only grows with k, so the best k is K and the sweep says a larger K may do better.
    free = k_sweep(c, StepCosts(0.0, 1.0))
    assert free.recommended_k == 5 and free.at_edge
    # A draft as slow as the target: k = 1 is best (and still slower than the target alone).
    slow = k_sweep(c, StepCosts(1.0, 1.0))
    assert slow.recommended_k == 1 and slow.row(1).expected_speedup < 1
    assert expected_speedup(3.0, 2, StepCosts(0.25, 1.0)) == pytest.approx(2.0)
    back = KSweep.from_dict(sweep.to_dict())
    assert back.recommended_k == sweep.recommended_k and back.costs == costs
    assert [r.k for r in back.rows] == [1, 2, 3, 4, 5]


def test_costs_from_decode_rates() -> None:
    # Target alone: 100 tok/s (10 ms a token). With the draft at k = 4: AL 3 at 200 tok/s, so a round
    # costs 15 ms = 10 ms + 4 x 1.25 ms.
    c = costs_from_rates(no_spec_tokens_per_s=100.0, spec_tokens_per_s=200.0, acceptance_length=3.0, k=4, source="t")
    assert c is not None and c.target_s == pytest.approx(0.01) and c.draft_s == pytest.approx(0.00125)
    assert expected_speedup(3.0, 4, c) == pytest.approx(2.0)  # the measured speedup, back
    assert (
        costs_from_rates(no_spec_tokens_per_s=0.0, spec_tokens_per_s=1.0, acceptance_length=1, k=1, source="") is None
    )
    # Noise on a free draft (faster with speculation than AL predicts): clamped at 0.
    fast = costs_from_rates(no_spec_tokens_per_s=100.0, spec_tokens_per_s=400.0, acceptance_length=3.0, k=2, source="")
    assert fast is not None and fast.draft_s == 0.0


# --------------------------------------------------------------- against separate runs at k


def _zero_lm_head(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    state = load_file(f)
    state["lm_head.weight"].zero_()
    save_file(state, f, metadata={"format": "pt"})


@pytest.fixture(scope="module")
def controls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Random draft (AL ~ 1) on the tiny target; zero-head draft on a zero-head target (AL = k + 1),
    as in tests/test_smoke.py."""
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("ksweep")
    target = build_target(base / "target")
    zero_target = base / "target-zero-head"
    shutil.copytree(target, zero_target)
    _zero_lm_head(zero_target)
    random_draft = build_draft(base / "random-draft", VLLM_TINY)
    perfect = base / "perfect-draft"
    shutil.copytree(random_draft, perfect)
    _zero_lm_head(perfect)
    return {"target": target, "zero_target": zero_target, "random": random_draft, "perfect": perfect}


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: on a shared 2-core machine two threads spin against other processes
    (a 24-token run measured 44 s with two, 0.8 s with one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _sweep_and_runs(target_dir: Path, draft_dir: Path, prompts: list[list[int]], k_max: int, max_new: int):
    """The one-run sweep at K (with timed step costs) and the separate runs at k = 1..K."""
    from eagle_convert.measure.stepcost import time_reference_steps
    from eagle_convert.reference import TargetModel, load_drafter, quiet_loading, speculative_generate
    from eagle_convert.reference.loop import summarize
    from eagle_convert.vllm_model import default_aux_ids

    with quiet_loading():
        tgt = TargetModel.from_pretrained(target_dir, device="cpu")
    dr = load_drafter(
        draft_dir,
        default_release(),
        target_embed=tgt.embed_weight,
        target_lm_head=tgt.lm_head_weight,
        device=tgt.device,
    )
    aux = tuple(dr.cfg.aux_layer_ids or default_aux_ids(tgt.num_layers))

    def run(k: int):
        return summarize([speculative_generate(tgt, dr, p, k=k, max_new_tokens=max_new, aux_ids=aux) for p in prompts])

    sweep = k_sweep(run(k_max), time_reference_steps(tgt, dr, prompts[0], k=k_max, aux_ids=aux, repeats=5))
    return sweep, {k: run(k) for k in range(1, k_max + 1)}


def _assert_within_tolerance(sweep: KSweep, runs: dict) -> list[float]:
    diffs = []
    for k, r in runs.items():
        est = sweep.row(k)
        se = al_standard_error(r.num_drafts, r.accepted_per_pos, k)
        bound = 3 * math.sqrt(est.standard_error**2 + se**2)
        diff = est.acceptance_length - r.acceptance_length
        assert abs(diff) <= bound + 1e-12, f"k={k}: one-run {est.acceptance_length:.4f}, run {r.acceptance_length:.4f}"
        diffs.append(diff)
    return diffs


PROMPTS = [[0, 2, 90, 720, 3, 204, 204, 266, 2582, 802], [0, 2, 4061, 1969, 89, 3, 204, 204]]


def test_perfect_draft_every_k_is_k_plus_1(controls) -> None:
    sweep, runs = _sweep_and_runs(controls["zero_target"], controls["perfect"], PROMPTS, 5, 24)
    assert [r.acceptance_length for r in sweep.rows] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert [runs[k].acceptance_length for k in runs] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert all(r.standard_error == 0 for r in sweep.rows)
    assert _assert_within_tolerance(sweep, runs) == [0.0] * 5
    c = sweep.costs
    assert c is not None and c.draft_s > 0 and c.target_s > 0 and c.verify_extra_s >= 0
    assert sweep.recommended_k is not None and all(r.expected_speedup is not None for r in sweep.rows)


def test_random_draft_every_k_is_about_1(controls) -> None:
    sweep, runs = _sweep_and_runs(controls["target"], controls["random"], PROMPTS, 4, 24)
    assert all(r.acceptance_length < 1.1 for r in sweep.rows)
    assert all(runs[k].acceptance_length < 1.1 for k in runs)
    _assert_within_tolerance(sweep, runs)
    assert sweep.recommended_k == 1  # nothing is accepted: the cheapest round is the best


@pytest.mark.slow
def test_trained_pair_one_run_matches_separate_runs() -> None:
    from fixtures.trained import build_trained_pair, trained_info

    target, draft = build_trained_pair(log=lambda _msg: None)
    prompts = trained_info(target.parent)["heldout_prompts"][:12]
    sweep, runs = _sweep_and_runs(target, draft, prompts, 5, 64)
    assert sweep.row(1).acceptance_length > 1.8 and sweep.row(5).acceptance_length > 4.0  # positions mean something
    diffs = _assert_within_tolerance(sweep, runs)
    assert diffs[-1] == 0.0  # k = K is the run itself
    assert max(abs(d) for d in diffs) < 0.15  # measured at most ~0.1 (module docstring)


# ------------------------------------------------------------------- smoke --k-sweep, JSON, card


def test_smoke_k_sweep_json_reader_card_and_report_page(controls) -> None:
    """`smoke --k-sweep --json`: the schema's k_sweep per draft, read back from the counters, in the
    model card and in report's page; the table in smoke's text output."""
    import json

    from click.testing import CliRunner

    from eagle_convert.cli.app import main
    from eagle_convert.draft import acceptance_from_smoke, model_card
    from eagle_convert.measure import read_drafts

    try:
        from tests.jsonschemas import check_schema
    except ImportError:  # tests/ itself on sys.path
        from jsonschemas import check_schema  # type: ignore[no-redef]

    args = ["smoke", str(controls["perfect"]), "--target", str(controls["zero_target"]), "--engine", "reference"]
    args += ["--limit", "1", "--category", "coding", "-k", "4", "--max-new-tokens", "10", "--k-sweep"]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "smoke-report.schema.json")
    sweep = data["drafts"][0]["k_sweep"]
    assert [r["acceptance_length"] for r in sweep["rows"]] == [2.0, 3.0, 4.0, 5.0]
    assert sweep["k_max"] == 4 and sweep["step_costs"]["source"] == "reference engine: timed steps"
    assert sweep["recommended_k"] in (1, 2, 3, 4)
    [d] = read_drafts(data)
    assert d.k_sweep is not None and d.k_sweep.recommended_k == sweep["recommended_k"]
    card = model_card(
        {"architectures": ["LlamaForCausalLMEagle3"]}, model_ref="x", acceptance=acceptance_from_smoke(data)
    )
    assert "### Which k to serve with" in card and "| perfect-draft | 2.00 (×" in card
    from eagle_convert.report.markdown import k_sweep_lines

    assert k_sweep_lines([("perfect-draft", sweep)])[0].startswith("| draft | k = 1 | k = 2 | k = 3 | k = 4 |")
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert "every k from one run at k=4" in text.output and "recommended" in text.output
