"""How the library reports progress on a long step: a `Tick` per unit of work, through a callback.

A long step (fine-tune steps, prompts in smoke and check, report stages, calibration) calls
`on_tick(Tick(...))` after each unit of work; the CLI draws them (`cli/progress.py`: a live
display on a terminal, else a line every few seconds on stderr). The library never prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["OnTick", "Tick", "tick_or_nothing"]


@dataclass(frozen=True)
class Tick:
    """`done` of `total` units of one task are finished (`total` None: unknown)."""

    task: str  # names the task and keys its display: "smoke eagle3", "finetune all", "report"
    done: int
    total: int | None = None
    unit: str = ""  # "prompts", "steps", "stages", "runs"
    info: str = ""  # what the last unit measured ("loss 3.21 AL 2.41"), shown beside the count


OnTick = Callable[[Tick], None]


def tick_or_nothing(on_tick: OnTick | None) -> OnTick:
    """`on_tick`, or a callback that drops every tick (library code calls it unconditionally)."""
    return on_tick if on_tick is not None else (lambda _t: None)
