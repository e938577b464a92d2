"""`smoke --engine vllm` on three drafts of one structure: one engine per draft vs one shared engine.

The family an upgrade produces: the trained fixture draft's identity upgrade, its calibrated twin
(`upgrade --init calibrated`) and the calibrated draft fine-tuned briefly (`finetune`), built once
into the work folder. Each round runs, as separate processes, back to back and in an order rotated
every round (a shared machine's load drifting between rounds then cancels in the ratios):

    fresh     EAGLE_CONVERT_FRESH_ENGINES=1 eagle-convert smoke up cal ft --target T --engine vllm --json
    shared    eagle-convert smoke up cal ft --target T --engine vllm --json

Reported: the median wall time of each and the median of per-round ratios shared / fresh, and
whether both measured the same counters for every draft (they must: the swap is exact).

    python -m benchmarks.engine_share_bench [--rounds 2] [--workdir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import rotated_rounds
from benchmarks.upgrade_bench import CLI

MODES = ("shared", "fresh")  # the ratio is shared / fresh


def build_family(work: Path) -> tuple[Path, list[Path]]:
    """The target and three same-structure drafts (reused when the work folder has them)."""
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    up, cal, ft = work / "eagle31-identity", work / "eagle31-calibrated", work / "eagle31-finetuned"
    steps = [
        (up, [*CLI, "upgrade", str(draft), "--out", str(up)]),
        (cal, [*CLI, "upgrade", str(draft), "--out", str(cal), "--init", "calibrated", "--target", str(target)]),
        (ft, [*CLI, "finetune", str(cal), "--target", str(target), "--out", str(ft), "--steps-all", "20"]),
    ]
    for out, cmd in steps:
        if not (out / "config.json").is_file():
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return target, [up, cal, ft]


def run_smoke(mode: str, target: Path, drafts: list[Path]) -> tuple[float, list]:
    """Wall seconds of one smoke process and its per-draft counters."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("EAGLE_CONVERT_FRESH_ENGINES", None)
    if mode == "fresh":
        env["EAGLE_CONVERT_FRESH_ENGINES"] = "1"
    cmd = [*CLI, "smoke", *map(str, drafts), "--target", str(target), "--engine", "vllm", "--json"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{mode}: smoke failed ({res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    data = json.loads(res.stdout)
    counters = [
        [d["total"][k] for k in ("num_drafts", "num_draft_tokens", "num_accepted", "accepted_per_pos")]
        for d in data["drafts"]
    ]
    return seconds, counters


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.gettempdir()) / "eagle-convert-engine-share-bench"
    work.mkdir(parents=True, exist_ok=True)
    target, drafts = build_family(work)
    medians, ratio, same, counters = rotated_rounds(MODES, args.rounds, lambda m: run_smoke(m, target, drafts))
    result = {
        "drafts": [d.name for d in drafts],
        "rounds": args.rounds,
        "fresh_s": round(medians["fresh"], 2),
        "shared_s": round(medians["shared"], 2),
        "ratio_shared_over_fresh": round(ratio, 3),
        "same_counters": same,
        "counters": counters["shared"],
    }
    print(
        f"smoke, 3 drafts: one engine each {result['fresh_s']} s, one shared engine {result['shared_s']} s, "
        f"ratio {result['ratio_shared_over_fresh']} (median of {args.rounds} rounds); "
        f"same counters: {'yes' if same else 'NO'}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
