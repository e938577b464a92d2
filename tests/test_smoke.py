"""`smoke`: counters, controls (perfect draft AL = k + 1, random draft AL ~ 1) in both engines, CLI.

Controls: a target whose lm_head is zero always emits token 0 (greedy), and a draft whose lm_head is
zero always proposes draft id 0 = target id 0 (d2t[0] = 0), so every draft is accepted. This is
exact on any CPU and in bf16 alike: a zero lm_head gives logits of exactly 0 whatever the kernels,
and argmax breaks the all-way tie at the first index. A random draft agrees with the target on
about one guess in its draft vocabulary: measured AL 1.0 (0 accepted in 22-32 rounds) in both
engines; the bound AL < 1.2 leaves 4 accepted tokens, far more than a flipped near-tie could add.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import CheckpointNotFoundError, UsageError
from eagle_convert.measure import MeasureOptions
from eagle_convert.measure.prompts import NATURAL, Prompt
from eagle_convert.measure.results import Counts, counts_from_histogram
from eagle_convert.measure.smoke import run_smoke

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

K = 3
PROMPTS = [
    Prompt("c1", "coding", text="def main(argv=None):"),
    Prompt("q1", "chat", messages=({"role": "user", "content": "The quick brown fox"},)),
]


def _zero_lm_head(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    state = load_file(f)
    state["lm_head.weight"].zero_()
    save_file(state, f, metadata={"format": "pt"})


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """target + random draft (AL ~ 1); zero-head target + zero-head draft (AL = k + 1)."""
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("smoke")
    target = build_target(base / "target")
    zero_target = base / "target-zero-head"
    shutil.copytree(target, zero_target)
    _zero_lm_head(zero_target)
    random_draft = build_draft(base / "random-draft", VLLM_TINY)
    perfect = base / "perfect-draft"
    shutil.copytree(random_draft, perfect)
    _zero_lm_head(perfect)
    return {"target": target, "zero_target": zero_target, "random": random_draft, "perfect": perfect}


def test_counts_from_vllm_histogram() -> None:
    # 4 rounds: 0, 1, 3 and 3 drafts accepted.
    c = counts_from_histogram([1, 1, 0, 2], 12, k=3)
    assert (c.num_drafts, c.num_accepted, c.num_draft_tokens, c.target_forwards) == (4, 7, 12, 5)
    assert c.accepted_per_pos == [3, 2, 2]
    assert c.acceptance_length == pytest.approx(1 + 7 / 4)
    assert c.per_position == [0.75, 0.5, 0.5]
    total = Counts(accepted_per_pos=[])
    total.add(c)
    total.add(Counts(requests=1, num_drafts=4, accepted_per_pos=[1], seconds=1.0))
    assert total.accepted_per_pos == [4, 2, 2] and total.seconds is None and total.requests == 2


def test_reference_perfect_draft_reaches_k_plus_1(models) -> None:
    rep = run_smoke(
        models["zero_target"],
        [models["perfect"], models["random"]],
        MeasureOptions(engine="reference", k=K, max_new_tokens=9, buckets=(NATURAL, 64)),
        prompts=PROMPTS,
    )
    perfect, rnd = rep.drafts
    assert perfect.total.acceptance_length == K + 1
    assert perfect.total.per_position == [1.0] * K
    assert perfect.total.num_drafts == 2 * 4 and perfect.total.target_forwards == 3 * 4  # 1 prefill + 2 rounds
    assert perfect.total.tokens_per_forward == 3.0
    assert rnd.total.acceptance_length < 1.2
    assert {(g.category, g.bucket) for g in perfect.groups} >= {("coding", 0), ("chat", 64), ("all", 64)}
    assert all(g.counts.acceptance_length == K + 1 for g in perfect.groups)
    [delta] = rep.deltas
    assert delta.acceptance_length == pytest.approx(rnd.total.acceptance_length - (K + 1))
    assert len(delta.groups) == len(rnd.groups)


def test_reference_random_draft_and_report_shape(models, tmp_path: Path) -> None:
    rep = run_smoke(
        models["target"],
        [models["random"]],
        MeasureOptions(engine="reference", k=K, max_new_tokens=12),
        prompts=PROMPTS,
    )
    [d] = rep.drafts
    assert d.total.acceptance_length < 1.2 and d.variant == "EAGLE-3" and d.per_request
    assert d.total.generated_tokens == 24 and d.total.tokens_per_s > 0
    data = json.loads(json.dumps(rep.to_dict()))
    assert data["engine"] == "reference" and data["settings"]["k"] == K and data["deltas"] == []
    assert [r["id"] for r in data["drafts"][0]["requests"]] == ["c1", "q1"]
    from eagle_convert.measure.plot import plot_smoke

    png = plot_smoke(rep, tmp_path / "one.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_smoke_usage_errors(models, tmp_path: Path) -> None:
    import click

    from eagle_convert.cli.app import main
    from eagle_convert.cli.errors import format_error

    smoke = main.get_command(click.Context(main), "smoke")
    with pytest.raises(UsageError, match=r"^`k` must be at least 1$") as bad:
        run_smoke(models["target"], [models["random"]], MeasureOptions(engine="reference", k=0))
    assert format_error(bad.value, smoke) == "--num-speculative-tokens must be at least 1"
    with pytest.raises(UsageError, match=r"^`tensor_parallel_size` applies to `engine=vllm` only$") as bad:
        run_smoke(models["target"], [models["random"]], MeasureOptions(engine="reference", tensor_parallel_size=2))
    assert format_error(bad.value, smoke) == "--tensor-parallel-size applies to --engine vllm only"
    with pytest.raises(CheckpointNotFoundError) as err:
        run_smoke(models["target"], [tmp_path / "nope"], MeasureOptions(engine="reference"))
    assert str(err.value) == f"draft {tmp_path / 'nope'}: no such folder (smoke needs a local checkpoint folder)"


# ------------------------------------------------------------------------------------ CLI


def _cli(*args: str):
    return CliRunner().invoke(main, ["smoke", *args])


def test_cli_side_by_side_json_and_plot(models, tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"prompt": p.text or p.messages[0]["content"], "category": p.category}) for p in PROMPTS)
        + "\n"
    )
    png = tmp_path / "out" / "smoke.png"
    res = _cli(
        str(models["perfect"]),
        str(models["random"]),
        "--target",
        str(models["zero_target"]),
        "--engine",
        "reference",
        "--prompts",
        str(prompts),
        "-k",
        "3",
        "--max-new-tokens",
        "5",
        "--plot",
        str(png),
    )
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "acceptance length (AL)" in out and "perfect-draft" in out and "random-draft" in out
    assert "Δ random-draft" in out and "AL by category" in out and "4.00" in out
    assert png.is_file() and f"plot: {png}" in out
    res = _cli(
        str(models["perfect"]),
        "--target",
        str(models["zero_target"]),
        "--engine",
        "reference",
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "5",
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "smoke-report.schema.json")
    assert data["drafts"][0]["total"]["acceptance_length"] == 4.0
    assert data["drafts"][0]["total"]["per_position"] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (
            ["--buckets", "natural,huge"],
            2,
            "Error: --buckets: 'huge' is not a token count (use e.g. natural,256,1024)\n",
        ),
        (["--plot", "x.svg"], 2, "Error: --plot: x.svg must end in .png\n"),
        (
            ["--category", "poetry"],
            2,
            "Error: --category: no prompts in poetry (available: chat, coding, long-document, reasoning)\n",
        ),
        (
            ["--temperature", "-1"],
            2,
            "Usage: main smoke [OPTIONS] DRAFT [DRAFT ...]\nTry 'main smoke --help' for help.\n\n"
            "Error: Invalid value for '--temperature': -1.0 is not in the range x>=0.\n",
        ),
        (
            ["--buckets", "5000"],
            2,
            "Error: --buckets: 5000 tokens leave no room for generation (at most 4028 prompt tokens fit the target's context)\n",
        ),
    ],
)
def test_cli_usage_errors(models, args: list[str], code: int, message: str) -> None:
    res = _cli(str(models["random"]), "--target", str(models["target"]), "--engine", "reference", *args)
    assert (res.exit_code, res.stderr) == (code, message)


def test_cli_missing_draft_and_bad_prompts_file(models, tmp_path: Path) -> None:
    res = _cli(str(models["random"]))
    assert res.exit_code == 2 and res.stderr.endswith("Error: Missing option '--target'.\n")
    res = _cli("--target", str(models["target"]))
    assert res.exit_code == 2 and res.stderr.endswith("Error: Missing argument 'DRAFT [DRAFT ...]'.\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": 3}\n')
    res = _cli(str(models["random"]), "--target", str(models["target"]), "--prompts", str(bad))
    assert (res.exit_code, res.stderr) == (1, f"Error: {bad}:2: 'prompt' must be a non-empty string\n")


# ----------------------------------------------------------------------------------- vLLM


@pytest.mark.vllm
def test_vllm_controls(models) -> None:
    """Three engine starts: perfect draft AL = k + 1 and random draft AL ~ 1 on vLLM, and the perfect
    draft's k sweep from its counters (AL = k + 1 at every k) with step costs from the
    concurrency-1 rates `--k-sweep` adds (the target alone's engine). The suite's only control runs
    in vLLM (they used to be repeated in test_vllm_integration.py; the sweep in test_ksweep.py, with
    an engine of its own)."""
    from eagle_convert.vllm_model.features import vllm_available, vllm_version

    if not vllm_available():
        pytest.skip("vLLM is not installed")
    k = K + 1  # 11 tokens = prefill + 2 rounds of k + 1
    perfect = run_smoke(
        models["zero_target"],
        [models["perfect"]],
        MeasureOptions(engine="vllm", k=k, max_new_tokens=11, buckets=(NATURAL, 64)),
        prompts=PROMPTS,
        k_sweep=True,
    )
    [d] = perfect.drafts
    assert d.total.acceptance_length == k + 1 and d.total.per_position == [1.0] * k
    assert d.total.num_drafts == 2 * 4  # 2 rounds per request, 2 prompts x 2 buckets
    assert d.total.num_accepted == d.total.num_draft_tokens == k * d.total.num_drafts
    assert d.total.accepted_per_pos == [d.total.num_drafts] * k and d.total.generated_tokens == 11 * 4
    # The tested vLLM gives per-request statistics; they add up to its engine-wide counters.
    assert d.per_request and all(r.counts.acceptance_length == k + 1 for r in d.requests)
    assert all(g.counts.acceptance_length == k + 1 for g in d.groups)
    assert sum(r.counts.num_drafts for r in d.requests) == d.total.num_drafts
    assert sum(r.counts.num_accepted for r in d.requests) == d.total.num_accepted
    assert perfect.throughput is not None and perfect.throughput.concurrency == [1]
    s = d.k_sweep
    assert s is not None and [r.acceptance_length for r in s.rows] == [2.0, 3.0, 4.0, 5.0]
    assert s.costs is not None and s.costs.source.startswith("vLLM per-user decode rates at concurrency 1")
    assert s.costs.target_s > 0 and s.recommended_k is not None
    # the random draft runs with a --speculative-config: its k (not smoke's default) and keys reach vLLM
    served = {"method": "eagle3", "num_speculative_tokens": K - 1, "rejection_sample_method": "standard"}
    rnd = run_smoke(
        models["target"],
        [models["random"]],
        MeasureOptions(engine="vllm", k=None, max_new_tokens=13, speculative_config=served),
        prompts=PROMPTS,
    )
    [r] = rnd.drafts
    assert r.total.acceptance_length < 1.2 and r.total.num_drafts > 0
    assert rnd.settings["k"] == K - 1
    assert r.total.num_draft_tokens == (K - 1) * r.total.num_drafts and len(r.total.accepted_per_pos) == K - 1
    assert sum(r.total.accepted_per_pos) == r.total.num_accepted and r.total.generated_tokens == 13 * 2
    assert r.per_request and sum(q.counts.num_draft_tokens for q in r.requests) == r.total.num_draft_tokens
    assert sum(q.counts.num_accepted for q in r.requests) == r.total.num_accepted
    assert rnd.engine_version == f"vllm {vllm_version()}"
    assert r.total.tokens_per_s and r.total.tokens_per_s > 0


def test_render_and_plot_totals_only(tmp_path: Path) -> None:
    """A vLLM run without per-request statistics: totals side by side, no category table."""
    from rich.console import Console

    from eagle_convert.cli.render.smoke import render_smoke
    from eagle_convert.measure.plot import panels, plot_smoke
    from eagle_convert.measure.prompts import PreparedPrompt, PromptSet
    from eagle_convert.measure.results import DraftResult, RequestResult, SmokeReport
    from eagle_convert.measure.results import deltas as _deltas

    pset = PromptSet([PreparedPrompt("a", "chat", NATURAL, [1, 2, 3])], [], "target")

    def draft(label: str, accepted: list[int]) -> DraftResult:
        total = Counts(
            requests=1,
            prompt_tokens=3,
            generated_tokens=30,
            num_drafts=10,
            num_draft_tokens=30,
            num_accepted=sum(accepted),
            accepted_per_pos=accepted,
            target_forwards=11,
            seconds=2.0,
        )
        return DraftResult(label, f"/m/{label}", "EAGLE-3", total, [], [RequestResult("a", "chat", 0, None)], False)

    drafts = [draft("eagle3", [6, 3, 1]), draft("eagle31", [7, 5, 3])]
    rep = SmokeReport(
        "/m/target",
        "vllm",
        "vllm 0.32.0",
        {"k": 3, "max_new_tokens": 30, "temperature": 0.0, "seed": 0, "tensor_parallel_size": 1},
        pset,
        drafts,
        _deltas(drafts),
    )
    console = Console(record=True, width=160)
    render_smoke(console, rep)
    text = console.export_text()
    assert "acceptance length (AL)" in text and "2.00" in text and "2.50" in text and "+0.50 (+25.0%)" in text
    assert "+20.0 pp" in text  # position 3 rate: 10% -> 30%
    assert "Per-category / per-bucket numbers are not available" in text
    assert plot_smoke(rep, tmp_path / "t.png").stat().st_size > 1000
    assert panels(rep) == ["positions"]

    # With --concurrency: a throughput panel, tokens/s by level for no speculation and each draft.
    from eagle_convert.measure.throughput import NO_SPEC, EngineRates, LevelRate, ThroughputReport

    def rates(label: str, path: str | None, tps: list[float]) -> EngineRates:
        return EngineRates(label, path, [LevelRate(c, 4, r, r, r, 0.01, None) for c, r in zip((1, 4), tps)])

    rep.throughput = ThroughputReport(
        [1, 4],
        rates(NO_SPEC, None, [20.0, 12.0]),
        [rates("eagle3", "/m/eagle3", [30.0, 15.0]), rates("eagle31", "/m/eagle31", [34.0, 16.0])],
        "cpu",
        "vllm 0.32.0",
    )
    assert panels(rep) == ["positions", "throughput"]

    def png_width(path: Path) -> int:
        return int.from_bytes(path.read_bytes()[16:20], "big")  # the IHDR chunk's width

    wide = plot_smoke(rep, tmp_path / "tput.png")
    assert png_width(wide) > png_width(tmp_path / "t.png") * 1.8  # one panel more: about twice as wide


@pytest.mark.parametrize(
    "has_vllm, has_cuda, expected", [(False, True, "reference"), (True, False, "reference"), (True, True, "vllm")]
)
def test_default_engine(monkeypatch: pytest.MonkeyPatch, has_vllm: bool, has_cuda: bool, expected: str) -> None:
    import torch

    from eagle_convert.measure import default_engine
    from eagle_convert.vllm_model import features as vllm_compat

    monkeypatch.setattr(vllm_compat, "vllm_available", lambda: has_vllm)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: has_cuda)
    assert default_engine() == expected


@pytest.mark.slow
def test_cli_trained_pair_eagle3_vs_upgrade(tmp_path: Path) -> None:
    """The done-when run: a trained EAGLE-3 draft and its EAGLE-3.1 upgrade side by side."""
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    up = tmp_path / "eagle31"
    res = CliRunner().invoke(main, ["upgrade", str(draft), "--out", str(up)])
    assert res.exit_code == 0, res.output
    png = tmp_path / "smoke.png"
    args = [
        str(draft),
        str(up),
        "--target",
        str(target),
        "--engine",
        "reference",
        "--limit",
        "1",
        "--category",
        "coding",
        "--category",
        "chat",
        "--max-new-tokens",
        "16",
        "--buckets",
        "natural,512",
    ]
    res = _cli(*args, "--json", "--plot", str(png))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "smoke-report.schema.json")
    a, b = data["drafts"]
    assert (a["variant"], b["variant"]) == ("EAGLE-3", "EAGLE-3.1")
    natural = next(g for g in a["groups"] if g["category"] == "all" and g["bucket"] == NATURAL)
    # The trained draft works on short prompts: measured AL 3.67 (24 of 27 drafts accepted); 2.0
    # would need 15 fewer, where another CPU's rounding flips a near-tie or two.
    assert natural["acceptance_length"] >= 2.0
    [delta] = data["deltas"]
    assert delta["acceptance_length"] == pytest.approx(  # --json rounds ALs to 4 decimals
        b["total"]["acceptance_length"] - a["total"]["acceptance_length"], abs=1e-3
    )
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bucket_label_is_shared_by_plots_and_report_md() -> None:
    from eagle_convert.measure import bucket_label

    assert [bucket_label(b) for b in (None, NATURAL, 1024)] == ["all", "natural", "~1024 tok"]
    assert bucket_label(256, unit="tokens") == "~256 tokens"


def test_progress_off_a_terminal_is_lines_on_stderr_and_json_stays_valid(
    models, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CliRunner's stderr is no terminal: per-prompt counts as lines on stderr, one JSON document on stdout."""
    import eagle_convert.cli.progress as progress

    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)  # a line per tick: the tiny run takes under a second
    res = _cli(
        str(models["perfect"]),
        "--target",
        str(models["zero_target"]),
        "--engine",
        "reference",
        "--limit",
        "1",
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # nothing but the JSON document on stdout
    n = data["prompts"]["count"]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(f"measure {models['perfect'].name}: ")]
    assert lines[0].startswith(f"measure {models['perfect'].name}: 0/{n} prompts (")
    assert lines[-1].startswith(f"measure {models['perfect'].name}: {n}/{n} prompts, AL 4.00 (")
    assert len(lines) == n + 1
