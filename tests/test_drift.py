"""`drift` on constructed drafts whose answers are known, the observer's promise (it changes
nothing), the verdict's thresholds, and the command (table, JSON against its schema, errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from tinymodels import AUX, H, V, tiny_draft_config, tiny_target

from eagle_convert.cli.app import main
from eagle_convert.drift.results import RMS_GROWTH, SINK_FALL, DepthRow, group_from, verdict
from eagle_convert.drift.run import measure_drift
from eagle_convert.reference.drafter import EagleDrafter, draft_config_from_dict
from eagle_convert.reference.loop import speculative_generate
from eagle_convert.vllm_model import default_release

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

torch.set_num_threads(1)
SINK_TOKEN = V - 1  # outside the draft vocabulary (ids 0..47): the draft never emits it
PROMPTS = [[1, SINK_TOKEN, *range(2, 2 + n)] for n in (20, 33, 47)]


def _drafter(seed: int = 0, **kw) -> EagleDrafter:
    torch.manual_seed(seed)
    m = EagleDrafter(draft_config_from_dict(tiny_draft_config(**kw), default_release()))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3 if p.dim() == 1 else 0.1)
    return m


def _measure(target, m: EagleDrafter, depth: int = 6, max_new_tokens: int = 12):
    rec = measure_drift(target, m, PROMPTS, depth=depth, sink_tokens=4, max_new_tokens=max_new_tokens, aux_ids=AUX)
    return group_from(rec, "target", 0, len(PROMPTS), AUX)


def test_observing_changes_nothing() -> None:
    """Same tokens and counters with and without the recorder (probabilities are computed beside SDPA)."""
    target, m = tiny_target(), _drafter()
    plain = [speculative_generate(target, m, p, k=5, max_new_tokens=12, aux_ids=AUX) for p in PROMPTS]
    rec = measure_drift(target, m, PROMPTS, depth=5, sink_tokens=4, max_new_tokens=12, aux_ids=AUX)
    assert m.observer is None  # removed after the run
    assert sum(r.num_drafts for r in plain) == rec.depths[0].reached
    assert [sum(r.accepted_per_pos[d] for r in plain) for d in range(5)] == [s.accepted for s in rec.depths]
    again = [speculative_generate(target, m, p, k=5, max_new_tokens=12, aux_ids=AUX) for p in PROMPTS]
    assert [r.tokens for r in again] == [r.tokens for r in plain]


def test_shares_sum_to_one_and_own_share_grows_from_zero() -> None:
    """Every key is sink, context or own; depth 1 has no own key; depth d has d-1 of them."""
    g = _measure(tiny_target(), _drafter())
    for r in g.depths:
        assert r.sink is not None and r.context is not None and r.own is not None
        # fp32 softmax rows sum to 1 within ~1e-6; 1e-4 leaves room for any CPU's rounding.
        assert r.sink + r.context + r.own == pytest.approx(1.0, abs=1e-4)
        assert len(r.per_head["sink"]) == 1 and len(r.per_head["sink"][0]) == 4  # [layers][heads]
    assert g.depths[0].own == 0.0 and all((r.own or 0) > 0 for r in g.depths[1:])


def test_attention_forced_to_position_0_gives_sink_share_1_at_every_depth() -> None:
    """q = bias along a rope-still dimension, k large there only for the token at draft position 0.

    rope_theta 1e30 leaves every rotation pair but the first still (pair 1 turns by 1e-7.5 rad per
    position), so the score is q.k = 10 * 10 * sqrt(H) / sqrt(head_dim) ~ 200 on position 0 and 0
    elsewhere: softmax puts all but e^-200 of the mass there, at every depth.
    """
    m = _drafter(attention_bias=True, rope_theta=1e30)
    attn, hd = m.layers[0].self_attn, H // 4
    with torch.no_grad():
        m.embed_tokens.weight[:, 0] = 0.0
        m.embed_tokens.weight[SINK_TOKEN] = 0.0
        m.embed_tokens.weight[SINK_TOKEN, 0] = 1.0  # normed by input_layernorm: sqrt(H) * its weight
        m.layers[0].input_layernorm.weight.fill_(1.0)
        attn.q_proj.weight.zero_()
        attn.q_proj.bias.zero_()
        attn.k_proj.weight.zero_()
        attn.k_proj.bias.zero_()
        for head in range(4):
            attn.q_proj.bias[head * hd + 1] = 10.0
        for head in range(2):
            attn.k_proj.weight[head * hd + 1, 0] = 10.0
    g = _measure(tiny_target(zero_lm_head=True), m)  # the target emits token 0 only: one sink key
    for r in g.depths:
        assert r.sink == pytest.approx(1.0, abs=1e-6), r  # e^-200 is 0 in fp32
        assert all(h == pytest.approx(1.0, abs=1e-6) for h in r.per_head["sink"][0])


def _scaled(norm_output: bool) -> EagleDrafter:
    """A draft whose attention and MLP write 4x larger updates into the residual stream."""
    m = _drafter(seed=1, norm_output=norm_output, fc_norm=norm_output)
    with torch.no_grad():
        m.layers[0].self_attn.o_proj.weight.mul_(4.0)
        m.layers[0].mlp.down_proj.weight.mul_(4.0)
        m.norm.weight.fill_(0.7)
    return m


def test_growing_residual_grows_fed_rms_and_norm_output_keeps_it_at_the_norm_weight() -> None:
    """EAGLE-3 feeds back the pre-norm residual, which adds each step's update: RMS rises with
    depth. The same weights with norm_output feed back norm(x) * w: RMS(w) = 0.7 exactly (w is constant)."""
    target = tiny_target()
    grows = _measure(target, _scaled(False), depth=8).depths
    rms = [r.fed_rms or 0.0 for r in grows]
    assert all(b > a for a, b in zip(rms, rms[1:])), rms
    assert rms[-1] / rms[0] > RMS_GROWTH
    assert verdict(grows).status == "drifts" and "fed-back RMS grows" in verdict(grows).text
    flat = _measure(target, _scaled(True), depth=8).depths
    # RMSNorm output has RMS 1 up to eps (1e-5 against mean squares ~1): 1e-4 relative covers it.
    assert all(r.fed_rms == pytest.approx(0.7, rel=1e-4) for r in flat)
    assert verdict(flat).status == "stable"


def test_fc_norm_brings_each_aux_chunk_to_its_norm_weight() -> None:
    """Without fc_norm fc reads the target's states as they are; with it each chunk has RMS(w_i)."""
    target = tiny_target()
    plain = _measure(target, _drafter()).aux
    assert all(a.rms == a.fc_input_rms for a in plain) and [a.layer_id for a in plain] == list(AUX)
    m = _drafter(fc_norm=True)
    weights = (0.25, 0.5, 2.0)
    with torch.no_grad():
        for norm, w in zip(m.fc_norm, weights):
            norm.weight.fill_(w)
    normed = _measure(target, m).aux
    for a, b, w in zip(plain, normed, weights):
        assert b.rms == pytest.approx(a.rms, rel=1e-6)  # the same target states
        assert b.fc_input_rms == pytest.approx(w, rel=1e-4)  # eps 1e-5 against mean squares ~1
        assert abs((a.rms or 0) - w) > 0.1  # not already there


