"""Where a suite's prompts come from: one `Provenance` per row, and the rows a loader read.

Every loader of a named suite (the shipped Spec-Bench sample, a Spec-Bench or SPEED-Bench folder,
the long-context builder) returns `SuiteRows`: the `Prompt`s, each row's provenance, and the
one-line notices of rows it refused (SPEED-Bench's placeholders), so that a report can say what
was measured and what was left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eagle_convert.errors import ConfigError
from eagle_convert.jsonable import Jsonable
from eagle_convert.measure.prompts import Prompt

# How a multi-turn row becomes one prompt: its first user turn only, as vLLM 0.32's benchmark
# datasets do (vllm/benchmarks/datasets/datasets.py: SpecBench.load_data takes `row["turns"][0]`,
# SpeedBench.load_data `row["messages"][0]["content"]`), rendered as one user message through the
# target's chat template. Later turns need the target's own answers to be meaningful; they are
# counted in `Provenance.turns` but not measured.
FIRST_TURN = "first turn"


@dataclass(frozen=True)
class Provenance(Jsonable):
    """Where one row of a suite comes from.

    Attributes:
        source: the dataset the text was written for (e.g. "MT-Bench (lm-sys/FastChat)").
        license: its licence as an SPDX id, or a sentence when there is none to name.
        origin: the file and row it was read from (repository@commit path id, or path:line).
        turns: user turns in the row; only the first is measured (`FIRST_TURN`).
    """

    source: str
    license: str
    origin: str
    turns: int = 1


@dataclass
class SuiteRows:
    """What a suite loader read: prompts in file order, provenance by prompt id, refusal lines.

    Attributes:
        prompts: the rows that will be measured.
        provenance: prompt id -> `Provenance`, for every prompt.
        notices: one line per group of refused rows (how many and why); empty when none.
    """

    prompts: list[Prompt]
    provenance: dict[str, Provenance] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def suite_file_lines(
    path: Path, find: Callable[[Path], Path | None], *, missing: str, what: str
) -> tuple[Path, list[str]]:
    """A suite's file and its lines: `path` itself, or what `find` picks in the folder the user prepared.

    Raises:
        ConfigError: `path: missing` when `find` picks nothing; `path: cannot read what: ...`.
    """
    if path.is_dir():
        found = find(path)
        if found is None:
            raise ConfigError(f"{path}: {missing}")
        path = found
    try:
        return path, path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
