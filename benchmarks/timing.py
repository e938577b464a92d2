"""Small timing helpers shared by the benchmarks (medians, because these machines are noisy)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path


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
