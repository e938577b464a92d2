"""`report`: content-hash stage records, the smoke --json reader, refusals (fast), and on the trained
fixture the whole report: every variant, an interruption after a stage and the resume, an edited
output rebuilt alone, and report.json's acceptance read by the same reader as smoke --json (slow).
One vllm-marked test runs the engine path with concurrency levels.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import ConfigError
from eagle_convert.measure.reader import check_smoke_dict, read_drafts
from eagle_convert.report.cache import HashMemo, StageRecord, StageStore, folder_digest, stage_key
from eagle_convert.validate.matrix import serving_summary

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema


def _cli(*args: str):
    return CliRunner().invoke(main, ["report", *args])


# ------------------------------------------------------------------ fast: cache and reader


def test_folder_digest_follows_content_not_the_model_card(tmp_path: Path) -> None:
    d = tmp_path / "draft"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"abc")
    memo = HashMemo(tmp_path / "h.json")
    first = folder_digest(d, memo)
    (d / "README.md").write_text("card with measured numbers")  # rewritten after measuring: not content
    (d / ".tmp-x").write_text("hidden temp")
    assert folder_digest(d, memo) == first
    (d / "model.safetensors").write_bytes(b"abd")
    assert folder_digest(d, memo) != first
    assert folder_digest(tmp_path / "nope", memo) == "missing"
    memo.save()
    again = HashMemo(tmp_path / "h.json")
    assert folder_digest(d, again) == folder_digest(d, memo) and again.bytes_hashed == 0  # remembered


def test_stage_key_and_store_skip_only_when_inputs_and_outputs_are_unchanged(tmp_path: Path) -> None:
    memo = HashMemo()
    store = StageStore(tmp_path, memo)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "w.bin").write_bytes(b"1")
    key = stage_key("upgrade:identity", {"a": 1}, {"draft": "h1"})
    assert key != stage_key("upgrade:identity", {"a": 2}, {"draft": "h1"})
    assert key != stage_key("upgrade:identity", {"a": 1}, {"draft": "h2"})
    store.save(StageRecord("upgrade:identity", key, {"x": 1}, {"v": ""}, 1.0, "eagle-convert upgrade ..."))
    assert store.lookup("upgrade:identity", key).result == {"x": 1}
    assert store.lookup("upgrade:identity", "other") is None  # changed input or option
    (tmp_path / "v" / "w.bin").write_bytes(b"2")
    assert store.lookup("upgrade:identity", key) is None  # an edited output reruns the stage
    shutil.rmtree(tmp_path / "v")
    assert store.lookup("upgrade:identity", key) is None  # and so does a deleted one


def _smoke_dict(tmp_path: Path) -> dict:
    from eagle_convert.measure.prompts import NATURAL, PreparedPrompt, PromptSet
    from eagle_convert.measure.results import Counts, DraftResult, Group, RequestResult, SmokeReport, deltas

    pset = PromptSet([PreparedPrompt("p", "chat", NATURAL, [1, 2])], [], "target")

    def draft(label: str, acc: int) -> DraftResult:
        c = Counts(
            requests=1,
            prompt_tokens=2,
            generated_tokens=8,
            num_drafts=4,
            num_draft_tokens=12,
            num_accepted=acc,
            accepted_per_pos=[min(acc, 4), max(acc - 4, 0), 0],
            target_forwards=5,
            seconds=0.5,
        )
        return DraftResult(
            label,
            str(tmp_path / label),
            "EAGLE-3",
            c,
            [Group("chat", NATURAL, c)],
            [RequestResult("p", "chat", NATURAL, c)],
            True,
            0.1,
        )

    drafts = [draft("a", 4), draft("b", 6)]
    settings = {"k": 3, "max_new_tokens": 8, "temperature": 0.0, "seed": 0, "buckets": [0]}
    return SmokeReport("t", "reference", "torch", settings, pset, drafts, deltas(drafts)).to_dict()


def test_reader_reads_back_what_smoke_writes_and_names_a_broken_field(tmp_path: Path) -> None:
    data = _smoke_dict(tmp_path)
    a, b = read_drafts(data)
    assert (a.total.acceptance_length, b.total.acceptance_length) == (2.0, 2.5)
    assert b.group("chat", 0).per_position == [1.0, 0.5, 0.0]
    broken = json.loads(json.dumps(data))
    del broken["drafts"][1]["total"]["num_drafts"]
    with pytest.raises(ConfigError, match=r"drafts\[1\]\.total: missing field 'num_drafts'"):
        read_drafts(broken)
    lying = json.loads(json.dumps(data))
    lying["drafts"][0]["total"]["acceptance_length"] = 3.9
    with pytest.raises(ConfigError, match="acceptance_length 3.9 disagrees with the counters"):
        read_drafts(lying)
    with pytest.raises(ConfigError, match="missing field 'drafts'"):
        check_smoke_dict(
            {"target": "t"} | {k: data[k] for k in ("engine", "engine_version", "settings", "prompts", "deltas")}
        )


# ------------------------------------------------------------------ fast: refusals


def test_refusals(tmp_path: Path, built_fixtures) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("mine")
    d = shutil.copytree(built_fixtures("vllm-tiny"), tmp_path / "d")  # a draft: the folder resolver opens it
    t = tmp_path / "t"
    t.mkdir()
    (t / "config.json").write_text("{}")
    res = _cli(
        str(d), "--target", str(t), "--out", str(tmp_path / "o"), "--engine", "reference", "--concurrency", "1,4"
    )
    assert res.exit_code == 2 and "--concurrency measures per-user tokens/s with --engine vllm only" in res.output
    res = _cli(str(tmp_path / "missing"), "--target", str(t), "--out", str(tmp_path / "o"), "--engine", "reference")
    assert res.exit_code == 1 and "missing: no such folder" in res.output
    res = _cli(str(d), "--target", str(t), "--out", str(tmp_path / "junk"), "--engine", "reference")
    assert res.exit_code == 1 and "is not empty and is not a report folder" in res.output
    assert (tmp_path / "junk" / "file.txt").read_text() == "mine"
    res = _cli(str(d), "--target", str(t), "--out", str(d / "r"), "--engine", "reference")
    assert res.exit_code == 1 and "must not be, contain or lie inside the draft" in res.output


def test_cli_interrupt_names_the_finished_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import eagle_convert.report.run as report_run

    def interrupted(*_a, on_stage, **_k):
        on_stage("inspect")
        on_stage("upgrade")
        raise KeyboardInterrupt

    monkeypatch.setattr(report_run, "run_report", interrupted)
    out = tmp_path / "o"
    res = _cli("d", "--target", "t", "--out", str(out), "--engine", "reference")
    assert res.exit_code == 130
    assert res.output.endswith(
        f"Error: interrupted (SIGINT) after 2 finished stages, which are recorded in {out}; "
        "run the same command again to resume\n"
    )


# ------------------------------------------------------------------ slow: the trained fixture


class _Interrupt(Exception):
    pass


def _opts(tmp_path: Path, **kw):
    from eagle_convert.finetune import FinetuneOptions
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.report.stages import ReportOptions
    from fixtures.corpus_prompts import write_prompts

    prompts = write_prompts(tmp_path / "corpus.jsonl", 8)  # disjoint from the measured built-in prompts
    kw = {"engine": "reference", "categories": ("coding", "chat"), "limit": 1, "max_new_tokens": 16} | kw
    measure = MeasureOptions(**{k: kw.pop(k) for k in list(kw) if k in MeasureOptions.__dataclass_fields__})
    train = FinetuneOptions(prompts=str(prompts), continuation_tokens=16, steps_fc_norm=4, steps_all=4)
    return ReportOptions(measure=measure, calibration_prompts=str(prompts), train=train, **kw)


def _stable(data: dict) -> dict:
    """report.json without what differs between runs by design (timings, which stages ran)."""
    acc = json.loads(json.dumps(data["acceptance"]))
    for d in acc["drafts"]:
        d.pop("load_seconds")
        sweep = d.get("k_sweep")
        if sweep:  # the step costs are timed, so the speedups and the recommended k follow the clock
            for key in ("step_costs", "recommended_k", "recommended_speedup", "at_edge"):
                sweep.pop(key)
            for row in sweep["rows"]:
                row.pop("expected_speedup")
        for c in [d["total"], *d["groups"], *d["requests"]]:
            c.pop("seconds", None)
            c.pop("tokens_per_s", None)
    for x in acc["deltas"]:
        x.pop("tokens_per_s_ratio")
    acc.pop("seconds")
    return {
        "acceptance": acc,
        "variants": data["variants"],
        "checks": data["checks"],
        "commands": data["commands"],
        "calibration": data["calibration"],
    }


@pytest.mark.slow
def test_fixture_report_every_variant_resume_and_rebuild(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import torch

    from eagle_convert.report.run import run_report
    from fixtures.trained import build_trained_pair

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same kernels every run, whatever the machine's load
    try:
        target, draft = build_trained_pair(log=lambda _m: None)
        out = tmp_path / "report"
        opts = _opts(tmp_path)
        seen: list[str] = []

        def stop_after_finetune(ev) -> None:
            seen.append(ev.name)
            if ev.name == "finetune":
                raise _Interrupt

        lines: list[str] = []
        capfd.readouterr()
        with pytest.raises(_Interrupt):
            run_report(draft, target, out, opts, progress=lines.append, on_stage=stop_after_finetune)
        assert seen == ["inspect", "upgrade:identity", "upgrade:calibrated", "finetune"]
        # Quiet progress: one "calibrate:" prefix, and no transformers "Loading weights" bar.
        assert f"  calibrate: loading {target.name}" in lines
        assert not [m for m in lines if "calibrate: calibrate:" in m]
        assert "Loading weights" not in capfd.readouterr().err
        assert not (out / "report.json").exists()

        first = run_report(draft, target, out, opts)  # resumes: the four finished stages are skipped
        assert first.skipped == seen
        assert sorted(first.ran) == sorted(
            [
                f"{s}:{v}"
                for s in ("validate", "smoke", "drift")
                for v in ("eagle3", "eagle31-identity", "eagle31-calibrated", "eagle31-finetuned")
            ]
        )

        # An edited output is rebuilt; it comes back byte-identical, so nothing that reads it reruns.
        weights = out / "eagle31-identity" / "model.safetensors"
        blob = bytearray(weights.read_bytes())
        blob[-1] ^= 0xFF
        weights.write_bytes(bytes(blob))
        second = run_report(draft, target, out, opts)
        assert second.ran == ["upgrade:identity"]
        # A changed option reruns only what it feeds (the measurements), nothing upstream.
        third = run_report(draft, target, out, _opts(tmp_path, max_new_tokens=12))
        measured = [
            f"{s}:{v}"
            for s in ("smoke", "drift")
            for v in ("eagle3", "eagle31-identity", "eagle31-calibrated", "eagle31-finetuned")
        ]
        assert sorted(third.ran) == sorted(measured)
        fourth = run_report(draft, target, out, opts)
        assert fourth.ran == measured
        [side] = [c["command"] for c in fourth.data["commands"] if c["stage"].startswith("smoke ")]
        smoke = CliRunner().invoke(main, shlex.split(side)[1:])
        for row in fourth.data["commands"]:  # every commands.sh line parses, in its current form
            argv = shlex.split(row["command"])
            root = click.Context(main, info_name="main", **main.context_settings)
            cmd = main.get_command(root, argv[1])
            assert cmd is not None, row
            cmd.make_context(argv[1], argv[2:], parent=root)
    finally:
        torch.set_num_threads(threads)
    assert _stable(fourth.data) == _stable(first.data) == _stable(second.data)

    data = json.loads((out / "report.json").read_text())
    check_schema(data, "report.schema.json")
    assert [v["name"] for v in data["variants"]] == [
        "eagle3",
        "eagle31-identity",
        "eagle31-calibrated",
        "eagle31-finetuned",
    ]
    assert [v["variant"] for v in data["variants"]] == ["EAGLE-3", "EAGLE-3.1", "EAGLE-3.1", "EAGLE-3.1"]
    # The same reader reads report.json's acceptance and smoke --json.
    drafts = read_drafts(data["acceptance"], "report.json acceptance")
    assert [d.label for d in drafts] == [v["name"] for v in data["variants"]]
    assert smoke.exit_code == 0, smoke.output
    direct = read_drafts(json.loads(smoke.stdout), "smoke --json")
    # The report's smoke command reproduces its counters exactly (same engine, prompts, seed).
    assert [(d.total.num_drafts, d.total.num_accepted) for d in direct] == [
        (d.total.num_drafts, d.total.num_accepted) for d in drafts
    ]
    # Calibrated fc_norm: much closer to the EAGLE-3 draft than ones (first-step agreement, held out).
    cal = data["calibration"]
    assert cal["agreement"] > cal["agreement_identity"] + 0.3
    for v in data["variants"][1:]:
        card = (Path(v["path"]) / "README.md").read_text()
        assert "## Measured acceptance" in card and f"**{v['name']}** (this draft)" in card
        assert "### Which k to serve with" in card  # the k sweep of every variant (report always runs it)
        assert f"**vLLM releases**: {serving_summary(Path(v['path']))}." in card
    for name in ("report.md", "report.png", "al.png", "positions.png", "buckets.png", "commands.sh"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    md = (out / "report.md").read_text()
    assert "## Which k to serve with" in md
    assert all(
        d["k_sweep"]["step_costs"]["source"] == "reference engine: timed steps" for d in data["acceptance"]["drafts"]
    )
    assert "## Reproduce each step" in md and "--init calibrated" in md
    # The drift panel: every variant, drift's verdict line, the plot, the command.
    assert [d["label"] for d in data["drift"]["drafts"]] == [v["name"] for v in data["variants"]]
    assert "## Attention drift by draft depth" in md
    for d in data["drift"]["drafts"]:
        assert f"**{d['label']}** ({d['variant']}; " in md and d["verdict"]["text"] in md
    assert (out / "drift.png").read_bytes()[:4] == b"\x89PNG" and data["plots"]["drift.png"] == "drift.png"
    assert data["commands"][-1]["command"].startswith("eagle-convert drift ")


@pytest.mark.slow
def test_fixture_report_drift_panel_resumes_and_turns_off(tmp_path: Path) -> None:
    """Two variants: without drift, then with it (only the drift stages run, in one run_drift call),
    again (nothing runs, the same panel), and off again (no panel, no drift.png, nothing runs)."""
    from eagle_convert.drift import DriftOptions
    from eagle_convert.report.run import run_report
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    out = tmp_path / "report"
    small = dict(calibrate=False, finetune=False, categories=("chat",), drifting=DriftOptions(depth=4))
    off = run_report(draft, target, out, _opts(tmp_path, drift=False, **small))
    assert off.data["drift"] is None and not (out / "drift.png").exists()
    assert not [n for n in off.ran if n.startswith("drift:")]
    assert "Attention drift" not in (out / "report.md").read_text()
    check_schema(off.data, "report.schema.json")

    lines: list[str] = []
    on = run_report(draft, target, out, _opts(tmp_path, **small), progress=lines.append)
    assert on.ran == ["drift:eagle3", "drift:eagle31-identity"]
    assert len([m for m in lines if m.startswith("report: drift of ")]) == 1  # one run_drift call for both
    check_schema(on.data, "report.schema.json")
    drift = on.data["drift"]
    assert [d["label"] for d in drift["drafts"]] == ["eagle3", "eagle31-identity"]
    assert drift["settings"]["depth"] == 4 and all(len(d["overall"]["depths"]) == 4 for d in drift["drafts"])
    eagle3, ident = drift["drafts"]
    assert (eagle3["fc_norm"], ident["fc_norm"], ident["norm_output"]) == (False, True, True)
    md = (out / "report.md").read_text()
    verdicts = [ln for ln in md.splitlines() if ln.startswith("**eagle") and (": drifts" in ln or ": stable" in ln)]
    assert len(verdicts) == 2, verdicts
    assert (out / "drift.png").read_bytes()[:4] == b"\x89PNG"

    again = run_report(draft, target, out, _opts(tmp_path, **small))
    assert again.ran == [] and {"drift:eagle3", "drift:eagle31-identity"} <= set(again.skipped)
    assert again.data["drift"] == drift

    off2 = run_report(draft, target, out, _opts(tmp_path, drift=False, **small))
    assert off2.ran == [] and off2.data["drift"] is None and not (out / "drift.png").exists()


@pytest.mark.vllm
def test_fixture_report_vllm_per_user_throughput_fewest_engines_and_resume(tmp_path: Path) -> None:
    """The engine path: four variants and the target alone in one worker, per-user tokens/s at
    concurrency 1 and 4 beside AL, the CPU note; a re-run starts no engine at all. The three
    EAGLE-3.1 variants share one engine (two swaps), so 3 engine starts instead of 5."""
    from eagle_convert.measure.throughput import MIN_REQUESTS, NO_SPEC
    from eagle_convert.report.run import run_report
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    out = tmp_path / "report"
    opts = _opts(tmp_path, engine="vllm", categories=("chat",), concurrency=(1, 4))
    first = run_report(draft, target, out, opts)
    check_schema(first.data, "report.schema.json")  # the throughput object included
    acc = first.data["acceptance"]
    variants = ["eagle3", "eagle31-identity", "eagle31-calibrated", "eagle31-finetuned"]
    assert [d["label"] for d in acc["drafts"]] == variants
    assert acc["engine"] == "vllm" and acc["drafts"][0]["total"]["acceptance_length"] > 1.5  # a trained draft
    t = acc["throughput"]
    assert (t["settings"]["engine_starts"], t["settings"]["draft_swaps"]) == (3, 2)
    assert t["baseline"]["label"] == NO_SPEC and [d["label"] for d in t["drafts"]] == variants
    for d in [t["baseline"], *t["drafts"]]:
        assert [lv["concurrency"] for lv in d["levels"]] == [1, 4]
        assert all(lv["requests"] >= MIN_REQUESTS and lv["per_user_tokens_per_s"] > 0 for lv in d["levels"])
    assert all(t["speedup"][name][c] > 0 for name in variants for c in ("1", "4"))
    if t["device"] == "cpu":  # honest on a CPU, in report.json and report.md
        assert "do not predict a GPU" in t["note"]
        assert "Read this before the speedups" in (out / "report.md").read_text()
    else:
        assert t["note"] is None
    assert (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert read_drafts(acc, "report.json acceptance")[0].total.num_drafts > 0

    again = run_report(draft, target, out, opts)
    assert again.ran == []  # nothing changed: no vLLM engine starts
    assert again.data["acceptance"]["throughput"] == t


def test_a_refused_stage_is_named_and_the_finished_ones_stay_recorded(tmp_path: Path, built_fixtures) -> None:
    """An EAGLE-3.1 input: inspect runs, the upgrade refuses with one line naming the stage (exit 1)."""
    draft = built_fixtures("vllm-eagle31")
    out = tmp_path / "r"
    res = _cli(str(draft), "--target", str(draft.parent / "t"), "--out", str(out), "--engine", "reference")
    assert res.exit_code == 1 and "no such folder" in res.output  # the target is checked before any stage
    target = tmp_path / "t"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"hidden_size": 64, "vocab_size": 128, "num_hidden_layers": 4}))
    res = _cli(str(draft), "--target", str(target), "--out", str(out), "--engine", "reference")
    assert res.exit_code == 1, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith("Error: report stage upgrade:identity: ")
    assert "nothing to upgrade" in errors[0] and "Traceback" not in res.output
    assert [p.name for p in (out / ".report" / "stages").iterdir()] == ["inspect.json"]
