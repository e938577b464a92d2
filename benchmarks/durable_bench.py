"""What a durable upgrade costs: `upgrade` (fsync'd and verified, the default) vs `cp -r && sync`, and
the scratch path (`upgrade --no-fsync --no-verify`) vs `cp -r`.

A durable upgrade flushes every output file and folder before its rename and the parent after it
(eagle_convert/io/durable.py), so its output survives a power loss right after exit 0. The fair
baseline is a copy that is also on disk when it returns: `cp -r SRC OUT && sync`. The scratch path
leaves its data in the page cache, as `cp -r` does.

For each size (the 0.85 GB 8B-shaped draft of benchmarks/upgrade_bench.py and the 6.5 GB
70B-shaped one of benchmarks/scale_bench.py) it builds the draft, then runs rounds; a round runs
every tool once, each as its own process, in an order rotated every round:

    cp -r && sync                    copy, then flush everything dirty on the machine
    cp -r                            copy, data left in the page cache
    upgrade                          verified, fsync'd (the default)
    upgrade --no-fsync --no-verify   the scratch path
    before: ...                      the same two upgrades from another source tree (`--before DIR`,
                                     e.g. `git archive REV | tar -x -C DIR`: the package reads schemas/ beside it)

Every run starts from the same state, untimed: the previous output deleted, everything dirty
flushed (`sync`), and the input read once more, so that each tool finds it in the page cache
(nothing is evicted system-wide; the machine may be shared). Ratios are medians over rounds of
per-round ratios (a round's tools share that moment's load).

    python -m benchmarks.durable_bench [--sizes 1,6] [--rounds 3] [--before DIR] [--workdir DIR]
                                       [--json OUT] [--check]

Targets (`--check` exits 1 when one is missed): `upgrade` <= 1.2x `cp -r && sync`, the scratch
path <= 1.5x `cp -r`.
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

from benchmarks.scale_bench import SIZES
from benchmarks.synth import build_synthetic_draft
from benchmarks.upgrade_bench import TREE, cli, measure, warm

BASELINE, COPY, DURABLE, SCRATCH = "cp -r && sync", "cp -r", "upgrade", "upgrade --no-fsync --no-verify"
# tool -> (its baseline, the target ratio)
TARGETS = {DURABLE: (BASELINE, 1.2), SCRATCH: (COPY, 1.5)}


def tools(src: Path, out: Path, before: Path | None) -> dict[str, list[str]]:
    cmds = {
        BASELINE: ["sh", "-c", 'cp -r "$1" "$2" && sync', "sh", str(src), str(out)],
        COPY: ["cp", "-r", str(src), str(out)],
    }
    # Each column runs the tree it names (`upgrade_bench.cli`), whatever is installed or the cwd.
    for prefix, tree in (("", TREE), ("before: ", before)):
        if tree is not None:
            up = [*cli(tree), "upgrade", str(src), "--out", str(out)]
            cmds[prefix + DURABLE] = up
            cmds[prefix + SCRATCH] = [*up, "--no-fsync", "--no-verify"]
    return cmds


def bench_size(work: Path, key: str, rounds: int, before: Path | None) -> dict[str, Any]:
    spec = SIZES[key]
    src = work / f"draft-{key}"
    if not src.exists():
        t = time.perf_counter()
        build_synthetic_draft(src, with_embed=spec["with_embed"], **spec["dims"])
        print(f"built {src} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    size = sum(f.stat().st_size for f in src.iterdir())
    out = work / "out"
    cmds = tools(src, out, before)
    for tool in (t for t in cmds if "upgrade" in t):  # untimed: bytecode caches, lazy imports
        shutil.rmtree(out, ignore_errors=True)
        measure(cmds[tool], work / "pycache")
    runs: dict[str, list[float]] = {}
    names = list(cmds)
    for i in range(rounds):
        for tool in names[i % len(names) :] + names[: i % len(names)]:
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            warm(src)
            wall, _, _ = measure(cmds[tool], work / "pycache")
            runs.setdefault(tool, []).append(wall)
            print(f"[{size / 1e9:.2f} GB] round {i + 1}/{rounds} {tool}: {wall:.2f}s", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    os.sync()
    rows = {}
    for tool, walls in runs.items():
        base = runs[TARGETS[tool.removeprefix("before: ")][0]] if "upgrade" in tool else walls
        rows[tool] = {
            "wall_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "ratio": round(statistics.median(w / b for w, b in zip(walls, base)), 2),
            "samples_s": [round(w, 3) for w in walls],
        }
    return {"size": key, "label": spec["label"], "bytes": size, "rounds": rounds, "tools": rows}


def check(results: list[dict[str, Any]]) -> list[str]:
    missed = []
    for res in results:
        for tool, (base, limit) in TARGETS.items():
            ratio = res["tools"][tool]["ratio"]
            if ratio > limit:
                missed.append(f"{res['bytes'] / 1e9:.2f} GB: {tool} is {ratio}x {base} (target <= {limit}x)")
    return missed


def render(results: list[dict[str, Any]]) -> str:
    lines = [f"{'draft':<10} {'tool':<38} {'median s':>9} {'min s':>7} {'ratio':>6}  to"]
    for res in results:
        for tool, row in res["tools"].items():
            to = TARGETS[tool.removeprefix("before: ")][0] if "upgrade" in tool else ""
            lines.append(
                f"{res['bytes'] / 1e9:>7.2f} GB {tool:<38} {row['wall_s']:>9.2f} {row['min_s']:>7.2f} "
                f"{row['ratio'] if to else '':>6}  {to}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.durable_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,6", help=f"comma-separated, of {', '.join(SIZES)} (GB classes)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs every tool once)")
    parser.add_argument("--before", type=Path, help="a source tree holding eagle_convert/: its upgrades run beside")
    parser.add_argument("--workdir", type=Path, help="where drafts are built (default: a temp dir, removed after)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.sizes.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r} (known: {', '.join(SIZES)})")
    if args.before is not None and not (args.before / "eagle_convert" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: no eagle_convert/ package there")
    keep = args.workdir is not None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="durable-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for key in keys:
            results.append(bench_size(work, key, args.rounds, args.before and args.before.absolute()))
            if not keep:
                shutil.rmtree(work / f"draft-{key}", ignore_errors=True)  # room for the next size
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    missed = check(results)
    for m in missed:
        print(f"target missed: {m}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "missed": missed}, indent=2) + "\n")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
