"""The one progress display of every command: live on a terminal, plain lines elsewhere.

The library reports a long step through callbacks (`eagle_convert.progress.Tick` per unit of work,
plus one-line messages); `ProgressDisplay` draws them on stderr, never on stdout, so `--json` output
stays one JSON document:

- stderr is a terminal and `--json` is not given: a rich display, one bar per task with its count,
  what the last unit measured (loss, AL), elapsed time and time left; messages print above it;
- otherwise (piped, CI logs, `--json`): a task that runs longer than `LINE_INTERVAL_S` seconds
  prints one line every `LINE_INTERVAL_S` seconds and one when it ends, e.g.
  `finetune all: 12/30 steps, loss 3.214 AL 2.412 (40s, about 60s left)`; a shorter one prints
  nothing, so quick commands keep their output as it was.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import click

from eagle_convert.cli.output import console
from eagle_convert.progress import Tick

LINE_INTERVAL_S = 5.0  # at most one progress line this often off a terminal ("every few seconds")


def _seconds(s: float) -> str:
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def eta_text(elapsed: float, done: int, total: int | None) -> str:
    """`(40s, about 60s left)`: elapsed time, and the rest at the rate so far when it is known."""
    if total is None or done <= 0 or done >= total:
        return f"({_seconds(elapsed)})"
    return f"({_seconds(elapsed)}, about {_seconds(elapsed / done * (total - done))} left)"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.2f} TiB"


def _count(t: Tick) -> str:
    """`12/30 steps`, or for bytes `1.2 GiB/6.5 GiB`."""
    if t.unit == "bytes":
        return _bytes(t.done) + (f"/{_bytes(t.total)}" if t.total is not None else "")
    count = f"{t.done}/{t.total}" if t.total is not None else str(t.done)
    return f"{count} {t.unit}" if t.unit else count


class ByteProgress:
    """An `upgrade.Progress` (start a phase, advance by bytes) drawn as ticks, one task per phase;
    a phase's name ("write", "verify") is its step in `eagle_convert.progress.STEPS`."""

    def __init__(self, display: ProgressDisplay) -> None:
        self.display = display
        self._step, self._done, self._total = "", 0, 0

    def start(self, phase: str, total: int) -> None:
        if self._step and self._done < self._total:
            self.display.tick(Tick(self._step, self._total, self._total))  # the phase before is done
        self._step, self._done, self._total = phase, 0, total
        self.display.tick(Tick(phase, 0, total))

    def advance(self, nbytes: int) -> None:
        self._done += nbytes
        self.display.tick(Tick(self._step, self._done, self._total))


@dataclass
class _Task:
    started: float
    last_line: float | None = None  # when its last line was printed (None: none yet)
    rich_id: Any = None
    done: int = 0


@dataclass
class ProgressDisplay:
    """Draw ticks and messages on stderr (module docstring); use as a context manager.

    Args:
        json_mode: the command prints `--json`: plain lines, whatever stderr is.
        live: force (True) or forbid (False) the rich display; None: stderr is a terminal.
        interval: seconds between two lines of one task off a terminal (None: `LINE_INTERVAL_S`).
        clock: the time source (tests pass a fake one).
    """

    json_mode: bool = False
    live: bool | None = None
    interval: float | None = None
    clock: Callable[[], float] = time.monotonic
    _tasks: dict[str, _Task] = field(default_factory=dict)
    _rich: Any = None

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = not self.json_mode and sys.stderr.isatty()
        if self.interval is None:
            self.interval = LINE_INTERVAL_S

    def __enter__(self) -> ProgressDisplay:
        return self  # the live display starts with the first tick: a command without one draws nothing

    def _start_live(self) -> Any:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._rich = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console(stderr=True),
            transient=False,
        )
        self._rich.__enter__()
        return self._rich

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._rich is not None:
            self._rich.__exit__(et, ev, tb)
            self._rich = None

    def say(self, message: str) -> None:
        """One message line (above the live display on a terminal)."""
        if self._rich is not None:
            from rich.markup import escape

            self._rich.console.print(escape(message), highlight=False)
        else:
            click.echo(message, err=True)

    def tick(self, t: Tick) -> None:
        """`t.done` of `t.total` units of `t.task` are finished."""
        now = self.clock()
        task = self._tasks.get(t.task)
        if task is None or t.done < task.done:  # a task name reused for a new run starts over
            task = self._tasks[t.task] = _Task(started=now)
        task.done = t.done
        if self.live:
            bar = self._rich or self._start_live()
            if task.rich_id is None:
                task.rich_id = bar.add_task(t.task, total=t.total, count="", info="")
            bar.update(task.rich_id, completed=t.done, total=t.total, count=_count(t), info=t.info)
            return
        last = t.total is not None and t.done >= t.total
        since = now - (task.started if task.last_line is None else task.last_line)
        due = since >= (self.interval or 0.0)
        if due or (last and task.last_line is not None):
            task.last_line = now
            info = f", {t.info}" if t.info else ""
            click.echo(f"{t.task}: {_count(t)}{info} {eta_text(now - task.started, t.done, t.total)}", err=True)
