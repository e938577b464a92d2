"""The one progress display (cli/progress.py): lines every few seconds off a terminal, nothing for a
short task, and never on stdout; the library's ticks (fine-tune steps with loss and AL)."""

from __future__ import annotations

import pytest

from eagle_convert.cli.progress import ProgressDisplay, eta_text
from eagle_convert.finetune.plan import FinetuneEvent
from eagle_convert.progress import Tick


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(ticks: list[tuple[float, Tick]], capsys: pytest.CaptureFixture[str], **kw) -> list[str]:
    clock = _Clock()
    with ProgressDisplay(live=False, interval=5.0, clock=clock, **kw) as display:
        for at, t in ticks:
            clock.now = 100.0 + at
            display.tick(t)
    out, err = capsys.readouterr()
    assert out == ""  # never on stdout
    return err.splitlines()


def test_a_long_task_prints_every_interval_and_when_it_ends(capsys: pytest.CaptureFixture[str]) -> None:
    steps = [(0.0, 0), (3.0, 1), (6.0, 2), (8.0, 3), (11.5, 4), (20.0, 10)]
    lines = _run([(at, Tick("finetune all", n, 10, "steps", f"loss {5 - n / 10:.3f}")) for at, n in steps], capsys)
    assert lines == [
        "finetune all: 2/10 steps, loss 4.800 (6s, about 24s left)",
        "finetune all: 4/10 steps, loss 4.600 (12s, about 17s left)",
        "finetune all: 10/10 steps, loss 4.000 (20s)",
    ]


def test_a_short_task_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([(0.0, Tick("check", 0, 2, "stages")), (0.4, Tick("check", 2, 2, "stages"))], capsys) == []


def test_tasks_are_timed_apart_and_restart(capsys: pytest.CaptureFixture[str]) -> None:
    ticks = [
        (0.0, Tick("smoke a", 0, 4, "prompts")),
        (6.0, Tick("smoke a", 4, 4, "prompts", "AL 2.50")),
        (6.0, Tick("smoke b", 0, 4, "prompts")),
        (12.0, Tick("smoke b", 1, 4, "prompts", "AL 3.00")),
        (13.0, Tick("smoke b", 4, 4, "prompts", "AL 3.10")),
        (13.0, Tick("smoke b", 0, 2, "prompts")),  # counting down: a new run of the task
        (14.0, Tick("smoke b", 1, 2, "prompts")),
    ]
    assert _run(ticks, capsys) == [
        "smoke a: 4/4 prompts, AL 2.50 (6s)",  # ran past the interval: its end is printed
        "smoke b: 1/4 prompts, AL 3.00 (6s, about 18s left)",
        "smoke b: 4/4 prompts, AL 3.10 (7s)",  # a line was printed: so is the end, 1 s later
    ]


def test_messages_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressDisplay(json_mode=True) as display:
        assert display.live is False  # --json: plain lines whatever stderr is
        display.say("report: finetune ...")
    assert capsys.readouterr() == ("", "report: finetune ...\n")


def test_eta_text() -> None:
    assert eta_text(30.0, 3, 11) == "(30s, about 80s left)"
    assert eta_text(600.0, 10, 30) == "(10 min, about 20 min left)"
    assert eta_text(4.0, 0, 10) == "(4s)" and eta_text(4.0, 5, None) == "(4s)"


def test_finetune_steps_tick_with_loss_and_acceptance_length() -> None:
    step = FinetuneEvent("step", "all: step 3/30 loss 3.214", stage="all", step=3, total=30, loss=3.2141, eal=1.412)
    assert step.tick(best_eal=1.5) == Tick("finetune all", 3, 30, "steps", "loss 3.214 AL 2.412 (best 2.500)")
    gen = FinetuneEvent("generate", "target continuation 8/48", step=8, total=48)
    assert gen.tick("  finetune") == Tick("  finetune: target continuations", 8, 48, "prompts")
    assert FinetuneEvent("stage", "stage all: 30 steps").tick() is None  # a line, not a count


def test_bytes_phases_of_an_upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    from eagle_convert.cli.progress import ByteProgress

    clock = _Clock()
    with ProgressDisplay(live=False, interval=5.0, clock=clock) as display:
        up = ByteProgress(display, {"write": "copying", "verify": "verifying"})
        up.start("write", 3 << 30)
        for _ in range(3):
            clock.now += 3.0
            up.advance(1 << 30)
        up.start("verify", 3 << 30)  # verified in under 5 s: no line
        clock.now += 1.0
        up.advance(3 << 30)
    assert capsys.readouterr().err.splitlines() == [
        "copying: 2.0 GiB/3.0 GiB (6s, about 3s left)",
        "copying: 3.0 GiB/3.0 GiB (9s)",
    ]


def test_nothing_is_drawn_without_a_tick() -> None:
    with ProgressDisplay(live=True) as display:
        assert display._rich is None  # a quick command on a terminal gets no empty live display