def _row(depth: int, sink: float, rms: float) -> DepthRow:
    return DepthRow(depth, 10, sink, 1 - sink, 0.0, rms, 10, 5)


def test_verdict_thresholds() -> None:
    """Sink falls below SINK_FALL x depth 1 (from a share worth losing), or RMS above RMS_GROWTH x."""
    v = verdict([_row(1, 0.61, 1.0), _row(2, 0.40, 1.5), _row(6, 0.18, 3.4)])
    assert v.status == "drifts"
    assert v.text == "drifts: sink share falls from 0.61 to 0.18 by depth 6, fed-back RMS grows 3.4x by depth 6"
    edge = verdict([_row(1, 0.6, 1.0), _row(2, 0.6 * SINK_FALL, RMS_GROWTH)])  # exactly at both limits
    assert edge.status == "stable"
    tiny_sink = verdict([_row(1, 0.02, 1.0), _row(2, 0.001, 1.1)])  # no sink to lose
    assert tiny_sink.status == "stable"
    assert verdict([DepthRow(1, 0, None, None, None, None, 0, 0)]).status == "unmeasured"


# ------------------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("drift")
    return {"target": build_target(base / "target"), "draft": build_draft(base / "draft", VLLM_TINY)}


def _cli(*args: str):
    return CliRunner().invoke(main, ["drift", *args])


