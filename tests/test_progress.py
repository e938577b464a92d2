"""The one progress display (cli/progress.py): lines every few seconds off a terminal, nothing for a
short task, and never on stdout; the library's ticks (fine-tune steps with loss and AL)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from eagle_convert.cli.progress import ProgressDisplay, eta_text
from eagle_convert.finetune.plan import FinetuneEvent
from eagle_convert.progress import STEPS, Tick

PACKAGE = Path(__file__).resolve().parents[1] / "eagle_convert"


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
    lines = _run([(at, Tick("finetune", n, 10, f"loss {5 - n / 10:.3f}", detail="all")) for at, n in steps], capsys)
    assert lines == [
        "finetune all: 2/10 steps, loss 4.800 (6s, about 24s left)",
        "finetune all: 4/10 steps, loss 4.600 (12s, about 17s left)",
        "finetune all: 10/10 steps, loss 4.000 (20s)",
    ]


def test_a_short_task_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([(0.0, Tick("check", 0, 2)), (0.4, Tick("check", 2, 2))], capsys) == []


def test_tasks_are_timed_apart_and_restart(capsys: pytest.CaptureFixture[str]) -> None:
    ticks = [
        (0.0, Tick("measure", 0, 4, detail="a")),
        (6.0, Tick("measure", 4, 4, "AL 2.50", detail="a")),
        (6.0, Tick("measure", 0, 4, detail="b")),
        (12.0, Tick("measure", 1, 4, "AL 3.00", detail="b")),
        (13.0, Tick("measure", 4, 4, "AL 3.10", detail="b")),
        (13.0, Tick("measure", 0, 2, detail="b")),  # counting down: a new run of the task
        (14.0, Tick("measure", 1, 2, detail="b")),
    ]
    assert _run(ticks, capsys) == [
        "measure a: 4/4 prompts, AL 2.50 (6s)",  # ran past the interval: its end is printed
        "measure b: 1/4 prompts, AL 3.00 (6s, about 18s left)",
        "measure b: 4/4 prompts, AL 3.10 (7s)",  # a line was printed: so is the end, 1 s later
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
    assert step.tick(best_eal=1.5) == Tick("finetune", 3, 30, "loss 3.214 AL 2.412 (best 2.500)", detail="all")
    assert step.tick(best_eal=1.5).task == "finetune all"  # type: ignore[union-attr]
    gen = FinetuneEvent("generate", "target continuation 8/48", step=8, total=48)
    assert gen.tick() == Tick("continuations", 8, 48)  # the label capture and report show too
    assert FinetuneEvent("stage", "stage all: 30 steps").tick() is None  # a line, not a count


def test_bytes_phases_of_an_upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    from eagle_convert.cli.progress import ByteProgress

    clock = _Clock()
    with ProgressDisplay(live=False, interval=5.0, clock=clock) as display:
        up = ByteProgress(display)
        up.start("write", 3 << 30)
        for _ in range(3):
            clock.now += 3.0
            up.advance(1 << 30)
        up.start("verify", 3 << 30)  # verified in under 5 s: no line
        clock.now += 1.0
        up.advance(3 << 30)
    assert capsys.readouterr().err.splitlines() == [
        "writing: 2.0 GiB/3.0 GiB (6s, about 3s left)",
        "writing: 3.0 GiB/3.0 GiB (9s)",
    ]


def test_nothing_is_drawn_without_a_tick() -> None:
    with ProgressDisplay(live=True) as display:
        assert display._rich is None  # a quick command on a terminal gets no empty live display


def test_a_tick_names_a_step_of_the_table() -> None:
    """The label and unit come from STEPS; a step missing from it is refused where the Tick is made."""
    t = Tick("measure", 2, 5, "AL 2.00", detail="eagle3")
    assert (t.task, t.unit) == ("measure eagle3", "prompts")
    assert Tick("vllm", 0, 3).task == "vLLM" and Tick("vllm", 0, 3).unit == "engine runs"
    with pytest.raises(ValueError, match="unknown progress step 'smoke eagle3': add it to STEPS"):
        Tick("smoke eagle3", 0, 1)
    labels = [s.label for s in STEPS.values()]
    assert len(set(labels)) == len(labels)  # one label per step, and no two steps share one


def _tick_calls() -> list[tuple[str, int, ast.Call]]:
    """Every `Tick(...)` call in the package, with its file and line."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Tick":
                out.append((str(path.relative_to(PACKAGE.parent)), node.lineno, node))
    return out


def test_every_tick_in_the_package_takes_its_label_from_the_table() -> None:
    """Every Tick names its step with a literal key of STEPS (no label spelled at a call site); the one
    exception, cli/progress.py's ByteProgress, passes upgrade's phase names, which are keys too."""
    calls = _tick_calls()
    assert len(calls) >= 20  # the walk finds the call sites (there are 23)
    seen: set[str] = set()
    for where, line, call in calls:
        arg = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "step")
        if where == "eagle_convert/cli/progress.py":
            assert isinstance(arg, ast.Name | ast.Attribute), (where, line)  # ByteProgress: the phase
            continue
        assert isinstance(arg, ast.Constant) and arg.value in STEPS, f"{where}:{line}: step must be a key of STEPS"
        seen.add(arg.value)
    phases = set()
    for path in (PACKAGE / "upgrade").glob("*.py"):
        phases |= set(re.findall(r'progress\.start\("(\w+)"', path.read_text(encoding="utf-8")))
    assert phases == {"write", "verify"} and phases <= set(STEPS)
    assert seen | phases == set(STEPS)  # and every step of the table is used
    # No label is rewritten on the way (finetune once prefixed its capture's ticks: "finetune capture").
    src = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    assert not re.search(r"replace\([^)]*\btask=", src)
