"""The GPU check's bookkeeping: outcomes, the time budget, the log, and the JSON summary.

Each check is timed and, on a CUDA device, its peak GPU memory read; the summary is rewritten after
every check, so a run stopped at its time limit still leaves what it measured (`gpu-check.json` in
the work folder and, with `--out`, a copy there: the device tool returns that folder).
"""

from __future__ import annotations

import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATUSES = ("PASS", "WARN", "FAIL", "SKIP")


@dataclass
class Outcome:
    name: str
    status: str  # PASS | WARN | FAIL | SKIP
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)  # measured numbers for the JSON summary
    seconds: float = 0.0  # the whole check's wall time
    peak_gpu_mib: float | None = None  # torch.cuda.max_memory_allocated over the check (CUDA only)


class Run:
    """The work folder, the log, the time budget, the outcomes and where the summary goes."""

    def __init__(self, work: Path, budget_s: float, device: str, out: Path | None = None) -> None:
        self.work, self.budget_s, self.device, self.out = work, budget_s, device, out
        self.t0 = time.perf_counter()
        self.log = open(work / "gpu-check.log", "a", encoding="utf-8")  # noqa: SIM115 - closed in main
        self.outcomes: list[Outcome] = []
        self.environment: dict[str, Any] = {}

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def say(self, msg: str) -> None:
        line = f"[{time.perf_counter() - self.t0:5.0f}s] {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def check(self, name: str, fn: Callable[[], Outcome | list[Outcome]]) -> None:
        """Run one check within the budget: one line per outcome, the traceback in the log."""
        if time.perf_counter() - self.t0 > self.budget_s:
            self.outcomes.append(Outcome(name, "SKIP", f"time budget of {self.budget_s:.0f}s used up"))
            self.write_summary()
            return
        self.say(f"{name} ...")
        _reset_peak(self.cuda)
        t0 = time.perf_counter()
        try:
            got = fn()
        except Exception as exc:  # one line here, the traceback in the log
            self.log.write(traceback.format_exc())
            got = Outcome(name, "FAIL", f"{type(exc).__name__}: {one_line(exc)} (traceback: {self.log.name})")
        seconds, peak = time.perf_counter() - t0, _peak_mib(self.cuda)
        for o in got if isinstance(got, list) else [got]:
            o.name = o.name or name
            o.seconds = o.seconds or round(seconds, 1)
            o.peak_gpu_mib = o.peak_gpu_mib if o.peak_gpu_mib is not None else peak
            self.outcomes.append(o)
            self.say(f"{o.status} {o.name}: {o.detail}")
        free_gpu()
        self.write_summary()

    def counts(self) -> dict[str, int]:
        return {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}

    def summary_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "device": self.device,
            "budget_s": self.budget_s,
            "seconds": round(time.perf_counter() - self.t0, 1),
            "counts": self.counts(),
            "outcomes": [asdict(o) for o in self.outcomes],
        }

    def write_summary(self) -> None:
        text = json.dumps(_finite(self.summary_dict()), indent=1) + "\n"
        for folder in (self.work, self.out):
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "gpu-check.json").write_text(text)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(fn(), its wall seconds), waiting for the GPU's queued work so the time is the work's."""
    _sync()
    t0 = time.perf_counter()
    out = fn()
    _sync()
    return out, round(time.perf_counter() - t0, 2)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _reset_peak(cuda: bool) -> None:
    import torch

    if cuda and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_mib(cuda: bool) -> float | None:
    import torch

    if not (cuda and torch.cuda.is_available()):
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def _finite(value: Any) -> Any:
    """JSON has no NaN or inf: such a number is written as its string ("nan"), visible, not invalid."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
