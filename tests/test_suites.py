"""Named prompt suites (issue 18 point 1): the shipped Spec-Bench sample and its provenance, a
prepared SPEED-Bench folder and the refusal of its placeholders, a full Spec-Bench folder, and real
long context cut to token counts of the fixture tokenizer, the same on every run."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from eagle_convert.cli.errors import format_error
from eagle_convert.errors import ConfigError, UsageError
from eagle_convert.measure.longctx import CODE_FILES, LENGTHS, build_long_prompts, parse_lengths
from eagle_convert.measure.prepare import long_rows, token_counter
from eagle_convert.measure.specbench import SOURCES
from eagle_convert.measure.speedbench import PLACEHOLDER
from eagle_convert.measure.suites import SUITES, resolve_suite

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

REDISTRIBUTABLE = {"Apache-2.0", "MIT", "CC-BY-SA-3.0"}


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------ the shipped sample


def test_shipped_sample_loads_with_provenance() -> None:
    suite = resolve_suite("spec-bench-sample")
    assert suite.label == "spec-bench-sample" and suite.notices == []
    cats = Counter(p.category for p in suite.prompts)
    shipped = {c for c, src in SOURCES.items() if src.license is not None}
    assert set(cats) == shipped and set(cats.values()) == {5}  # five rows per redistributable category
    assert "translation" not in cats and "summarization" not in cats
    for p in suite.prompts:
        prov = suite.rows.provenance[p.id]
        assert prov.license in REDISTRIBUTABLE
        assert prov.source == SOURCES[p.category].name and prov.license == SOURCES[p.category].license
        qid = p.id.removeprefix("spec-bench-")
        assert prov.origin.endswith(f"data/spec_bench/question.jsonl question_id {qid}")
        assert p.text and p.messages is None
    assert {suite.rows.provenance[p.id].turns for p in suite.prompts if p.category == "writing"} == {2}


def test_notice_names_every_shipped_source_and_licence() -> None:
    notice = (resources.files("eagle_convert") / "data" / "NOTICE").read_text(encoding="utf-8")
    for src in SOURCES.values():
        repo = src.name.split("(")[1].split(",")[0].rstrip(")")
        assert repo in notice, repo
    for licence in ("Apache License", "MIT License", "Attribution-ShareAlike 3.0"):
        assert licence in notice


# ----------------------------------------------------------------------- SPEED-Bench folder


def _speed_rows() -> list[dict]:
    def row(i: int, cat: str, *turns: str) -> dict:
        return {
            "question_id": f"q{i}",
            "category": cat,
            "sub_category": "",
            "source": "some/dataset",
            "src_id": f"s{i}",
            "messages": [{"role": "user", "content": t} for t in turns],
        }

    return [
        row(1, "coding", "Write a function that reverses a list."),
        row(2, "summarization", f"{PLACEHOLDER}\n\nSummarize: {{article}}"),
        row(3, "multilingual", "Translate 'good morning' to French.", "And to German?"),
        row(4, "qa", f"{PLACEHOLDER}\n\n{{question}}"),
        row(5, "qa", "Why is the sky blue?"),
    ]


REFUSAL = (
    "{path}: refused 2 of 5 SPEED-Bench rows: they are placeholders for text whose source licence keeps "
    "it out of SPEED-Bench (NeMo-Skills' nemo_skills/dataset/speed-bench/prepare.py fetches them)"
)


def test_speed_bench_folder_gives_rows_and_refuses_placeholders(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "speed" / "qualitative.jsonl", _speed_rows())
    _write_jsonl(tmp_path / "speed" / "throughput_1k.jsonl", _speed_rows()[:1])
    suite = resolve_suite(str(tmp_path / "speed"))
    assert [(p.id, p.category, p.text) for p in suite.prompts] == [
        ("speed-bench-q1", "coding", "Write a function that reverses a list."),
        ("speed-bench-q3", "multilingual", "Translate 'good morning' to French."),  # first turn
        ("speed-bench-q5", "qa", "Why is the sky blue?"),
    ]
    assert suite.notices == [REFUSAL.format(path=path)]
    prov = suite.rows.provenance["speed-bench-q3"]
    assert prov.turns == 2 and prov.origin == f"{path}:3" and "some/dataset (s3)" in prov.source


def test_speed_bench_raw_turns_and_all_placeholders(tmp_path: Path) -> None:
    raw = [{**r, "turns": [m["content"] for m in r.pop("messages")]} for r in _speed_rows()]
    path = _write_jsonl(tmp_path / "throughput_8k.jsonl", raw)
    assert [p.id for p in resolve_suite(str(path)).prompts] == ["speed-bench-q1", "speed-bench-q3", "speed-bench-q5"]
    only = _write_jsonl(tmp_path / "only.jsonl", [r for r in raw if r["turns"][0].startswith(PLACEHOLDER)])
    with pytest.raises(ConfigError) as err:
        resolve_suite(str(only))
    assert str(err.value) == (
        f"{only}: refused 2 of 2 SPEED-Bench rows: they are placeholders for text whose source licence keeps "
        "it out of SPEED-Bench (NeMo-Skills' nemo_skills/dataset/speed-bench/prepare.py fetches them)"
        "; no rows left to measure"
    )


def test_speed_bench_folder_without_the_default_subset(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "throughput_2k.jsonl", _speed_rows())
    with pytest.raises(ConfigError, match=r"no qualitative.jsonl .*it has throughput_2k: pass one of those files"):
        resolve_suite(str(tmp_path))


# ------------------------------------------------------------------------ Spec-Bench folder


def test_full_spec_bench_folder(tmp_path: Path) -> None:
    rows = [
        {"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Now a limerick."]},
        {"question_id": 161, "category": "translation", "turns": ["Translate German to English: Guten Tag"]},
    ]
    _write_jsonl(tmp_path / "data" / "spec_bench" / "question.jsonl", rows)
    suite = resolve_suite(str(tmp_path))
    assert [(p.id, p.text) for p in suite.prompts] == [
        ("spec-bench-81", "Write a haiku."),
        ("spec-bench-161", "Translate German to English: Guten Tag"),
    ]
    assert suite.rows.provenance["spec-bench-161"].license.startswith("not redistributable")
    assert suite.rows.provenance["spec-bench-81"].turns == 2


def test_names_files_joins_and_errors(tmp_path: Path) -> None:
    assert resolve_suite(None).label == "built-in" and resolve_suite("builtin").prompts == resolve_suite(None).prompts
    own = _write_jsonl(tmp_path / "mine.jsonl", [{"prompt": "hello there", "category": "chat"}])
    joined = resolve_suite(f"{own}+long-code:1k")
    assert [p.category for p in joined.prompts] == ["chat"] and joined.long_kinds == ("code",)
    assert joined.long_lengths == (1000,)
    with pytest.raises(UsageError) as err:
        resolve_suite("spec-bench-full")
    assert format_error(err.value) == (
        f"--prompts: spec-bench-full is neither a suite ({', '.join(SUITES)}) nor an existing file or folder"
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="neither a Spec-Bench folder"):
        resolve_suite(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="is in two of the joined suites"):
        resolve_suite("builtin+builtin")


def test_parse_lengths() -> None:
    assert parse_lengths(None) == LENGTHS == (1000, 4000, 8000, 16000, 32000)
    assert parse_lengths("4k,1k,1500") == (1000, 1500, 4000)
    with pytest.raises(UsageError, match="too short"):
        parse_lengths("100")
    with pytest.raises(UsageError, match="not a token count"):
        parse_lengths("big")


# ---------------------------------------------------------------------------- long context


@pytest.fixture(scope="module")
def tokenizer():
    from fixtures.target import build_tokenizer

    return build_tokenizer()


def test_long_context_has_the_requested_token_counts_on_every_run(tokenizer) -> None:
    count = token_counter(tokenizer)
    suite = resolve_suite("long-context")
    first, lengths = long_rows(suite, count)
    assert Counter(lengths.values()) == {n: 4 for n in LENGTHS}  # 2 kinds x 2 rows per length
    for p in first.prompts:
        n = lengths[p.id]
        got = count(p.text or "")
        assert 0.99 * n <= got <= n, (p.id, got)
        assert p.category in ("long-code", "long-prose")
    code = next(p for p in first.prompts if p.category == "long-code")
    assert f"# Lib/{CODE_FILES[0]}\n" in (code.text or "")
    prose = next(p for p in first.prompts if p.category == "long-prose")
    assert (prose.text or "").endswith("Answer in a few sentences.")
    again, _ = long_rows(resolve_suite("long-context"), token_counter(tokenizer))
    assert [(p.id, p.text) for p in again.prompts] == [(p.id, p.text) for p in first.prompts]


def test_long_context_raw_template_and_unreachable_length(tokenizer) -> None:
    count = token_counter(tokenizer, "none")
    (p,) = build_long_prompts(count, kinds=("prose",), lengths=(2000,), rows=1)
    assert 1980 <= count(p.text) <= 2000 and p.num_tokens == count(p.text)
    with pytest.raises(ConfigError, match="the whole corpus has"):
        build_long_prompts(count, kinds=("prose",), lengths=(10**8,), rows=1)


# ------------------------------------------------------------------------------- CLI wiring


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fixture target (4096-token tokenizer, 4028 prompt tokens fit) and a random draft."""
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("suites")
    return build_target(base / "target"), build_draft(base / "draft", VLLM_TINY)