def test_cli_table_and_json(pair, tmp_path: Path) -> None:
    common = [str(pair["draft"]), "--target", str(pair["target"]), "--limit", "1", "--max-new-tokens", "4"]
    res = _cli(
        *common,
        "--depth",
        "3",
        "--buckets",
        "natural,64",
        "--chat-template",
        "none",
        "--chat-template",
        "{{ messages[0]['content'] }}",
    )
    assert res.exit_code == 0, res.output
    assert "depth" in res.stdout and "fed RMS" in res.stdout and "template none" in res.stdout
    assert "draft (EAGLE-3; no 3.1 flags)" in res.stdout
    res = _cli(*common, "--depth", "3", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "drift-report.schema.json")
    d = data["drafts"][0]
    assert [r["depth"] for r in d["overall"]["depths"]] == [1, 2, 3]
    assert d["verdict"]["status"] in ("drifts", "stable") and d["verdict"]["thresholds"]["sink_fall"] == SINK_FALL
    # read back (report's drift panel and plot): the same report, so the same JSON
    from eagle_convert.drift import read_drift_report

    back = read_drift_report(data)
    assert json.loads(json.dumps(back.to_dict())) == data


def test_read_drift_report_names_a_broken_field() -> None:
    from eagle_convert.drift import read_drift_report
    from eagle_convert.errors import ConfigError

    with pytest.raises(ConfigError, match="report.json drift: not a drift report"):
        read_drift_report(
            {"target": "t", "engine": "e", "settings": {}, "drafts": [{}], "seconds": 0}, "report.json drift"
        )


def test_cli_reads_a_named_suite_with_real_long_context(pair) -> None:
    """`--prompts long-context:1k` as smoke reads it: the long prompts are measured in their own bucket."""
    res = _cli(
        str(pair["draft"]),
        "--target",
        str(pair["target"]),
        "--prompts",
        "long-code:1k",
        "--limit",
        "1",
        "--max-new-tokens",
        "4",
        "--depth",
        "2",
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "drift-report.schema.json")
    groups = data["drafts"][0]["groups"]
    assert [(g["bucket"], g["prompts"]) for g in groups] == [(1000, 1)]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--depth", "0"], 2, "Invalid value for '--depth': 0 is not in the range x>=1."),
        (["--plot", "x.svg"], 2, "Error: --plot: x.svg must end in .png\n"),
    ],
)
def test_cli_usage_errors(pair, args: list[str], code: int, message: str) -> None:
    res = _cli(str(pair["draft"]), "--target", str(pair["target"]), *args)
    assert res.exit_code == code and message in res.stderr, res.output


def test_cli_swapped_arguments(pair) -> None:
    res = _cli(str(pair["target"]), "--target", str(pair["draft"]))
    assert res.exit_code == 1
    assert res.stderr.startswith(f"Error: target {pair['draft'].resolve()}: this looks like an EAGLE-3 draft"), (
        res.stderr
    )


# --------------------------------------------------------------------------------- check


def test_check_drift_checks_against_the_verdict() -> None:
    from eagle_convert.check.measured import drift_checks
    from eagle_convert.check.policy import Policy

    v = verdict([_row(1, 0.61, 1.0), _row(2, 0.40, 1.5), _row(6, 0.18, 3.4)])
    policy = Policy({"drift": {"max_rms_growth": 3.0, "min_sink_share": 0.1}})
    growth, sink = drift_checks(v, policy)
    assert (growth.passed, growth.message) == (False, "fed-back RMS grows 3.4x (depth 6) > 3.0")
    assert (sink.passed, sink.message) == (True, "lowest sink share 0.18 (depth 6)")
    assert drift_checks(v, Policy({"drift": {"depth": 4}})) == []  # no limit: nothing to check


