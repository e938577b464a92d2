"""Small timing helpers shared by the benchmarks (medians, because these machines are noisy)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

R = TypeVar("R")


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of `repeat` calls of `fn`."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def folder_bytes(folder: Path) -> int:
    """Total size of the files directly inside `folder`."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def print_result(result: dict, out: Path | None) -> None:
    """Print a benchmark's result as JSON, and write it to `out` (the `--json OUT` option) when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n")


def rotated_rounds(
    modes: tuple[str, str], rounds: int, run: Callable[[str], tuple[float, R]]
) -> tuple[dict[str, float], float, bool, dict[str, R]]:
    """Run both `modes` once a round, as `run(mode)` -> (seconds, result), in an order rotated every
    round (load drifting between rounds then cancels in the ratios).

    Returns:
        The median seconds of each mode, the median of per-round ratios modes[0] / modes[1], whether
        every round's two results were equal, and the last round's result of each mode.
    """
    times: dict[str, list[float]] = {m: [] for m in modes}
    ratios: list[float] = []
    results: dict[str, R] = {}
    same = True
    for r in range(rounds):
        got = {}
        for mode in modes if r % 2 == 0 else modes[::-1]:
            got[mode], results[mode] = run(mode)
            times[mode].append(got[mode])
            print(f"round {r + 1}: {mode:9s} {got[mode]:6.1f} s", flush=True)
        ratios.append(got[modes[0]] / got[modes[1]])
        same = same and results[modes[0]] == results[modes[1]]
    return {m: statistics.median(t) for m, t in times.items()}, statistics.median(ratios), same, results
