"""Benchmark: `inspect` time on 8B-shaped synthetic drafts of two sizes (headers only, so flat).

Run: `.venv/bin/python -m benchmarks.inspect_bench [--out bench-out]`. Builds the synthetic draft
without and with `embed_tokens` (0.8 vs 1.8 GiB), then times, side by side in one run:
the library call (open + describe, warm), the full CLI in a fresh process (`eagle-convert inspect
--json`, includes interpreter start-up and imports), and `python -c pass` as the start-up baseline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.synth import build_synthetic_draft
from benchmarks.timing import folder_bytes, median_seconds
from eagle_convert.vllm_model import default_release


def measure(folder: Path, repeat: int) -> dict[str, float]:
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe

    library = median_seconds(lambda: describe(open_checkpoint(folder), default_release()), repeat)
    cli = median_seconds(
        lambda: subprocess.run(
            [sys.executable, "-m", "eagle_convert.cli.app", "inspect", "--json", str(folder)],
            check=True,
            capture_output=True,
        ),
        max(3, repeat // 3),
    )
    baseline = median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 3)
    return {"bytes": folder_bytes(folder), "library_s": library, "cli_s": cli, "python_startup_s": baseline}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    rows = {}
    for with_embed in (False, True):
        folder = args.out / ("synth-8b-embed" if with_embed else "synth-8b")
        if not folder.exists():
            build_synthetic_draft(folder, with_embed=with_embed)
        rows[folder.name] = measure(folder, args.repeat)
    small, large = rows["synth-8b"], rows["synth-8b-embed"]
    summary = {
        "runs": rows,
        "size_ratio": large["bytes"] / small["bytes"],
        "library_time_ratio": large["library_s"] / small["library_s"],
        "cli_over_python_startup": small["cli_s"] / small["python_startup_s"],
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
