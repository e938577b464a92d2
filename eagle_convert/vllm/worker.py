"""Subprocess worker that runs the real vLLM for the engine check (`vllm/check.py`).

    python -m eagle_convert.vllm.worker check < request.json

Reads one JSON request on stdin and prints exactly one JSON line on stdout (the real stdout;
everything vLLM prints is sent to stderr). vLLM's global state (distributed groups, current
config, Prometheus registry, engine processes) lives and dies with this process.
Not a public API: the request/response shapes are private to `vllm/check.py`.

The check lives in `vllm/load_check.py`, the loader hooks in `vllm/hooks.py`.
"""

from __future__ import annotations

import json
import os
import sys

from eagle_convert.vllm.load_check import run_check_many
from eagle_convert.vllm.worker_io import claim_stdout, failure_answer


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] != "check":
        print("usage: python -m eagle_convert.vllm.worker check < request.json", file=sys.stderr)
        return 2
    req = json.loads(sys.stdin.read())
    real_stdout = claim_stdout()
    try:
        result = run_check_many(req)
    except Exception as exc:  # import failures and bugs: still answer with one JSON line
        result = failure_answer(exc)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip slow/unsafe interpreter teardown of vLLM's threads