def _smoke(pair: tuple[Path, Path], *args: str):
    from click.testing import CliRunner

    from eagle_convert.cli.app import main

    target, draft = pair
    common = ["--engine", "reference", "-k", "1", "--max-new-tokens", "2", "--json"]
    return CliRunner().invoke(main, ["smoke", str(draft), "--target", str(target), *common, *args])


def test_cli_smoke_refuses_speed_bench_placeholders(pair, tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "speed" / "qualitative.jsonl", _speed_rows())
    res = _smoke(pair, "--prompts", str(tmp_path / "speed"))
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[0] == "Note: " + REFUSAL.format(path=path)
    data = json.loads(res.stdout)
    assert sorted(g["category"] for g in data["drafts"][0]["groups"]) == ["coding", "multilingual", "qa"]
    assert data["prompts"]["suite"] == str(tmp_path / "speed")
    assert data["prompts"]["refused"] == [REFUSAL.format(path=path)]
    prov = {i["id"]: i["provenance"] for i in data["prompts"]["items"]}
    assert prov["speed-bench-q3"]["turns"] == 2 and prov["speed-bench-q3"]["origin"] == f"{path}:3"
    only = _write_jsonl(tmp_path / "only" / "qualitative.jsonl", _speed_rows()[1:2] + _speed_rows()[3:4])
    res = _smoke(pair, "--prompts", str(tmp_path / "only"))
    assert (res.exit_code, res.stderr) == (
        1,
        f"Error: {only}: refused 2 of 2 SPEED-Bench rows: they are placeholders for text whose source licence "
        "keeps it out of SPEED-Bench (NeMo-Skills' nemo_skills/dataset/speed-bench/prepare.py fetches them); "
        "no rows left to measure\n",
    )


