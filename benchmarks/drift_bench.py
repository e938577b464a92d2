"""`drift` against a reference `smoke` of the same prompts and depth: what the drift observer costs.

On the trained fixture pair (`fixtures.trained`), each round runs, as separate processes, back to
back and in an order rotated every round (a shared machine's load drifting between rounds then
cancels in the ratios):

    smoke     eagle-convert smoke D --target T --engine reference -k DEPTH --max-new-tokens N --limit L --json
    drift     eagle-convert drift D --target T --depth DEPTH --max-new-tokens N --limit L
    drift-json  the same with --json (per-head shares serialised)

Reported: the median wall time of each and the median of per-round ratios drift / smoke (the
issue's bound: at most 2x), plus the in-process measurement seconds each report states (smoke's
per-draft seconds, drift's per-draft seconds), which leave out Python and model start-up.

    python -m benchmarks.drift_bench [--rounds 3] [--depth 8] [--max-new-tokens 64] [--limit 2] [--json OUT] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.upgrade_bench import CLI

MODES = ("smoke", "drift", "drift-json")
MAX_RATIO = 2.0


def command(mode: str, target: Path, draft: Path, depth: int, max_new: int, limit: int) -> list[str]:
    common = ["--max-new-tokens", str(max_new), "--limit", str(limit)]
    if mode == "smoke":
        return [*CLI, "smoke", str(draft), "--target", str(target), "--engine", "reference", "-k", str(depth), *common]
    extra = ["--json"] if mode == "drift-json" else []
    return [*CLI, "drift", str(draft), "--target", str(target), "--depth", str(depth), *common, *extra]


def run(mode: str, cmd: list[str]) -> tuple[float, float | None]:
    """Wall seconds of one process, and the measurement seconds its JSON states (None: no JSON)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    json_cmd = cmd if "--json" in cmd else [*cmd, "--json"] if mode == "smoke" else cmd
    t0 = time.perf_counter()
    res = subprocess.run(json_cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{mode}: failed ({res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    if "--json" not in json_cmd:
        return seconds, None
    d = json.loads(res.stdout)["drafts"][0]
    inner = d["seconds"] if mode != "smoke" else d["total"]["seconds"]  # smoke: the decode loop's own
    return seconds, None if inner is None else float(inner)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=2, help="prompts per category of the built-in set")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--check", action="store_true", help=f"exit 1 when drift / smoke > {MAX_RATIO}")
    args = ap.parse_args(argv)
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    inner: dict[str, list[float]] = {m: [] for m in MODES}
    ratios: dict[str, list[float]] = {"drift": [], "drift-json": [], "drift-inner": []}
    for r in range(args.rounds):
        order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
        got = {}
        for mode in order:
            got[mode] = run(mode, command(mode, target, draft, args.depth, args.max_new_tokens, args.limit))
            walls[mode].append(got[mode][0])
            if got[mode][1] is not None:
                inner[mode].append(got[mode][1])
        for mode in ("drift", "drift-json"):
            ratios[mode].append(got[mode][0] / got["smoke"][0])
        if got["drift-json"][1] and got["smoke"][1]:
            ratios["drift-inner"].append(got["drift-json"][1] / got["smoke"][1])
        print(f"round {r + 1}: " + ", ".join(f"{m} {got[m][0]:.1f} s" for m in MODES), flush=True)
    summary = {
        "settings": {k: getattr(args, k) for k in ("rounds", "depth", "max_new_tokens", "limit")},
        "wall_s": {m: statistics.median(v) for m, v in walls.items()},
        "measure_s": {m: statistics.median(v) for m, v in inner.items() if v},
        "ratio": {m: statistics.median(v) for m, v in ratios.items() if v},
        "max_ratio": MAX_RATIO,
    }
    for m in MODES:
        print(f"{m:11s} wall {summary['wall_s'][m]:6.1f} s   measurement {summary['measure_s'].get(m, 0):6.1f} s")
    for m, v in summary["ratio"].items():
        print(f"{m} / smoke: {v:.2f}x (bound {MAX_RATIO}x)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    over = any(v > MAX_RATIO for v in summary["ratio"].values())
    return 1 if args.check and over else 0


if __name__ == "__main__":
    raise SystemExit(main())
