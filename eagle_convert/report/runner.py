"""Run or skip `report` stages against one report folder's records (`report/cache.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert._version import __version__
from eagle_convert.errors import EagleConvertError
from eagle_convert.progress import OnTick, Tick
from eagle_convert.report.cache import STATE_DIR, HashMemo, StageRecord, StageStore, folder_digest, stage_key

Say = Callable[[str], None]
# The report's variants: each one's name is its folder in the report, its label in the measurements.
EAGLE3, IDENTITY, CALIBRATED, FINETUNED = "eagle3", "eagle31-identity", "eagle31-calibrated", "eagle31-finetuned"
FINETUNE_CACHE = "finetune-capture"  # --capture: the fine-tune's capture cache (kept: a rerun resumes it)


@dataclass
class Variant:
    name: str
    path: Path
    title: str
    stage: str | None  # the stage that built it (None: the input)


@dataclass
class StageEvent:
    """Reported after each stage: `status` is "ran" or "skipped" (inputs unchanged)."""

    name: str
    status: str
    seconds: float
    command: str | None = None


class Runner:
    """Runs or skips stages against one report folder's records."""

    def __init__(
        self,
        out: Path,
        say: Say,
        on_stage: Callable[[StageEvent], None] | None,
        on_tick: OnTick | None = None,
        stages: int | None = None,
    ) -> None:
        self.memo = HashMemo(out / STATE_DIR / "hashes.json")
        self.store = StageStore(out, self.memo)
        self.out, self.say, self.on_stage = out, say, on_stage
        self.on_tick, self.stages = on_tick, stages  # the stages' own progress; how many there are
        self.events: list[StageEvent] = []
        self.records: dict[str, StageRecord] = {}

    def digest(self, path: Path) -> str:
        return folder_digest(path, self.memo)

    def cached(self, name: str, options: dict[str, Any], inputs: dict[str, str]) -> tuple[str, StageRecord | None]:
        key = stage_key(name, {"eagle_convert": __version__, **options}, inputs)
        return key, self.store.lookup(name, key)

    def done(self, rec: StageRecord, status: str) -> StageRecord:
        self.records[rec.name] = rec
        if status == "ran":
            self.store.save(rec)
            self.memo.save()
        ev = StageEvent(rec.name, status, rec.seconds if status == "ran" else 0.0, rec.command)
        self.events.append(ev)
        self.say(f"report: {rec.name}: " + (f"done in {rec.seconds:.1f}s" if status == "ran" else "unchanged, skipped"))
        if self.on_tick is not None:
            self.on_tick(Tick("report", len(self.events), self.stages, rec.name))
        if self.on_stage is not None:
            self.on_stage(ev)
        return rec

    def stage(
        self,
        name: str,
        options: dict[str, Any],
        inputs: dict[str, str],
        body: Callable[[], tuple[dict[str, Any], str]],
        outputs: tuple[str, ...] = (),
    ) -> StageRecord:
        key, rec = self.cached(name, options, inputs)
        if rec is not None:
            return self.done(rec, "skipped")
        self.say(f"report: {name} ...")
        t0 = time.perf_counter()
        try:
            result, cmd = body()
        except EagleConvertError as exc:  # one line that names the stage; earlier stages stay recorded
            exc.message = f"report stage {name}: {exc.message}"
            raise
        rec = StageRecord(name, key, result, {o: "" for o in outputs}, time.perf_counter() - t0, cmd)
        return self.done(rec, "ran")