@pytest.mark.parametrize("limit, status", [("1000.0", "pass"), ("1.0", "fail")])
def test_check_runs_drift_only_when_a_limit_is_set(pair, tmp_path: Path, limit: str, status: str) -> None:
    policy = tmp_path / "eagle-check.toml"
    policy.write_text(f"[engine]\nload = false\n[drift]\nmax_rms_growth = {limit}\nmax_new_tokens = 4\ndepth = 3\n")
    args = ["check", str(pair["draft"]), "--target", str(pair["target"]), "--json"]
    res = CliRunner().invoke(main, [*args, "--policy", str(policy)])
    data = json.loads(res.stdout)
    check_schema(data, "check-report.schema.json")
    (drift,) = [c for c in data["checks"] if c["stage"] == "drift"]
    assert drift["status"] == status and drift["threshold"] == f"<= {float(limit)}"
    assert res.exit_code == (0 if status == "pass" else 1), res.output
    off = tmp_path / "off.toml"
    off.write_text("[engine]\nload = false\n")
    res = CliRunner().invoke(main, [*args, "--policy", str(off)])
    (drift,) = [c for c in json.loads(res.stdout)["checks"] if c["stage"] == "drift"]
    assert drift["status"] == "skip"
    assert drift["message"] == "off: the policy sets no [drift] limit (max_rms_growth, min_sink_share)"


# ------------------------------------------------------------------- the vLLM cross-check's parts


def test_round_log_keeps_every_round_as_the_recorder_sums_it() -> None:
    """Positions rise round by round, k values each, and their means are the recorder's rows."""
    from eagle_convert.drift.crosscheck import RoundLog, reference_rounds

    target, m = tiny_target(), _drafter()
    log = RoundLog(5, m.cfg.num_aux_hidden_states, 4)
    measure_drift(target, m, PROMPTS[:1], depth=5, sink_tokens=4, max_new_tokens=12, aux_ids=AUX, recorder=log)
    assert [p for p, _ in log.rounds][0] == len(PROMPTS[0]) - 1  # the first pass ends at the prompt's last token
    assert all(b > a for (a, _), (b, _) in zip(log.rounds, log.rounds[1:]))
    assert all(len(rms) == 5 for _, rms in log.rounds)
    for d, s in enumerate(log.depths):
        assert s.fed_rms / s.passes == pytest.approx(sum(r[d] for _, r in log.rounds) / len(log.rounds), rel=1e-6)
    ((tokens, rounds),) = reference_rounds(target, m, PROMPTS[:1], depth=5, max_new_tokens=12, aux_ids=AUX)
    assert rounds == log.rounds and len(tokens) == 12 and m.observer is None


def test_compare_rounds_matches_rounds_by_position_up_to_where_the_text_parts() -> None:
    from eagle_convert.drift.crosscheck import compare_rounds

    prompt = [1, 2, 3, 4]  # rounds draft from position 3 (the prompt's last token) on
    ref = [([5, 6, 7, 8], [(3, [1.0, 2.0]), (5, [1.0, 2.0]), (6, [1.0, 4.0])])]
    # vLLM: same text up to token 2 (index 1), one extra round at the end, 1 % off at depth 2.
    vllm = [([5, 6, 9, 9], [(3, [1.0, 2.02]), (5, [1.0, 2.02]), (6, [9.0, 9.0]), (7, [1.0, 1.0])])]
    rows, counts = compare_rounds([prompt], ref, vllm, 2)
    # Round 5 reads tokens up to position 6 = generated index 2, where the texts part: not matched.
    assert counts == {"identical_prompts": 0, "matched_rounds": 1, "reference_rounds": 3, "vllm_rounds": 4}
    assert [r.rounds for r in rows] == [1, 1]
    assert rows[0].rel_diff == 0.0 and rows[1].rel_diff == pytest.approx(0.01)
    same = [([5, 6, 9, 9], [(3, [1.0, 2.0]), (5, [1.0, 2.0]), (6, [1.0, 4.0])])]
    rows, counts = compare_rounds([prompt], same, same, 2)
    assert counts["identical_prompts"] == 1 and counts["matched_rounds"] == 3
    assert [r.reference_rms for r in rows] == pytest.approx([1.0, 8 / 3])


class _FakeDraft(torch.nn.Module):
    """Returns (normed, fed) as vLLM's Eagle3LlamaForCausalLM does; fed row i = value i + 10 * call."""

    calls = 0

    def forward(self, input_ids, positions, hidden_states, inputs_embeds=None):
        n = input_ids.shape[0]
        fed = (torch.arange(n, dtype=torch.float32) + 10.0 * self.calls)[:, None].expand(n, 4)
        type(self).calls += 1
        return fed * 0, fed


