"""Real-size benchmark: upgrade (copied, verified, linked) and validate --deep on 1, 3 and 6+ GB drafts.

For each size it builds a synthetic EAGLE-3 draft with real (pseudo-random, incompressible) bf16
weights, reads it once into the page cache, then runs rounds of, each tool as its own process:

    cp -r                     the baseline for the upgrades (coreutils: copy_file_range)
    upgrade --no-verify       eagle-convert, byte copy only
    upgrade                   byte copy + verification (the default)
    upgrade --link            reflink / hard link / copy of the weight files + a new fc_norm shard, verified
    cat *.safetensors         a sequential read to /dev/null: the baseline for validate --deep
    validate --deep --json    static checks + a read of every value

The upgrades run with `--no-fsync`, as `cp -r` does not flush either (the durable default is
measured against `cp -r && sync` by benchmarks/durable_bench.py). Ratios are medians over rounds
of per-round ratios (a round runs the tools back to back, in an order rotated every round, so a
shared machine's load drifting between rounds cancels), with the
ratio of the best runs beside them in the table; peak RSS comes from wait4's rusage (mapped
pages count). `validate --deep` is reported twice: the whole command (Python start-up, static
checks, then the scan) and the scan alone (`deep.seconds` from its JSON), each as a fraction of
`cat`'s bandwidth. Outputs are deleted (and `sync`ed) before every run and each size's draft is
deleted before the next size is built, so the disk needs about twice the largest draft.

    python -m benchmarks.scale_bench [--sizes 1,3,6] [--rounds 3] [--workdir DIR] [--json OUT] [--check]

Targets (`--check` exits 1 when one is missed): upgrade (verified) <= 2.5x cp -r, upgrade
--no-verify <= 1.5x cp -r, the deep scan >= 80% of cat's bandwidth, peak RSS <= 300 MB for every
eagle-convert run.
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

from benchmarks.synth import DEFAULT_DIMS, build_synthetic_draft
from benchmarks.upgrade_bench import CLI, LAUNCHER, warm

# Llama-3.1-8B / -70B targets' EAGLE-3 drafts (one decoder layer, 32k draft vocabulary, no embed_tokens:
# vLLM shares the target's), and a 70B-shaped draft with a full-vocabulary lm_head and its own
# embed_tokens, the size class of the MLA (Kimi / DeepSeek) drafts with full vocabularies.
SIZES: dict[str, dict[str, Any]] = {
    "1": {"label": "8B draft", "dims": DEFAULT_DIMS, "with_embed": False},
    "3": {
        "label": "70B draft",
        "with_embed": False,
        "dims": {
            **DEFAULT_DIMS,
            "hidden": 8192,
            "intermediate": 28672,
            "heads": 64,
            "kv_heads": 8,
            "target_layers": 80,
        },
    },
    "6": {
        "label": "70B draft, full vocabulary + embed_tokens",
        "with_embed": True,
        "dims": {
            **DEFAULT_DIMS,
            "hidden": 8192,
            "intermediate": 28672,
            "heads": 64,
            "kv_heads": 8,
            "target_layers": 80,
            "draft_vocab": 128256,
        },
    },
}
TARGETS = {"upgrade": 2.5, "upgrade --no-verify": 1.5}
DEEP_TARGET = 0.8
RSS_LIMIT_MB = 300.0


def measure(
    cmd: list[str], pycache: Path, *, stdout: bool = False, ok: tuple[int, ...] = (0,)
) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout if asked) of one command, timed by a tiny launcher around fork/exec/wait;
    `ok`: the exit codes that mean it ran (validate exits 1 when it finds errors)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode compiled
    proc = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCHER, *cmd],
        env=env,
        text=True,
        stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lines = proc.stderr.splitlines()
    if proc.returncode not in ok or not lines or not lines[-1].startswith("@@bench "):
        raise RuntimeError(f"{' '.join(cmd[:5])}... exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    _, wall, maxrss_kib, _cpu = lines[-1].split()
    return float(wall), int(maxrss_kib) / 1024, proc.stdout if stdout else ""


def tools(src: Path, out: Path) -> dict[str, list[str]]:
    weights = sorted(str(p) for p in src.glob("*.safetensors"))
    return {
        "cp -r": ["cp", "-r", str(src), str(out)],
        # --no-fsync: like cp -r, leave the data in the page cache; what flushing costs is measured
        # against `cp -r && sync` by benchmarks/durable_bench.py.
        "upgrade --no-verify": [*CLI, "upgrade", str(src), "--out", str(out), "--no-verify", "--no-fsync"],
        "upgrade": [*CLI, "upgrade", str(src), "--out", str(out), "--no-fsync"],
        "upgrade --link": [*CLI, "upgrade", str(src), "--out", str(out), "--link", "--json", "--no-fsync"],
        "cat": ["cat", *weights],  # its stdout is /dev/null (measure)
        "validate --deep": [*CLI, "validate", str(src), "--deep", "--json"],
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
    for cmd in cmds.values():  # untimed: bytecode caches, lazy imports
        shutil.rmtree(out, ignore_errors=True)
        measure(cmd, work / "pycache", ok=(0, 1))
    runs: dict[str, list[tuple[float, float]]] = {}
    extra: dict[str, list[Any]] = {"deep_scan_s": [], "link_methods": []}
    names = list(cmds)
    for i in range(rounds):
        # Rotate the order: at 6.5 GB input and output no longer both fit beside other jobs in the
        # page cache, and whichever tool runs first after cp -r would find input pages evicted.
        for tool in names[i % len(names) :] + names[: i % len(names)]:
            cmd = cmds[tool]
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            wall, rss, text = measure(
                cmd,
                work / "pycache",
                stdout=tool in ("validate --deep", "upgrade --link"),
                ok=(0, 1) if tool == "validate --deep" else (0,),
            )
            runs.setdefault(tool, []).append((wall, rss))
            if tool == "validate --deep":
                extra["deep_scan_s"].append(json.loads(text)["deep"]["seconds"])
            if tool == "upgrade --link":
                extra["link_methods"].append(sorted(set(json.loads(text)["result"]["links"].values())))
            print(f"[{key} GB] round {i + 1}/{rounds} {tool}: {wall:.2f}s, {rss:.0f} MB", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    cp = [w for w, _ in runs["cp -r"]]
    cat = [w for w, _ in runs["cat"]]
    rows: dict[str, dict[str, Any]] = {}
    for tool, samples in runs.items():
        walls = [w for w, _ in samples]
        base = cat if tool == "validate --deep" else cp
        rows[tool] = {
            "wall_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "peak_rss_mb": round(max(r for _, r in samples), 1),
            "ratio_to_cp": round(statistics.median(w / c for w, c in zip(walls, cp)), 2),
            "ratio_of_best": round(min(walls) / min(base), 2),
        }
        if tool == "validate --deep":  # bandwidth as a fraction of cat's: cat time / deep time
            rows[tool]["bandwidth_vs_cat"] = round(statistics.median(c / w for w, c in zip(walls, cat)), 2)
            rows[tool]["scan_s"] = round(statistics.median(extra["deep_scan_s"]), 3)
            rows[tool]["scan_bandwidth_vs_cat"] = round(
                statistics.median(c / s for s, c in zip(extra["deep_scan_s"], cat)), 2
            )
    rows["upgrade --link"]["methods"] = extra["link_methods"][-1]
    return {"size": key, "label": spec["label"], "bytes": size, "rounds": rounds, "tools": rows}


def check(results: list[dict[str, Any]]) -> list[str]:
    missed = []
    for res in results:
        name = f"{res['bytes'] / 1e9:.2f} GB"
        for tool, limit in TARGETS.items():
            ratio = res["tools"][tool]["ratio_to_cp"]
            if ratio > limit:
                missed.append(f"{name}: {tool} is {ratio}x cp -r (target <= {limit}x)")
        scan = res["tools"]["validate --deep"]["scan_bandwidth_vs_cat"]
        if scan < DEEP_TARGET:
            missed.append(f"{name}: the deep scan reads at {scan:.0%} of cat's bandwidth (target >= {DEEP_TARGET:.0%})")
        for tool, row in res["tools"].items():
            if tool not in ("cp -r", "cat") and row["peak_rss_mb"] > RSS_LIMIT_MB:
                missed.append(f"{name}: {tool} peak RSS {row['peak_rss_mb']} MB (target <= {RSS_LIMIT_MB:.0f})")
    return missed


def render(results: list[dict[str, Any]]) -> str:
    """The markdown table docs/upgrade.md shows."""
    head = (
        "| draft | `cp -r` | `upgrade --no-verify` | `upgrade` (verified) | `upgrade --link` | `cat` | "
        "`validate --deep`: command / scan, share of `cat` bandwidth | peak RSS (upgrade / link / deep) |"
    )
    lines = [head, "|" + "---|" * 8]
    for res in results:
        t = res["tools"]
        deep = t["validate --deep"]
        lines.append(
            f"| {res['bytes'] / 1e9:.2f} GB ({res['label']}) | {t['cp -r']['wall_s']:.2f} s "
            f"| {t['upgrade --no-verify']['ratio_to_cp']:.2f}× ({t['upgrade --no-verify']['ratio_of_best']:.2f}×) "
            f"| {t['upgrade']['ratio_to_cp']:.2f}× ({t['upgrade']['ratio_of_best']:.2f}×) "
            f"| {t['upgrade --link']['wall_s']:.2f} s ({'/'.join(t['upgrade --link']['methods'])}) "
            f"| {t['cat']['wall_s']:.2f} s | {deep['wall_s']:.2f} s / {deep['scan_s']:.2f} s: "
            f"{deep['bandwidth_vs_cat']:.0%} / {deep['scan_bandwidth_vs_cat']:.0%} "
            f"| {t['upgrade']['peak_rss_mb']:.0f} / {t['upgrade --link']['peak_rss_mb']:.0f} / "
            f"{deep['peak_rss_mb']:.0f} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,3,6", help=f"comma-separated, of {', '.join(SIZES)} (GB classes)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per size (each runs every tool once)")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where drafts are built (default: a temp dir under /tmp, removed after); put it on "
        "XFS (reflink=1) or btrfs to measure reflinks instead of hard links",
    )
    parser.add_argument("--keep", action="store_true", help="keep each size's draft (default: delete before the next)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r}; choose from {', '.join(SIZES)}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="scale-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for key in sizes:
            need = 2.2 * _estimate(key)
            free = shutil.disk_usage(work).free
            if free < need:
                print(f"skipping {key} GB: {free / 1e9:.1f} GB free in {work}, need ~{need / 1e9:.1f}", file=sys.stderr)
                continue
            results.append(bench_size(work, key, args.rounds))
            if not args.keep:
                shutil.rmtree(work / f"draft-{key}", ignore_errors=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    missed = check(results)
    for m in missed:
        print(f"target missed: {m}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "missed": missed}, indent=2) + "\n")
    return 1 if missed and args.check else 0


def _estimate(key: str) -> int:
    """Bytes of a size's draft (its matrices, bf16), to check the disk before building it."""
    d = SIZES[key]["dims"]
    h, inter, hd = d["hidden"], d["intermediate"], d["hidden"] // d["heads"]
    params = h * 3 * h + 2 * h * (d["heads"] + 2 * d["kv_heads"]) * hd + h * d["heads"] * hd + 3 * h * inter
    params += d["draft_vocab"] * h + (d["vocab"] * h if SIZES[key]["with_embed"] else 0)
    return 2 * params


if __name__ == "__main__":
    raise SystemExit(main())