def test_cli_smoke_long_context_and_sample(pair) -> None:
    res = _smoke(pair, "--prompts", "long-context:1k,8k", "--category", "long-code", "--limit", "1")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    (group,) = data["drafts"][0]["groups"]  # 8k does not fit the fixture's 4096-token context
    assert (group["category"], group["bucket"]) == ("long-code", 1000)
    (item,) = data["prompts"]["items"]
    assert item["id"] == "long-code-1k-0" and 990 <= item["prompt_tokens"] <= 1000 and item["filler_words"] == 0
    assert [(s["id"], s["bucket"]) for s in data["prompts"]["skipped"]] == [("long-code-8000", 8000)]
    res = _smoke(pair, "--prompts", "spec-bench-sample", "--category", "qa", "--limit", "2")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [g["category"] for g in data["drafts"][0]["groups"]] == ["qa"]
    assert data["prompts"]["suite"] == "spec-bench-sample" and data["prompts"]["refused"] == []
    assert {i["provenance"]["license"] for i in data["prompts"]["items"]} == {"CC-BY-SA-3.0"}
    check_schema(data, "smoke-report.schema.json")
    res = _smoke(pair, "--prompts", "spec-bench-full")
    assert res.exit_code == 2 and res.stderr.startswith("Error: --prompts: spec-bench-full is neither a suite")


