"""Benchmark: start-up of `eagle-convert --help` and `eagle-convert inspect DRAFT` against `python -c pass`.

Run: `.venv/bin/python -m benchmarks.startup_bench [--rounds 15]`. Each round runs the three
commands in a fresh process, one after the other (the order rotates), so the machine's load hits
all three alike; the table prints each one's median and its ratio to the interpreter's median.
The draft is the tiny `vllm-eagle3` fixture (inspect reads headers only, so its size hardly
matters: benchmarks/inspect_bench.py times 8B-shaped drafts). Targets (issue 21): --help within
4x and inspect within 5x of `python -c pass`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"--help": 4.0, "inspect": 5.0}


def cli_prefix() -> list[str]:
    """How a user starts the CLI: the `eagle-convert` script beside this interpreter, else `-m`."""
    script = Path(sys.executable).with_name("eagle-convert")
    if script.is_file() and not os.environ.get("PYTHONPATH"):
        return [str(script)]
    return [sys.executable, "-m", "eagle_convert"]  # a source tree on PYTHONPATH: its code, not the installed


def commands(draft: Path) -> dict[str, list[str]]:
    cli = cli_prefix()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--help": [*cli, "--help"],
        "inspect": [*cli, "inspect", str(draft)],
    }


def measure(draft: Path, rounds: int) -> dict[str, list[float]]:
    cmds = commands(draft)
    names = list(cmds)
    times: dict[str, list[float]] = {n: [] for n in names}
    env = os.environ | {"HF_HUB_OFFLINE": "1"}
    for name in names:  # warm the page cache and the bytecode caches once
        subprocess.run(cmds[name], check=True, capture_output=True, env=env)
    for r in range(rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            start = time.perf_counter()
            subprocess.run(cmds[name], check=True, capture_output=True, env=env)
            times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the medians and ratios as JSON")
    args = parser.parse_args(argv)
    from fixtures.drafts import FIXTURE_MATRIX, build_draft

    tmp = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    try:
        draft = build_draft(tmp / "draft", FIXTURE_MATRIX["vllm-eagle3"])
        times = measure(draft, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["python -c pass"])
    rows = {n: {"median_s": statistics.median(t), "min_s": min(t)} for n, t in times.items()}
    for row in rows.values():
        row["ratio"] = row["median_s"] / base
    if args.json:
        print(json.dumps({"rounds": args.rounds, "commands": rows, "targets": TARGETS}, indent=2))
        return 0
    print(f"start-up, {args.rounds} rounds side by side (median; ratio to python -c pass):")
    for n, row in rows.items():
        target = (
            f"   target <= {TARGETS[n]:.0f}x: {'ok' if row['ratio'] <= TARGETS[n] else 'MISSED'}"
            if n in TARGETS
            else ""
        )
        print(
            f"  {n:16s} {row['median_s'] * 1000:7.1f} ms  (min {row['min_s'] * 1000:6.1f})  {row['ratio']:5.2f}x{target}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
