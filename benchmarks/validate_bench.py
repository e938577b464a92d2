"""Benchmark: static `validate` on 8B-shaped synthetic drafts of two sizes (time must stay flat).

Run: `.venv/bin/python -m benchmarks.validate_bench [--out bench-out] [--deep]`. Builds (or reuses)
the synthetic Llama-3.1-8B EAGLE-3 draft without and with `embed_tokens` (0.8 vs 1.8 GiB, a 32k
draft vocabulary, so d2t/t2d are read for real) and times, in one run: the library call
`validate_checkpoint(path)` (warm, median), the full CLI in a fresh process (`eagle-convert validate --json`,
which includes interpreter start-up and imports) and `python -c pass` as the start-up baseline.
Static validation reads config, headers and d2t/t2d only, so its time must not grow with the
weights. `--deep` also times one `validate --deep` per size and reports its peak RSS (bounded by
the chunk size, not the checkpoint).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.synth import build_synthetic_draft
from benchmarks.timing import folder_bytes, median_seconds

_DEEP_SNIPPET = """
import json, resource, sys, time
from eagle_convert.validate.run import validate_checkpoint
t = time.perf_counter(); r = validate_checkpoint(sys.argv[1], deep=True); s = time.perf_counter() - t
print(json.dumps({"deep_s": s, "deep_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "deep_errors": len(r.errors)}))
"""


def measure(folder: Path, repeat: int, *, deep: bool) -> dict[str, float]:
    from eagle_convert.validate.run import validate_checkpoint

    report = validate_checkpoint(folder)  # warm-up; also the verdict
    if report.errors:
        raise SystemExit(f"{folder}: synthetic draft has errors: {[f.code for f in report.errors]}")
    row = {
        "bytes": folder_bytes(folder),
        "library_s": median_seconds(lambda: validate_checkpoint(folder), repeat),
        "cli_s": median_seconds(lambda: subprocess.run(
            [sys.executable, "-m", "eagle_convert.cli.app", "validate", "--json", str(folder)],
            check=True, capture_output=True), max(3, repeat // 3)),
        "python_startup_s": median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 3),
        "findings": sorted({f.code for f in report.findings}),
    }
    if deep:
        out = subprocess.run([sys.executable, "-c", _DEEP_SNIPPET, str(folder)], check=True, capture_output=True,
                             text=True).stdout
        row |= json.loads(out.strip().splitlines()[-1])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--deep", action="store_true", help="also time validate --deep (reads every byte)")
    args = parser.parse_args(argv)
    rows = {}
    for with_embed in (False, True):
        folder = args.out / ("synth-8b-embed" if with_embed else "synth-8b")
        if not folder.exists():
            build_synthetic_draft(folder, with_embed=with_embed)
        rows[folder.name] = measure(folder, args.repeat, deep=args.deep)
    small, large = rows["synth-8b"], rows["synth-8b-embed"]
    summary = {
        "runs": rows,
        "size_ratio": large["bytes"] / small["bytes"],
        "library_time_ratio": large["library_s"] / small["library_s"],
        "under_one_second": max(small["library_s"], large["library_s"]) < 1.0,
        "cli_minus_python_startup_s": small["cli_s"] - small["python_startup_s"],
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
