"""What durability costs: `upgrade` (fsync'd, the default) vs `cp -r && sync`, and vs `upgrade --no-fsync`.

A durable upgrade flushes every output file and folder before its rename and the parent after it
(eagle_convert/io/durable.py), so its output survives a power loss right after exit 0. The fair
baseline is a copy that is also on disk when it returns: `cp -r SRC OUT && sync`. `cp -r` alone
and `upgrade --no-fsync` (scratch work) return with the data still in the page cache; they are
measured beside it to show what the flush itself costs.

For each size (the 0.85 GB 8B-shaped draft of benchmarks/upgrade_bench.py and the 6.5 GB
70B-shaped one of benchmarks/scale_bench.py) it builds the draft, reads it into the page cache,
then runs rounds of, each tool as its own process (the tools rotated each round):

    cp -r && sync        copy, then flush everything dirty on the machine
    cp -r                copy, data left in the page cache
    upgrade              verified, fsync'd (the default)
    upgrade --no-fsync   verified, not flushed

Before every run the previous output is deleted and everything is flushed (`sync`, untimed), so
no run pays for another's writeback. Ratios are medians over rounds of per-round ratios.

    python -m benchmarks.durable_bench [--sizes 1,6] [--rounds 3] [--workdir DIR] [--json OUT]

The disk and the machine's other writers set these numbers: on a shared disk `sync` also flushes
other people's data, which is why rounds are rotated and medians taken.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale_bench import SIZES, measure
from benchmarks.synth import build_synthetic_draft
from benchmarks.upgrade_bench import CLI, warm

BASELINE = "cp -r && sync"


def tools(src: Path, out: Path) -> dict[str, list[str]]:
    return {
        BASELINE: ["sh", "-c", 'cp -r "$1" "$2" && sync', "sh", str(src), str(out)],
        "cp -r": ["cp", "-r", str(src), str(out)],
        "upgrade": [*CLI, "upgrade", str(src), "--out", str(out)],
        "upgrade --no-fsync": [*CLI, "upgrade", str(src), "--out", str(out), "--no-fsync"],
    }


def bench_size(work: Path, key: str, rounds: int) -> dict[str, Any]:
    spec = SIZES[key]
    src = work / f"draft-{key}"
    if not src.exists():
        t = time.perf_counter()
        build_synthetic_draft(src, with_embed=spec["with_embed"], **spec["dims"])
        print(f"built {src} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    size = sum(f.stat().st_size for f in src.iterdir())
    os.sync()
    warm(src)
    out = work / "out"
    cmds = tools(src, out)
    shutil.rmtree(out, ignore_errors=True)
    measure(cmds["upgrade --no-fsync"], work / "pycache")  # untimed: bytecode caches, lazy imports
    runs: dict[str, list[float]] = {}
    names = list(cmds)
    for i in range(rounds):
        for tool in names[i % len(names) :] + names[: i % len(names)]:
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            wall, _, _ = measure(cmds[tool], work / "pycache")
            runs.setdefault(tool, []).append(wall)
            print(f"[{size / 1e9:.2f} GB] round {i + 1}/{rounds} {tool}: {wall:.2f}s", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    os.sync()
    base, nofsync = runs[BASELINE], runs["upgrade --no-fsync"]
    rows = {
        tool: {
            "wall_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "ratio_to_cp_sync": round(statistics.median(w / b for w, b in zip(walls, base)), 2),
            "ratio_to_no_fsync": round(statistics.median(w / n for w, n in zip(walls, nofsync)), 2),
            "samples_s": [round(w, 3) for w in walls],
        }
        for tool, walls in runs.items()
    }
    return {"size": key, "label": spec["label"], "bytes": size, "rounds": rounds, "tools": rows}


def render(results: list[dict[str, Any]]) -> str:
    lines = [f"{'draft':<10} {'tool':<20} {'median s':>9} {'min s':>7} {'x cp -r && sync':>16} {'x --no-fsync':>13}"]
    for res in results:
        for tool, row in res["tools"].items():
            lines.append(
                f"{res['bytes'] / 1e9:>7.2f} GB {tool:<20} {row['wall_s']:>9.2f} {row['min_s']:>7.2f} "
                f"{row['ratio_to_cp_sync']:>16.2f} {row['ratio_to_no_fsync']:>13.2f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.durable_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,6", help=f"comma-separated, of {', '.join(SIZES)} (GB classes)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs every tool once)")
    parser.add_argument("--workdir", type=Path, help="where drafts are built (default: a temp dir, removed after)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.sizes.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r} (known: {', '.join(SIZES)})")
    keep = args.workdir is not None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="durable-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for key in keys:
            results.append(bench_size(work, key, args.rounds))
            if not keep:
                shutil.rmtree(work / f"draft-{key}", ignore_errors=True)  # room for the next size
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