class _FakeProposer:
    """The shape of vLLM 0.32's `SpecDecodeBaseProposer.propose` for one request (batch 1, k steps)."""

    def __init__(self) -> None:
        self.model = _FakeDraft()

    def set_inputs_first_pass(self, n: int):
        return n, torch.tensor([n - 1]), None  # the last verified position is sampled

    def propose(self, n: int, k: int) -> None:
        _, rows, _ = self.set_inputs_first_pass(n)
        self.model(input_ids=torch.zeros(n + 2), positions=torch.arange(n + 2) + 40, hidden_states=None)  # padded
        for _ in range(k - 1):
            self.model(input_ids=torch.zeros(2), positions=torch.zeros(2), hidden_states=None)  # batch 1, padded


def test_drift_extension_reads_the_sampled_row_then_each_steps_first_row() -> None:
    """The worker extension's row choice on a stand-in proposer (no vLLM): depth 1 is the first
    pass's sampled row, depths 2..k row 0 of each step; propose is restored on take."""
    from eagle_convert.vllm.drift_ext import DriftExtension

    class Worker(DriftExtension):
        def __init__(self) -> None:
            self.model_runner = type("Runner", (), {"drafter": _FakeProposer()})()

    w = Worker()
    _FakeDraft.calls = 0
    assert w.eagle_convert_drift_arm()["armed"]
    drafter = w.model_runner.drafter
    drafter.model(input_ids=torch.zeros(3), positions=torch.zeros(3), hidden_states=None)  # a dummy run: not seen
    drafter.propose(5, 3)
    drafter.propose(2, 3)
    got = w.eagle_convert_drift_take()["rounds"]
    # call 1 of round 1 (4th call overall: 1 dummy) row 4 -> 4 + 10; steps: row 0 -> 20, 30.
    assert got == [
        {"positions": [44], "rms": [[14.0], [20.0], [30.0]]},
        {"positions": [41], "rms": [[41.0], [50.0], [60.0]]},
    ]
    assert "propose" not in drafter.__dict__ and not drafter.model._forward_hooks


class _FakeSpeculator:
    """The shape of Model Runner V2's `TargetDependentARSpeculator.propose` (vLLM 0.32.0 and 0.34.0,
    `v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py`) for one request: `prepare_prefill_inputs`
    fills `last_token_indices`, `_prefill(num_reqs, ...)` runs the draft over every position, each
    later step runs it on rows [:num_reqs]; dummy runs call `propose(..., dummy_run=True)`."""

    def __init__(self) -> None:
        self.model = _FakeDraft()
        self.last_token_indices = torch.zeros(4, dtype=torch.long)

    def _prefill(self, num_reqs: int, n: int) -> None:
        self.model(input_ids=torch.zeros(n + 2), positions=torch.arange(n + 2) + 40, hidden_states=None)

    def propose(self, n: int, k: int, dummy_run: bool = False) -> None:
        self.last_token_indices[:1] = n - 1  # the last verified position is sampled
        self._prefill(1, n)
        for _ in range(k - 1):
            self.model(input_ids=torch.zeros(2), positions=torch.zeros(2), hidden_states=None)


def test_drift_extension_reads_model_runner_v2s_speculator_as_it_reads_v1s_proposer() -> None:
    """On a runner with `speculator` (V2, the only runner from vLLM 0.34.0) the same rows are read:
    depth 1 at `last_token_indices` of `_prefill`, depths 2..k row 0; a dummy propose is not a round;
    `propose` and `_prefill` are the class's again after take."""
    from eagle_convert.vllm.drift_ext import DriftExtension

    class Worker(DriftExtension):
        def __init__(self) -> None:
            self.model_runner = type("Runner", (), {"speculator": _FakeSpeculator()})()

    w = Worker()
    _FakeDraft.calls = 0
    assert w.eagle_convert_drift_arm() == {"armed": True, "model": "_FakeDraft", "runner": "v2"}
    spec = w.model_runner.speculator
    spec.propose(3, 3, dummy_run=True)  # calls 0..2: not seen
    spec.propose(5, 3)
    spec.propose(2, 3)
    got = w.eagle_convert_drift_take()["rounds"]
    assert got == [
        {"positions": [44], "rms": [[34.0], [40.0], [50.0]]},
        {"positions": [41], "rms": [[61.0], [70.0], [80.0]]},
    ]
    assert not {"propose", "_prefill"} & set(spec.__dict__) and not spec.model._forward_hooks
