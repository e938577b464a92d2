"""Render a fine-tune: the plan before it starts, a live progress display, and the result."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from eagle_convert.finetune.plan import STAGE_PARAMS, FinetuneEvent, FinetunePlan, FinetuneResult


def render_plan(console: Console, plan: FinetunePlan) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("finetune", f"{escape(str(plan.draft))} [dim]({plan.variant}, {plan.dtype})[/dim] "
                 f"→ {escape(str(plan.out))}")
    grid.add_row("target", escape(str(plan.target)) + f" [dim](aux layer ids {plan.aux_ids})[/dim]")
    grid.add_row("data", f"{len(plan.prompts)} prompts ({escape(plan.prompts_label)}), chat template "
                 f"{escape(plan.template_label)}, + {plan.continuation_tokens} target greedy tokens each")
    for s in plan.stages:
        what = ", ".join(STAGE_PARAMS[s.name] or ["every weight but embed_tokens / lm_head"])
        l2sp = f", L2-SP {s.l2sp:g}" if s.l2sp else ""
        grid.add_row(f"stage {s.name}", f"{s.steps} steps, lr {s.lr:g}{l2sp}: {escape(what)}")
    grid.add_row("TTT", f"{plan.ttt_steps} steps, batch {plan.batch_size}, seed {plan.seed}")
    console.print(grid)


class RichProgress:
    """A progress bar per phase (generation, each stage) fed by `FinetuneEvent`s."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                 console=console, transient=False)
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.__exit__(et, ev, tb)

    def _task(self, key: str, description: str, total: int) -> TaskID:
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(description, total=total or None, info="")
        return self.tasks[key]

    def __call__(self, e: FinetuneEvent) -> None:
        if e.kind == "generate":
            t = self._task("generate", "target continuations", e.total)
            self.progress.update(t, completed=e.step - 1)
            if e.step == e.total:
                self.progress.update(t, completed=e.total)
        elif e.kind == "stage" and e.stage:
            self._task(e.stage, f"stage {e.stage}", e.total)
        elif e.kind == "step" and e.stage:
            t = self._task(e.stage, f"stage {e.stage}", e.total)
            self.progress.update(t, completed=e.step, info=f"loss {e.loss:.3f}" if e.loss is not None else "")
        elif e.kind in ("evaluate", "write"):
            self.progress.console.print(f"[dim]{escape(e.message)}[/dim]")


class LineProgress:
    """Plain progress lines for a non-terminal stderr: one per phase and per ~10% of a stage."""

    def __init__(self, echo) -> None:  # type: ignore[no-untyped-def]
        self.echo = echo

    def __call__(self, e: FinetuneEvent) -> None:
        if e.kind == "generate" and e.step not in (1, e.total):
            return
        if e.kind == "step" and e.step != e.total and e.step % max(1, e.total // 10):
            return
        if e.kind != "done":
            self.echo(f"finetune: {e.message}")


def _acc(values: list[float]) -> str:
    return " / ".join(f"{100 * a:.1f}%" for a in values)


def render_result(console: Console, plan: FinetunePlan, result: FinetuneResult) -> None:
    table = Table(title="stages", title_justify="left")
    for col, justify in (("stage", "left"), ("tensors", "right"), ("steps", "right"), ("lr", "right"),
                         ("L2-SP", "right"), ("loss first → last", "right"), ("seconds", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in result.stages:
        loss = f"{s.losses[0]:.3f} → {s.losses[-1]:.3f}" if s.losses else "—"
        table.add_row(s.name, str(len(s.trainable)), str(s.steps), f"{s.lr:g}", f"{s.l2sp:g}", loss,
                      f"{s.seconds:.1f}")
    console.print(table)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("data", f"{result.sequences} sequences, {result.tokens} tokens "
                 f"(generated in {result.generate_seconds:.1f}s)")
    grid.add_row("TTT step accuracy", f"{_acc(result.step_acc_before)} → [bold]{_acc(result.step_acc_after)}[/bold] "
                 "[dim](teacher-forced, per TTT step, training data)[/dim]")
    grid.add_row("TTT loss", f"{result.loss_before:.3f} → {result.loss_after:.3f}")
    grid.add_row("wrote", f"{escape(str(result.out))} in {result.seconds:.1f}s")
    console.print(grid)
    console.print(f"[dim]Measure acceptance: eagle-convert smoke {escape(str(plan.target))} "
                  f"-d {escape(str(plan.draft))} -d {escape(str(result.out))}[/dim]")
