"""Benchmark `eagle-convert upgrade` against `cp -r` and a safetensors load_file + save_file round trip.

Builds an 8B-shaped synthetic EAGLE-3 draft (hidden 4096, intermediate 14336, 32 heads, 8 KV heads,
vocab 128256, draft vocab 32000, bf16), without and with `embed_tokens`, then measures side by side,
each as its own process: wall time and peak RSS (from wait4's rusage, so memory-mapped pages count)
of `cp -r`, `upgrade --no-verify`, `upgrade` (default verification) and the round trip. Every tool
reads the same warm page cache; outputs are deleted and flushed (sync) between runs, untimed.

    python -m benchmarks.upgrade_bench [--workdir DIR] [--repeat 3] [--scale 1.0] [--json OUT] [--check]

Targets (`--check` exits 1 when one is missed): upgrade --no-verify wall <= 2x cp -r; upgrade
(verified) <= 3x cp -r; peak RSS <= 300 MB for both upgrades.
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

TARGETS = {"upgrade --no-verify": 2.0, "upgrade": 3.0}
RSS_LIMIT_MB = 300.0
CLI = [sys.executable, "-c", "from eagle_convert.cli import main; main()"]
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
        "upgrade --no-verify": [*CLI, "upgrade", str(src), str(dst), "--no-verify"],
        "upgrade": [*CLI, "upgrade", str(src), str(dst)],
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
sys.stderr.write("@@bench %f %d\\n" % (time.perf_counter() - t, usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one command, both measured by the launcher around fork/exec/wait."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *cmd], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=env, text=True)
    lines = proc.stderr.splitlines()
    if proc.returncode or not lines or not lines[-1].startswith("@@bench "):
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    _, wall, maxrss_kib = lines[-1].split()
    return float(wall), int(maxrss_kib) / 1024  # Linux reports KiB


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
    runs: dict[str, list[tuple[float, float]]] = {}
    for i in range(repeat):
        for tool, cmd in tools(src, work / "out").items():
            shutil.rmtree(work / "out", ignore_errors=True)
            os.sync()
            runs.setdefault(tool, []).append(measure(cmd))
            print(f"[{name}] run {i + 1}/{repeat} {tool}: {runs[tool][-1][0]:.2f}s, "
                  f"{runs[tool][-1][1]:.0f} MB", file=sys.stderr)
    shutil.rmtree(work / "out", ignore_errors=True)
    cp = statistics.median(w for w, _ in runs["cp -r"])
    rows = {}
    for tool, samples in runs.items():
        wall = statistics.median(w for w, _ in samples)
        rows[tool] = {"wall_s": round(wall, 3), "peak_rss_mb": round(max(r for _, r in samples), 1),
                      "ratio_to_cp": round(wall / cp, 2), "samples_s": [round(w, 3) for w, _ in samples]}
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
    lines = [f"{'variant':<22} {'size':>9} {'tool':<21} {'wall s':>8} {'x cp -r':>8} {'peak RSS MB':>12}"]
    for res in results:
        for tool, row in res["tools"].items():
            lines.append(f"{res['variant']:<22} {res['bytes'] / 2**30:>7.2f}GB {tool:<21} {row['wall_s']:>8.2f} "
                         f"{row['ratio_to_cp']:>8.2f} {row['peak_rss_mb']:>12.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upgrade_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="where drafts are built (default: a temp dir, removed after)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the median wall time is reported")
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
