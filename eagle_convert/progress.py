"""How the library reports progress on a long step: a `Tick` per unit of work, through a callback.

A long step (fine-tune steps, prompts in smoke and check, report stages, calibration) calls
`on_tick(Tick(...))` after each unit of work; the CLI draws them (`cli/progress.py`: a live
display on a terminal, else a line every few seconds on stderr). The library never prints.

A Tick names its step by a key of `STEPS`, the one table of what each step is called and counted
in: the same step shows the same label in every command (target continuations read
`target continuations` whether `capture`, `finetune` or `report` runs them, a draft's prompts
through the reference engine `measure NAME` in smoke, check and report alike).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """What a step is called on the progress display, and what its count counts."""

    label: str
    unit: str


# step key -> label and unit; the commands that show it. A Tick's `detail` (a draft, a stage) follows the label.
STEPS: dict[str, Step] = {
    "measure": Step("measure", "prompts"),  # one draft's prompts, reference engine: smoke, check, report
    "vllm": Step("vLLM", "engine runs"),  # vLLM's passes (info: the draft): smoke, check, report
    "requests": Step("server requests", "requests"),  # streamed requests to running servers: smoke --server
    "drift": Step("drift", "prompts"),  # one draft's prompts, observed: drift, report
    "continuations": Step("target continuations", "prompts"),  # capture, finetune, report, upgrade --init calibrated
    "capture": Step("capture", "shards"),  # the capture cache: capture, finetune --capture, report, upgrade --capture
    "aux_states": Step("calibrate: aux hidden states", "prompts"),  # upgrade --init calibrated, report
    "agreement": Step("calibrate: agreement", "prompts"),  # upgrade --init calibrated, report
    "finetune": Step("finetune", "steps"),  # one stage's steps (detail: the stage): finetune, report
    "write": Step("writing", "bytes"),  # upgrade's output files (upgrade.Progress phase "write")
    "verify": Step("verifying", "bytes"),  # upgrade's verification (upgrade.Progress phase "verify")
    "deep_scan": Step("deep scan", "bytes"),  # validate --deep
    "check": Step("check", "stages"),  # check
    "report": Step("report", "stages"),  # report
}


@dataclass(frozen=True)
class Tick:
    """`done` of `total` units of one step are finished (`total` None: unknown)."""

    step: str  # a key of STEPS: its label and unit
    done: int
    total: int | None = None
    info: str = ""  # what the last unit measured ("loss 3.21 AL 2.41"), shown beside the count
    detail: str = ""  # which one of the step's runs: a draft's name, a fine-tune stage

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"unknown progress step {self.step!r}: add it to STEPS in eagle_convert/progress.py")

    @property
    def task(self) -> str:
        """The label shown, which also keys the display: "measure eagle3", "finetune all", "report"."""
        label = STEPS[self.step].label
        return f"{label} {self.detail}" if self.detail else label

    @property
    def unit(self) -> str:
        return STEPS[self.step].unit


OnTick = Callable[[Tick], None]


def tick_or_nothing(on_tick: OnTick | None) -> OnTick:
    """`on_tick`, or a callback that drops every tick (library code calls it unconditionally)."""
    return on_tick if on_tick is not None else (lambda _t: None)
