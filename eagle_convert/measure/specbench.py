"""Spec-Bench (hemingkx/Spec-Bench, Apache-2.0): the shipped sample and a user's full copy.

Spec-Bench's `data/spec_bench/question.jsonl` has 480 rows, `{"question_id", "category", "turns"}`,
in 13 categories taken from six public datasets. Its own licence (Apache-2.0) covers the
compilation; each row's text keeps its source's licence (`SOURCES`). The package ships a stratified
sample (`data/spec_bench_sample.jsonl`, five rows per category, `scripts/make_specbench_sample.py`)
of the categories whose source licence allows redistribution, with the provenance of every row and
`data/NOTICE`. The full file is read from a path the user gives (`read_spec_bench`), as
`vllm bench serve --dataset-name spec_bench --dataset-path question.jsonl` reads it.

A two-turn row (MT-Bench) is measured on its first turn (`provenance.FIRST_TURN`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from eagle_convert.errors import ConfigError
from eagle_convert.measure.prompts import Prompt, json_lines
from eagle_convert.measure.provenance import Provenance, SuiteRows, suite_file_lines

SAMPLE_FILE = "spec_bench_sample.jsonl"
SPEC_BENCH_COMMIT = "fd2c1cd"  # the snapshot the sample was drawn from (question.jsonl last changed in 66230f1)
SPEC_BENCH_PATH = "data/spec_bench/question.jsonl"
_REQUIRED = ("question_id", "category", "turns")


@dataclass(frozen=True)
class Source:
    """One source dataset of Spec-Bench: its name, licence (None: redistribution not granted), why."""

    name: str
    license: str | None
    note: str = ""


_MT_BENCH = Source("MT-Bench (lm-sys/FastChat, fastchat/llm_judge/data/mt_bench/question.jsonl)", "Apache-2.0")
_NQ = Source("Natural Questions (google-research-datasets/natural-questions)", "CC-BY-SA-3.0")

# Spec-Bench category -> the dataset its rows come from (Xia et al., 2024, "Unlocking Efficiency in
# Large Language Model Inference", section 6: MT-Bench, WMT14 DE-EN, CNN/Daily Mail, Natural
# Questions, GSM8K, and Natural Questions with DPR's retrieved Wikipedia passages for RAG).
SOURCES: dict[str, Source] = {
    **{
        cat: _MT_BENCH
        for cat in ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
    },
    "translation": Source(
        "WMT14 DE-EN (statmt.org/wmt14)", None, "news test sets released for research use, no redistribution grant"
    ),
    "summarization": Source(
        "CNN/Daily Mail (abisee/cnn-dailymail)", None, "the articles are the newspapers' copyright"
    ),
    "qa": _NQ,
    "math_reasoning": Source("GSM8K (openai/grade-school-math)", "MIT"),
    "rag": Source(
        "Natural Questions with DPR Wikipedia passages (facebookresearch/DPR)",
        "CC-BY-SA-3.0",
        "questions from Natural Questions, passages from Wikipedia",
    ),
}


def is_spec_bench_row(obj: Any) -> bool:
    """Whether a JSON row has Spec-Bench's shape (`question_id`, `category`, `turns`) and is not a
    SPEED-Bench row (which has `src_id`)."""
    return isinstance(obj, dict) and all(k in obj for k in _REQUIRED) and "src_id" not in obj


def spec_bench_file(folder: Path) -> Path | None:
    """Spec-Bench's question file in a folder the user prepared: `question.jsonl` at its top, or
    the repository layout's `data/spec_bench/question.jsonl`; None when neither is there."""
    for candidate in (folder / "question.jsonl", folder / SPEC_BENCH_PATH):
        if candidate.is_file():
            return candidate
    return None


def sample_rows() -> SuiteRows:
    """The shipped stratified sample, each row with the provenance written next to it.

    Returns:
        `SuiteRows` of the sample (one `Prompt` per row, its first turn; ids `spec-bench-<question_id>`).

    Raises:
        ConfigError: the shipped file is damaged (a row without its provenance fields).
    """
    where = f"eagle_convert/data/{SAMPLE_FILE}"
    lines = (resources.files("eagle_convert") / "data" / SAMPLE_FILE).read_text(encoding="utf-8").splitlines()
    rows = SuiteRows([])
    for n, obj in _json_rows(lines, where):
        prompt, turns = _prompt(obj, f"{where}:{n}")
        for key in ("source", "license", "origin"):
            if not isinstance(obj.get(key), str):
                raise ConfigError(f"{where}:{n}: no {key!r} (every shipped row names its provenance)")
        rows.prompts.append(prompt)
        rows.provenance[prompt.id] = Provenance(obj["source"], obj["license"], obj["origin"], turns)
    return rows


def read_spec_bench(path: str | Path) -> SuiteRows:
    """Read a Spec-Bench `question.jsonl` (or a folder holding one, see `spec_bench_file`).

    Args:
        path: the file, or the folder the user prepared.

    Returns:
        `SuiteRows`, every row measured on its first turn; provenance from `SOURCES` by category
        (an unknown category is kept, its source "unknown").

    Raises:
        ConfigError: no question file, unreadable, a row that is not JSON or lacks a field (file:line).
    """
    path, lines = suite_file_lines(
        Path(path),
        spec_bench_file,
        missing=f"no question.jsonl (nor {SPEC_BENCH_PATH}) in this Spec-Bench folder",
        what="Spec-Bench questions",
    )
    rows = SuiteRows([])
    for n, obj in _json_rows(lines, str(path)):
        prompt, turns = _prompt(obj, f"{path}:{n}")
        src = SOURCES.get(prompt.category, Source("unknown (not a Spec-Bench category)", None))
        licence = src.license or f"not redistributable ({src.note or 'no licence known'})"
        rows.prompts.append(prompt)
        rows.provenance[prompt.id] = Provenance(src.name, licence, f"{path}:{n}", turns)
    if not rows.prompts:
        raise ConfigError(f"{path}: no Spec-Bench rows (expected one JSON object per line)")
    return rows


def _json_rows(lines: list[str], where: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for n, obj in json_lines(lines, where):
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}:{n}: expected a JSON object with {', '.join(_REQUIRED)}")
        out.append((n, obj))
    return out


def _prompt(obj: dict[str, Any], where: str) -> tuple[Prompt, int]:
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise ConfigError(f"{where}: no {', '.join(repr(k) for k in missing)} (a Spec-Bench row has {_REQUIRED})")
    turns, category = obj["turns"], obj["category"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ConfigError(f"{where}: 'turns' must be a non-empty list of non-empty strings")
    if not isinstance(category, str) or not category:
        raise ConfigError(f"{where}: 'category' must be a non-empty string")
    return Prompt(f"spec-bench-{obj['question_id']}", category, text=turns[0]), len(turns)