def test_training_and_calibration_prompts_take_suites_but_not_long_context(tmp_path: Path) -> None:
    from eagle_convert.measure.suites import prompt_items

    items, label = prompt_items("spec-bench-sample")
    assert (len(items), label) == (55, "spec-bench-sample")
    assert prompt_items(None)[1] == "built-in"
    _write_jsonl(tmp_path / "speed" / "qualitative.jsonl", _speed_rows())
    said: list[str] = []
    items, _ = prompt_items(str(tmp_path / "speed"), say=said.append)
    assert len(items) == 3 and said == [REFUSAL.format(path=tmp_path / "speed" / "qualitative.jsonl")]
    with pytest.raises(UsageError) as err:
        prompt_items("long-context:4k", option="--train-prompts")
    assert str(err.value) == (
        "--train-prompts long-context:4k: long-context suites are for measuring (smoke, check, report); "
        "give a text suite, a JSONL file or a prepared folder"
    )


def test_report_reproduces_a_named_suite(tmp_path: Path) -> None:
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.report.stages import ReportOptions, smoke_command
    from eagle_convert.vllm_model import default_release

    opts = ReportOptions(
        MeasureOptions(engine="reference", prompts="long-context:4k", categories=("long-prose",), limit=1)
    )
    m = opts.measure.resolve("report", default_release())
    cmd = smoke_command(tmp_path / "t", [tmp_path / "d"], opts.measure)
    assert " --prompts long-context:4k --category long-prose --limit 1 " in cmd
    suite = m.suite
    assert (suite.long_kinds, suite.long_lengths, suite.long_per_length, suite.prompts) == (("prose",), (4000,), 1, [])


def test_check_policy_names_a_suite_or_a_folder_beside_it(pair, tmp_path: Path) -> None:
    from dataclasses import replace

    from eagle_convert.check.policy import load_policy
    from eagle_convert.measure import prepare_smoke_prompts
    from eagle_convert.vllm_model import default_release

    _write_jsonl(tmp_path / "speed" / "qualitative.jsonl", _speed_rows())
    for value, suite in (("spec-bench-sample", "spec-bench-sample"), ("speed", str(tmp_path / "speed"))):
        (tmp_path / "eagle-check.toml").write_text(
            f'[acceptance]\nprompts = "{value}"\ncategories = ["qa", "coding"]\nlimit = 1\n', encoding="utf-8"
        )
        asked = load_policy(tmp_path / "eagle-check.toml").acceptance
        assert asked is not None and asked.engine == "vllm"
        m = replace(asked, engine="reference", k=1).resolve(
            "check", default_release()
        )  # reference engine: no vLLM needed here
        pset = prepare_smoke_prompts(pair[0], m.suite, k=m.k, max_new_tokens=m.max_new_tokens)
        assert (pset.suite, sorted(p.category for p in pset.prompts)) == (suite, ["coding", "qa"])
        assert m.suite.label == suite
    assert m.suite.notices == [REFUSAL.format(path=tmp_path / "speed" / "qualitative.jsonl")]
