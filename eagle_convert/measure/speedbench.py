"""SPEED-Bench (nvidia/SPEED-Bench) from a folder the user prepared: never shipped, only read.

SPEED-Bench's licence does not allow redistributing it, so eagle-convert reads a copy the user
made. Two shapes are read, one JSON object per line:

- the folder NeMo-Skills' `nemo_skills/dataset/speed-bench/prepare.py` writes (what vLLM 0.32's
  `vllm bench serve --dataset-name speed_bench --dataset-path FOLDER` reads): `<subset>.jsonl` per
  subset (`qualitative`, `throughput_1k` ... `throughput_32k`), rows with `messages` (one user
  message per turn), `category`, `source`, `src_id`;
- the rows as the dataset itself has them, with `turns` (a list of strings) instead of `messages`.

In the dataset itself, rows whose source's licence keeps the text out of SPEED-Bench are
placeholders: their first turn starts with `PLACEHOLDER` and names where to fetch the text
(prepare.py fetches it). Those rows are refused, with one line saying how many and why; a file of
nothing but placeholders is an error. A multi-turn row is measured on its first turn, as vLLM 0.32's
`SpeedBench.load_data` does (`provenance.FIRST_TURN`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.errors import ConfigError
from eagle_convert.measure.prompts import Prompt, json_lines
from eagle_convert.measure.provenance import Provenance, SuiteRows, suite_file_lines

# The placeholder text of restricted rows (NeMo-Skills' speed-bench prepare.py, TURNS_PLACEHOLDER).
PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
SUBSETS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
DEFAULT_SUBSET = "qualitative"  # vLLM 0.32's --speed-bench-dataset-subset default
LICENSE = "SPEED-Bench's licence (nvidia/SPEED-Bench; not redistributable)"
FETCH_HINT = "NeMo-Skills' nemo_skills/dataset/speed-bench/prepare.py fetches them"


def is_speed_bench_row(obj: Any) -> bool:
    """Whether a JSON row has SPEED-Bench's shape: `src_id` plus `messages` or `turns`."""
    return isinstance(obj, dict) and "src_id" in obj and ("messages" in obj or "turns" in obj)


def speed_bench_file(folder: Path, subset: str = DEFAULT_SUBSET) -> Path | None:
    """The subset's file in a prepared folder (`<subset>.jsonl`); None when the folder has none.

    Raises:
        ConfigError: the folder holds other subsets but not this one (names those it has).
    """
    path = folder / f"{subset}.jsonl"
    if path.is_file():
        return path
    present = [s for s in SUBSETS if (folder / f"{s}.jsonl").is_file()]
    if present:
        raise ConfigError(
            f"{folder}: no {subset}.jsonl in this SPEED-Bench folder "
            f"(it has {', '.join(present)}: pass one of those files)"
        )
    return None


def refusal_line(path: str | Path, refused: int, total: int) -> str:
    """The one line that refuses SPEED-Bench's placeholder rows: how many, and why."""
    return (
        f"{path}: refused {refused} of {total} SPEED-Bench rows: they are placeholders for text whose "
        f"source licence keeps it out of SPEED-Bench ({FETCH_HINT})"
    )


def read_speed_bench(path: str | Path, *, subset: str = DEFAULT_SUBSET) -> SuiteRows:
    """Read a prepared SPEED-Bench folder (its `<subset>.jsonl`) or one of its files.

    Args:
        path: the folder, or a `.jsonl` file of it.
        subset: which file of a folder (`SUBSETS`); ignored for a file.

    Returns:
        `SuiteRows`: one `Prompt` per row that has its text (its first turn; id `speed-bench-<n>`
        from the row's `question_id`, else its line), provenance naming the row's `source` and
        `src_id`; `notices` holds `refusal_line` when placeholder rows were refused.

    Raises:
        ConfigError: no such file, a row that is not JSON or has neither `messages` nor `turns`
            (file:line), or every row a placeholder (the refusal line, then "nothing left").
    """
    path, lines = suite_file_lines(
        Path(path),
        lambda folder: speed_bench_file(folder, subset),
        missing=f"no {subset}.jsonl in this SPEED-Bench folder",
        what="SPEED-Bench rows",
    )
    rows = SuiteRows([])
    total = refused = 0
    for n, obj in json_lines(lines, str(path)):
        total += 1
        where = f"{path}:{n}"
        turns = _turns(obj, where)
        if turns[0].startswith(PLACEHOLDER):
            refused += 1
            continue
        pid = f"speed-bench-{obj.get('question_id', n)}"
        if pid in rows.provenance:
            raise ConfigError(f"{where}: duplicate question_id {obj.get('question_id')!r}")
        category = obj.get("category") or "speed-bench"
        if not isinstance(category, str):
            raise ConfigError(f"{where}: 'category' must be a string")
        source = f"SPEED-Bench {path.stem}, from {obj.get('source', 'unknown')} ({obj.get('src_id', '?')})"
        rows.prompts.append(Prompt(pid, category, text=turns[0]))
        rows.provenance[pid] = Provenance(source, LICENSE, where, len(turns))
    if refused:
        rows.notices.append(refusal_line(path, refused, total))
    if not rows.prompts:
        if refused:
            raise ConfigError(refusal_line(path, refused, total) + "; no rows left to measure")
        raise ConfigError(f"{path}: no SPEED-Bench rows (expected one JSON object per line)")
    return rows


def _turns(obj: Any, where: str) -> list[str]:
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: expected a JSON object with 'messages' or 'turns'")
    if "messages" in obj:
        msgs = obj["messages"]
        if not isinstance(msgs, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs
        ):
            raise ConfigError(f"{where}: 'messages' must be a list of objects with string 'content'")
        turns = [m["content"] for m in msgs if m.get("role", "user") == "user"]
    elif "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise ConfigError(f"{where}: 'turns' must be a list of strings")
    else:
        raise ConfigError(f"{where}: needs 'messages' (prepared) or 'turns' (as downloaded)")
    if not turns or not turns[0].strip():
        raise ConfigError(f"{where}: no user turn with text")
    return turns
