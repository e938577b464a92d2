"""`report`: content-hash stage records, the smoke --json reader, refusals (fast), and on the trained
fixture the whole report: every variant, an interruption after a stage and the resume, an edited
output rebuilt alone, and report.json's acceptance read by the same reader as smoke --json (slow).
One vllm-marked test runs the engine path with concurrency levels.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import ConfigError
from eagle_convert.report.cache import HashMemo, StageRecord, StageStore, folder_digest, stage_key
from eagle_convert.smoke.reader import check_smoke_dict, read_drafts


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
    from eagle_convert.smoke.prompts import NATURAL, PreparedPrompt, PromptSet
    from eagle_convert.smoke.run import Counts, DraftResult, Group, RequestResult, SmokeReport, deltas

    pset = PromptSet([PreparedPrompt("p", "chat", NATURAL, [1, 2])], [], "target")

    def draft(label: str, acc: int) -> DraftResult:
        c = Counts(requests=1, prompt_tokens=2, generated_tokens=8, num_drafts=4, num_draft_tokens=12,
                   num_accepted=acc, accepted_per_pos=[min(acc, 4), max(acc - 4, 0), 0], target_forwards=5,
                   seconds=0.5)
        return DraftResult(label, str(tmp_path / label), "EAGLE-3", c, [Group("chat", NATURAL, c)],
                           [RequestResult("p", "chat", NATURAL, c)], True, 0.1)

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
        check_smoke_dict({"target": "t"} | {k: data[k] for k in ("engine", "engine_version", "settings", "prompts",
                                                                   "deltas")})


# ------------------------------------------------------------------ fast: refusals


def test_refusals(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("mine")
    d = tmp_path / "d"
    d.mkdir()
    (d / "config.json").write_text("{}")
    res = _cli(str(d), "--target", str(d), "--out", str(tmp_path / "o"), "--engine", "reference",
               "--concurrency", "1,4")
    assert res.exit_code == 2 and "--concurrency measures per-user tokens/s with --engine vllm only" in res.output
    res = _cli(str(tmp_path / "missing"), "--target", str(d), "--out", str(tmp_path / "o"), "--engine", "reference")
    assert res.exit_code == 1 and "missing: no such folder" in res.output
    res = _cli(str(d), "--target", str(d), "--out", str(tmp_path / "junk"), "--engine", "reference")
    assert res.exit_code == 1 and "is not empty and is not a report folder" in res.output
    assert (tmp_path / "junk" / "file.txt").read_text() == "mine"
    res = _cli(str(d), "--target", str(d), "--out", str(d / "r"), "--engine", "reference")
    assert res.exit_code == 1 and "must not be, contain or lie inside the draft" in res.output
