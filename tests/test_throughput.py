"""Per-user tokens/s by concurrency (measure/throughput.py): passes, folding, speedups, refusals.

The engine itself is exercised by the one vllm-marked report test (tests/test_report.py); here the
engine's pass results are built by hand, so each number below is known exactly.
"""

from __future__ import annotations

import pytest

from eagle_convert.errors import UsageError
from eagle_convert.measure.prompts import NATURAL, PreparedPrompt, PromptSet
from eagle_convert.measure.throughput import (
    MIN_REQUESTS,
    NO_SPEC,
    ThroughputReport,
    cpu_note,
    engine_rates,
    parse_concurrency,
    throughput_passes,
)
from eagle_convert.vllm import EngineRun, PassResult


def _pset() -> PromptSet:
    prompts = [PreparedPrompt(f"p{i}", "chat", NATURAL, [1, 2, 3]) for i in range(3)]
    prompts.append(PreparedPrompt("p0", "chat", 512, [1] * 500))
    return PromptSet(prompts, [], "target")


def test_parse_concurrency() -> None:
    assert parse_concurrency("16, 1,4,4") == [1, 4, 16]
    assert parse_concurrency(None) == []
    for bad, msg in (("1,x", "'x' is not an integer"), ("0", "outside 1..256"), (",", "at least one level")):
        with pytest.raises(UsageError, match=msg):
            parse_concurrency(bad)


def test_passes_cover_each_level_with_enough_requests_on_natural_prompts() -> None:
    passes = throughput_passes([1, 4, 16], _pset(), seed=0)
    assert passes[0].name == "tput-warmup"
    by_level: dict[int, list] = {}
    for p in passes[1:]:
        c = int(p.name.split("-")[1][1:])
        assert len(p.prompts) == c and p.temperature == 0.0  # c requests submitted together, greedy
        assert all(i < 3 for i in p.prompts)  # the natural-bucket prompts only, cycled
        by_level.setdefault(c, []).append(p)
    assert {c: sum(len(p.prompts) for p in ps) for c, ps in by_level.items()} == {1: MIN_REQUESTS, 4: 4, 16: 16}


def _pass(decode_s: list[float], tokens: int = 33, *, drafts: int = 0, accepted: int = 0) -> PassResult:
    timing = [{"ttft_s": 0.01, "decode_s": d, "tokens": tokens} for d in decode_s]
    return PassResult(
        list(range(len(decode_s))),
        [[0] * tokens] * len(decode_s),
        None,
        drafts,
        drafts * 3,
        accepted,
        [],
        sum(decode_s),
        None,
        False,
        timing,
    )


def test_rates_are_medians_of_decode_rates_and_speedup_is_their_ratio() -> None:
    # 32 decode tokens per request: 1 s -> 32 tok/s; the median of 4 requests at c=1.
    spec = EngineRun(
        "d",
        "0.32.0",
        {
            "tput-c1-r0": _pass([1.0], drafts=8, accepted=16),
            "tput-c1-r1": _pass([0.5], drafts=8, accepted=8),
            "tput-c1-r2": _pass([2.0]),
            "tput-c1-r3": _pass([1.0]),
            "tput-c4-r0": _pass([2.0, 2.0, 4.0, 1.0]),
        },
    )
    base = EngineRun(
        None, "0.32.0", {f"tput-c1-r{i}": _pass([2.0]) for i in range(4)} | {"tput-c4-r0": _pass([4.0] * 4)}
    )
    d = engine_rates(spec, [1, 4], "eagle3", "/x")
    b = engine_rates(base, [1, 4], NO_SPEC, None)
    c1 = d.level(1)
    assert (c1.requests, c1.tokens_per_s, c1.min_tokens_per_s, c1.max_tokens_per_s) == (4, 32.0, 16.0, 64.0)
    assert c1.acceptance_length == pytest.approx(1 + 24 / 16)
    assert d.level(4).tokens_per_s == pytest.approx(16.0)  # median of 16, 16, 8, 32
    assert b.level(1).acceptance_length is None
    rep = ThroughputReport([1, 4], b, [d], "cpu", "vllm 0.32.0")
    assert rep.speedup("eagle3", 1) == pytest.approx(2.0) and rep.speedup("eagle3", 4) == pytest.approx(2.0)
    data = rep.to_dict()
    assert data["speedup"] == {"eagle3": {"1": 2.0, "4": 2.0}}
    assert "CPU" in data["note"]  # honest about where it was measured
    back = ThroughputReport.from_dict(data)
    assert back.speedup("eagle3", 4) == pytest.approx(2.0) and back.baseline.label == NO_SPEC


def test_cpu_note_only_off_gpu() -> None:
    assert cpu_note("cuda") is None and "do not predict a GPU" in cpu_note("cpu")


def test_concurrency_needs_the_vllm_engine(tmp_path) -> None:
    from eagle_convert.cli.errors import format_error
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.smoke import run_smoke

    with pytest.raises(UsageError, match="`concurrency` measures per-user tokens/s with `engine=vllm` only") as bad:
        run_smoke(tmp_path, [tmp_path], MeasureOptions(engine="reference", concurrency=(1, 4)))
    assert format_error(bad.value) == "--concurrency measures per-user tokens/s with --engine vllm only"
