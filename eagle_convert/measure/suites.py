"""Named prompt suites: what `--prompts NAME|FILE|DIR` names, resolved to prompts with provenance.

| name | what |
|---|---|
| `builtin` | the set written for this project (`data/prompts.jsonl`), as before suites existed |
| `spec-bench-sample` | the shipped stratified sample of Spec-Bench (`measure/specbench.py`) |
| `long-code[:LENGTHS]` | real long context from the standard library's sources (`measure/longctx.py`) |
| `long-prose[:LENGTHS]` | real long context from `pydoc_data.topics` |
| `long-context[:LENGTHS]` | both; LENGTHS like `1k,4k` (default 1k,4k,8k,16k,32k) |

A FILE is a JSONL file of this project's shape (`prompt` or `messages`), of Spec-Bench's
(`question_id`, `category`, `turns`) or of SPEED-Bench's (`src_id`, `messages` or `turns`),
recognised by its first row. A DIR is a folder the user prepared: Spec-Bench's (`question.jsonl`,
or the repository's `data/spec_bench/question.jsonl`) or SPEED-Bench's (`qualitative.jsonl`, the
default subset, next to `throughput_*.jsonl`). Suites join with `+`
(`builtin+long-context:4k`). Long-context prompts depend on the target's tokenizer and template,
so they are cut when the tokenizer is loaded (`measure/prepare.py`); the rest is read at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.errors import ConfigError, UsageError
from eagle_convert.measure.longctx import KINDS, ROWS_PER_LENGTH, parse_lengths
from eagle_convert.measure.prompts import Prompt, builtin_prompts, load_prompts, select_prompts
from eagle_convert.measure.provenance import Provenance, SuiteRows
from eagle_convert.measure.specbench import is_spec_bench_row, read_spec_bench, sample_rows, spec_bench_file
from eagle_convert.measure.speedbench import (
    DEFAULT_SUBSET,
    SUBSETS,
    is_speed_bench_row,
    read_speed_bench,
    speed_bench_file,
)

BUILTIN = "builtin"
BUILTIN_LABEL = "built-in"  # the label recorded for the built-in set (smoke --json, report.json)
_BUILTIN_PROVENANCE = Provenance("eagle-convert built-in prompts", "Apache-2.0", "eagle_convert/data/prompts.jsonl")
_LONG = {"long-code": ("code",), "long-prose": ("prose",), "long-context": KINDS}

SUITES: dict[str, str] = {
    BUILTIN: "the set written for this project: coding, chat, reasoning, long-document",
    "spec-bench-sample": "a stratified sample of Spec-Bench (5 rows per redistributable category, 55 rows)",
    "long-code": "real long context: the standard library's sources, ending at a continuation point",
    "long-prose": "real long context: pydoc_data.topics, ending with a question",
    "long-context": "long-code and long-prose",
}
PROMPTS_HELP = (
    "Prompt suite: builtin (default), spec-bench-sample, long-code, long-prose or long-context "
    "(real long context; :1k,4k,... picks lengths, default 1k,4k,8k,16k,32k tokens), a JSONL file "
    '({"prompt": ...} or {"messages": [...]} per line, or Spec-Bench / SPEED-Bench rows), or a '
    "prepared Spec-Bench or SPEED-Bench folder; join with +."
)


@dataclass(frozen=True)
class Suite:
    """What a `--prompts` value names, before the target's tokenizer is loaded.

    Attributes:
        label: what the run records: "built-in", a suite name, or the path.
        rows: the prompts read now (everything but long context), their provenance, refusal lines.
        long_kinds: "code" and/or "prose" when the value names long context; else empty.
        long_lengths: the token counts to cut long-context prompts to.
        long_per_length: long-context prompts per kind and length (`--limit` lowers it).
    """

    label: str
    rows: SuiteRows
    long_kinds: tuple[str, ...] = ()
    long_lengths: tuple[int, ...] = ()
    long_per_length: int = ROWS_PER_LENGTH

    @property
    def prompts(self) -> list[Prompt]:
        """The prompts read now (long-context ones come from `long_rows`)."""
        return self.rows.prompts

    @property
    def notices(self) -> list[str]:
        """One line per group of refused rows (SPEED-Bench placeholders); empty when none."""
        return self.rows.notices


def resolve_suite(value: str | Path | None) -> Suite:
    """Resolve `--prompts NAME|FILE|DIR` (None: the built-in set); `A+B` joins suites.

    Args:
        value: a suite name (`SUITES`, long-context ones with `:LENGTHS`), a JSONL file or a
            prepared Spec-Bench / SPEED-Bench folder, or several joined with `+`.

    Returns:
        The `Suite`: its prompts with provenance, read now, and the long-context request.

    Raises:
        UsageError: neither a name nor an existing path (lists the names).
        ConfigError: a file or folder that cannot be read as a suite (names the file and line),
            SPEED-Bench rows that are all placeholders, or an id in two joined suites.
    """
    if value is None:
        return _builtin()
    text = str(value)
    if "+" in text and not Path(text).exists():
        return _join([resolve_suite(part) for part in text.split("+") if part.strip()], text)
    return _one(text)


def as_suite(prompts: Sequence[Prompt] | Suite | None) -> Suite:
    """A `prompts=` argument as a suite: None is the built-in set, `Prompt`s are "custom"."""
    if prompts is None:
        return resolve_suite(None)
    if isinstance(prompts, Suite):
        return prompts
    return Suite("custom", SuiteRows(list(prompts)))


def select_suite(
    suite: Suite, categories: Sequence[str] = (), limit: int | None = None, *, option: str = "--category"
) -> Suite:
    """--category and --limit over a suite, as `select_prompts` over a list: only these categories
    (long context's are `long-code` and `long-prose`), at most `limit` per category (for long
    context: per category and length).

    Raises:
        UsageError: a category the suite does not have (names those it has).
    """
    long_cats = {f"long-{k}": k for k in suite.long_kinds}
    text_cats = {p.category for p in suite.prompts}
    if categories:
        unknown = [c for c in categories if c not in text_cats and c not in long_cats]
        if unknown:
            known = sorted(text_cats | set(long_cats))
            raise UsageError(f"{option}: no prompts in {', '.join(unknown)} (available: {', '.join(known)})")
    wanted_text = [c for c in categories if c in text_cats]
    prompts = [] if categories and not wanted_text else select_prompts(suite.prompts, wanted_text, limit)
    kinds = tuple(k for c, k in long_cats.items() if not categories or c in categories)
    rows = SuiteRows(list(prompts), {p.id: suite.rows.provenance[p.id] for p in prompts}, list(suite.notices))
    per = min(suite.long_per_length, limit) if limit else suite.long_per_length
    return Suite(suite.label, rows, kinds, suite.long_lengths if kinds else (), per)


def prompt_items(
    prompts: Sequence[Prompt] | str | Path | None,
    *,
    option: str = "--prompts",
    say: Callable[[str], None] | None = None,
) -> tuple[list[Prompt], str]:
    """The prompts a `prompts=` argument of training or calibration names, and their label.

    Args:
        prompts: None (the built-in set), a `--prompts` value (a suite name, a JSONL file, a
            prepared folder; see `resolve_suite`), or the `Prompt`s themselves ("custom").
        option: the flag named in the refusal of long context.
        say: gets each refusal line of the suite (SPEED-Bench placeholders).

    Returns:
        (the prompts, "built-in" / the suite's label / "custom").

    Raises:
        UsageError: a long-context suite (it is cut for a tokenizer at measurement time; train on
            text prompts), or see `resolve_suite`.
    """
    if prompts is not None and not isinstance(prompts, (str, Path)):
        return list(prompts), "custom"
    suite = resolve_suite(prompts)
    if suite.long_kinds:
        raise UsageError(
            f"{option} {prompts}: long-context suites are for measuring (smoke, check, report); "
            "give a text suite, a JSONL file or a prepared folder"
        )
    for line in suite.notices:
        (say or (lambda _m: None))(line)
    return list(suite.prompts), suite.label


# ----------------------------------------------------------------------------------- parts


def _builtin() -> Suite:
    prompts = builtin_prompts()
    return Suite(BUILTIN_LABEL, SuiteRows(prompts, {p.id: _BUILTIN_PROVENANCE for p in prompts}))


def _one(text: str) -> Suite:
    name, _, lengths = text.partition(":")
    key = name.strip().lower()
    if key in (BUILTIN, BUILTIN_LABEL) and not lengths:
        return _builtin()
    if key == "spec-bench-sample" and not lengths:
        return Suite(key, sample_rows())
    if key in _LONG:
        parsed = parse_lengths(lengths or None)
        return Suite(text, SuiteRows([]), _LONG[key], parsed)
    path = Path(text)
    if path.is_dir():
        return Suite(text, _folder(path))
    if path.is_file():
        return Suite(text, _file(path))
    raise UsageError(
        f"{{prompts}}: {text} is neither a suite ({', '.join(SUITES)}) nor an existing file or folder",
        options=("prompts",),
    )


def _folder(path: Path) -> SuiteRows:
    spec = spec_bench_file(path)
    if spec is not None:
        return read_spec_bench(spec)
    speed = speed_bench_file(path, DEFAULT_SUBSET)
    if speed is not None:
        return read_speed_bench(speed)
    raise ConfigError(
        f"{path}: neither a Spec-Bench folder (question.jsonl) nor a SPEED-Bench one "
        f"({', '.join(s + '.jsonl' for s in SUBSETS)})"
    )


def _file(path: Path) -> SuiteRows:
    first = _first_row(path)
    if is_speed_bench_row(first):
        return read_speed_bench(path)
    if is_spec_bench_row(first):
        return read_spec_bench(path)
    prompts = load_prompts(path)
    return SuiteRows(prompts, {p.id: Provenance(f"prompts file {path}", "the file's own", str(path)) for p in prompts})


def _first_row(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    try:
                        return json.loads(line)
                    except json.JSONDecodeError:
                        return None  # load_prompts names the line
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _join(suites: Sequence[Suite], label: str) -> Suite:
    rows = SuiteRows([])
    kinds: list[str] = []
    lengths: set[int] = set()
    for s in suites:
        for p in s.prompts:
            if p.id in rows.provenance:
                raise ConfigError(
                    f"{{prompts={label}}}: prompt id {p.id!r} is in two of the joined suites", options=("prompts",)
                )
            rows.prompts.append(p)
            rows.provenance[p.id] = s.rows.provenance[p.id]
        rows.notices.extend(s.notices)
        kinds += [k for k in s.long_kinds if k not in kinds]
        lengths.update(s.long_lengths)
    return Suite(label, rows, tuple(kinds), tuple(sorted(lengths)))
