"""Benchmark `eagle-convert upgrade` against `cp -r` and a safetensors load_file + save_file round trip.

Builds an 8B-shaped synthetic EAGLE-3 draft (hidden 4096, intermediate 14336, 32 heads, 8 KV heads,
vocab 128256, draft vocab 32000, bf16), without and with `embed_tokens`, then measures side by side,
each as its own process: wall time and peak RSS (from wait4's rusage, so memory-mapped pages count)
of `cp -r`, `upgrade --no-verify`, `upgrade` (default verification) and the round trip; the
upgrades run with `--no-fsync`, since none of the others flushes (benchmarks/durable_bench.py
measures the durable default against `cp -r && sync`). Every tool
reads the same warm page cache, after one untimed warm-up run (which also caches bytecode, as an
installed package has it); outputs are deleted and flushed (sync) between runs, untimed. Each
round runs every tool once; ratios are medians of per-round ratios (robust to a shared machine's
load drifting between rounds), and min/min ratios are shown too.

    python -m benchmarks.upgrade_bench [--workdir DIR] [--repeat 5] [--scale 1.0] [--json OUT] [--check]

Targets (`--check` exits 1 when one is missed): upgrade --no-verify wall <= 1.5x cp -r; upgrade
(verified) <= 2.5x cp -r; peak RSS <= 300 MB for both upgrades (the same as benchmarks/scale_bench.py).
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
from typing import Any

from benchmarks.synth import DEFAULT_DIMS, build_synthetic_draft, scaled_dims

TARGETS = {"upgrade --no-verify": 1.5, "upgrade": 2.5}
RSS_LIMIT_MB = 300.0
TREE = Path(__file__).resolve().parents[1]  # the source tree these benchmarks belong to


def cli(tree: Path = TREE) -> list[str]:
    """The command line running `tree`'s eagle_convert. `python -c` puts the working directory first on
    sys.path (before PYTHONPATH), so a plain `-c` ran whatever tree the bench was started in; the
    first entry is replaced by `tree` instead (Python 3.10 has no `-P`)."""
    code = f"import sys; sys.path[0] = {str(tree)!r}; from eagle_convert.cli.app import main; main()"
    return [sys.executable, "-c", code]


CLI = cli()
ROUND_TRIP = """
import shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir()
save_file(load_file(src / "model.safetensors"), dst / "model.safetensors", metadata={"format": "pt"})
shutil.copy(src / "config.json", dst / "config.json")
"""


def tools(src: Path, dst: Path) -> dict[str, list[str]]:
    return {
        "cp -r": ["cp", "-r", str(src), str(dst)],
        # --no-fsync: like cp -r and save_file, leave the data in the page cache (the durable default
        # against `cp -r && sync`: benchmarks/durable_bench.py).
        "upgrade --no-verify": [*CLI, "upgrade", str(src), "--out", str(dst), "--no-verify", "--no-fsync"],
        "upgrade": [*CLI, "upgrade", str(src), "--out", str(dst), "--no-fsync"],
        "load_file+save_file": [sys.executable, "-c", ROUND_TRIP, str(src), str(dst)],
    }


# A tiny launcher (python -S, ~10 MB) forks the measured command and reports its rusage: forking
# straight from this process would charge this process's RSS to the child (the forked copy counts
# until exec), and wait4's ru_maxrss would then be at least this process's size.
LAUNCHER = """
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("@@bench %f %d %f\\n" % (time.perf_counter() - t, usage.ru_maxrss, usage.ru_utime + usage.ru_stime))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(cmd: list[str], pycache: Path) -> tuple[float, float, float]:
    """(wall s, peak RSS MB, CPU s) of one command, measured by the launcher around fork/exec/wait.

    Bytecode is cached (in `pycache`) as in an installed package: with PYTHONDONTWRITEBYTECODE set,
    every run would recompile eagle_convert (~0.1 s CPU) and measure that instead.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCHER, *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    lines = proc.stderr.splitlines()
    if proc.returncode or not lines or not lines[-1].startswith("@@bench "):
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    _, wall, maxrss_kib, cpu = lines[-1].split()
    return float(wall), int(maxrss_kib) / 1024, float(cpu)  # Linux reports KiB


def warm(path: Path) -> None:
    for f in path.iterdir():
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


def bench_variant(work: Path, *, with_embed: bool, dims: dict[str, int], repeat: int) -> dict[str, Any]:
    name = "with embed_tokens" if with_embed else "without embed_tokens"
    src = work / ("draft-embed" if with_embed else "draft")
    if not src.exists():
        t = time.perf_counter()
        build_synthetic_draft(src, with_embed=with_embed, **{k: v for k, v in dims.items()})
        print(f"built {src} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    size = sum(f.stat().st_size for f in src.iterdir())
    warm(src)
    for cmd in tools(src, work / "out").values():  # untimed: bytecode caches, page cache, lazy imports
        shutil.rmtree(work / "out", ignore_errors=True)
        measure(cmd, work / "pycache")
    runs: dict[str, list[tuple[float, float, float]]] = {}
    for i in range(repeat):
        for tool, cmd in tools(src, work / "out").items():
            shutil.rmtree(work / "out", ignore_errors=True)
            os.sync()
            runs.setdefault(tool, []).append(measure(cmd, work / "pycache"))
            print(
                f"[{name}] run {i + 1}/{repeat} {tool}: {runs[tool][-1][0]:.2f}s, {runs[tool][-1][1]:.0f} MB",
                file=sys.stderr,
            )
    shutil.rmtree(work / "out", ignore_errors=True)
    cp = [w for w, _, _ in runs["cp -r"]]
    rows = {}
    for tool, samples in runs.items():
        walls = [w for w, _, _ in samples]
        # Rounds run the tools back to back, so a round's ratio shares that moment's machine load;
        # the median over rounds is robust to the load of a shared machine drifting between rounds.
        rows[tool] = {
            "wall_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "peak_rss_mb": round(max(r for _, r, _ in samples), 1),
            "cpu_s": round(statistics.median(c for _, _, c in samples), 3),
            "ratio_to_cp": round(statistics.median(w / c for w, c in zip(walls, cp)), 2),
            "ratio_of_min": round(min(walls) / min(cp), 2),
            "samples_s": [round(w, 3) for w in walls],
        }
    return {"variant": name, "bytes": size, "tools": rows}


def check(results: list[dict[str, Any]]) -> list[str]:
    missed = []
    for res in results:
        for tool, limit in TARGETS.items():
            row = res["tools"][tool]
            if row["ratio_to_cp"] > limit:
                missed.append(f"{res['variant']}: {tool} is {row['ratio_to_cp']}x cp -r (target <= {limit}x)")
            if row["peak_rss_mb"] > RSS_LIMIT_MB:
                missed.append(f"{res['variant']}: {tool} peak RSS {row['peak_rss_mb']} MB (target <= {RSS_LIMIT_MB})")
    return missed


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'variant':<22} {'size':>9} {'tool':<21} {'median s':>8} {'min s':>6} {'x cp -r':>8} {'min/min':>8} "
        f"{'peak RSS MB':>12} {'CPU s':>6}"
    ]
    for res in results:
        for tool, row in res["tools"].items():
            lines.append(
                f"{res['variant']:<22} {res['bytes'] / 2**30:>7.2f}GB {tool:<21} {row['wall_s']:>8.2f} "
                f"{row['min_s']:>6.2f} {row['ratio_to_cp']:>8.2f} {row['ratio_of_min']:>8.2f} "
                f"{row['peak_rss_mb']:>12.0f} {row['cpu_s']:>6.2f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upgrade_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="where drafts are built (default: a temp dir, removed after)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="rounds (each runs every tool once); medians of wall time and of per-round ratios",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the 8B dimensions (quick smoke runs)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    dims = DEFAULT_DIMS if args.scale == 1.0 else scaled_dims(args.scale)
    dims = {k: v for k, v in dims.items()}
    keep = args.workdir is not None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="upgrade-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = [bench_variant(work, with_embed=e, dims=dims, repeat=args.repeat) for e in (False, True)]
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    missed = check(results)
    for m in missed:
        print(f"target missed: {m}")
    if args.json:
        args.json.write_text(json.dumps({"dims": dims, "results": results, "missed": missed}, indent=2) + "\n")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
