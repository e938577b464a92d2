"""The `served` client's CPU per stream against a local fake-latency server, C = 1 ... 64.

`smoke --server`'s figures are only the server's if the client is never the bottleneck: the
budget (issue 31) is 5 % of one core per stream at C = 16. The fake server (tests/servedfake.py,
vLLM's chain at k = 3 with 2 accepted per round, `--delay` seconds per streamed round) runs in its
own process, so the CPU measured here (`time.process_time` of this process, all threads) is the
client's alone: asyncio, httpx2, SSE parsing, the per-token bookkeeping.

    python -m benchmarks.server_client_bench [--levels 1,4,16,64] [--delay 0.02] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.timing import print_result

ROOT = Path(__file__).resolve().parents[1]
BUDGET_AT_16 = 0.05  # of one core per stream


def _measure(url: str, c: int, requests: int, max_new: int) -> dict:
    from eagle_convert.measure import Prompt
    from eagle_convert.served import Connection, Sampling, run_streams

    prompts = [Prompt(f"p{i}", "chat", text=f"prompt {i}") for i in range(requests)]
    s = Sampling("tiny-target", max_new, 0.0, 0)

    async def go() -> list:
        async with Connection(url, request_timeout=120) as conn:
            return await run_streams(conn, prompts, c, s)

    cpu0, t0 = time.process_time(), time.perf_counter()
    out = asyncio.run(go())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    failed = sum(o.error is not None for o in out)
    tokens = sum(o.tokens for o in out)
    return {
        "concurrency": c,
        "requests": requests,
        "failed": failed,
        "wall_s": round(wall, 3),
        "client_cpu_s": round(cpu, 3),
        "cpu_per_stream": round(cpu / wall / c, 4),  # share of one core per stream in flight
        "cpu_us_per_token": round(1e6 * cpu / tokens, 1) if tokens else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="1,4,16,64")
    p.add_argument("--delay", type=float, default=0.02, help="seconds per streamed round (the fake's latency)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "servedfake.py"), "--delay", str(args.delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        _measure(url, 1, 1, 8)  # warm-up: imports and the first connection
        rows = [_measure(url, c, 2 * c, args.max_new_tokens) for c in (int(x) for x in args.levels.split(","))]
    finally:
        server.terminate()
        server.wait(10)
    at16 = next((r["cpu_per_stream"] for r in rows if r["concurrency"] == 16), None)
    result = {
        "benchmark": "server_client",
        "delay_s": args.delay,
        "max_new_tokens": args.max_new_tokens,
        "levels": rows,
        "budget_at_16": BUDGET_AT_16,
        "within_budget": None if at16 is None else at16 <= BUDGET_AT_16,
    }
    print_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
