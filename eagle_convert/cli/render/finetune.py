"""Render a fine-tune: the plan before it starts, its progress (`cli/progress.py`), and the result."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cli.progress import ProgressDisplay
from eagle_convert.finetune import (
    HOLD_OUT_EVERY,
    STAGE_PARAMS,
    FinetuneEvent,
    FinetunePlan,
    FinetuneResult,
    held_out_al,
)


def render_plan(console: Console, plan: FinetunePlan) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row(
        "finetune", f"{escape(str(plan.draft))} [dim]({plan.variant}, {plan.dtype})[/dim] → {escape(str(plan.out))}"
    )
    grid.add_row("target", escape(str(plan.target)) + f" [dim](aux layer ids {plan.aux_ids})[/dim]")
    if plan.cache is not None and plan.capture is None:
        grid.add_row("data", f"the sequences of the capture cache {escape(str(plan.cache))} (the target is not loaded)")
    else:
        grid.add_row(
            "data",
            f"{len(plan.prompts)} prompts ({escape(plan.prompts_label)}), chat template "
            f"{escape(plan.template_label)}, + {plan.continuation_tokens} target greedy tokens each",
        )
    if plan.capture is not None:
        grid.add_row(
            "capture",
            f"{plan.capture.engine} first, into {escape(str(plan.cache))}; then trained from the cache",
        )
    for s in plan.stages:
        what = ", ".join(STAGE_PARAMS[s.name] or ["every weight but embed_tokens / lm_head"])
        l2sp = f", L2-SP {s.l2sp:g}" if s.l2sp else ""
        grid.add_row(f"stage {s.name}", f"{s.steps} steps, lr {s.lr:g}{l2sp}: {escape(what)}")
    window = f"last {plan.max_len} positions per sequence" if plan.max_len else "whole sequences"
    grid.add_row("TTT", f"{plan.ttt_steps} steps, batch {plan.batch_size}, {window}, seed {plan.seed}")
    grid.add_row(
        "keeps",
        f"the step with the best held-out expected acceptance length (every {HOLD_OUT_EVERY}th "
        f"sequence held out, scored every {plan.eval_every} step{'s' if plan.eval_every > 1 else ''})",
    )
    console.print(grid)


class FinetuneProgress:
    """A `finetune.Progress` drawing `FinetuneEvent`s on a `ProgressDisplay`: counts for the
    target continuations and each stage's steps (loss, held-out AL, best so far), a line for the rest."""

    def __init__(self, display: ProgressDisplay, prefix: str = "finetune") -> None:
        self.display = display
        self.prefix = prefix
        self.best: float | None = None

    def __call__(self, e: FinetuneEvent) -> None:
        if e.eal is not None:
            self.best = e.eal if self.best is None else max(self.best, e.eal)
        tick = e.tick(self.best if e.kind == "step" and e.eal is not None else None)
        if tick is not None:
            self.display.tick(tick)
        elif e.kind != "done":
            self.display.say(f"{self.prefix}: {e.message}")


def _acc(values: list[float]) -> str:
    return " / ".join(f"{100 * a:.1f}%" for a in values)


def render_result(console: Console, plan: FinetunePlan, result: FinetuneResult) -> None:
    table = Table(title="stages", title_justify="left")
    for col, justify in (
        ("stage", "left"),
        ("tensors", "right"),
        ("steps", "right"),
        ("lr", "right"),
        ("L2-SP", "right"),
        ("loss first → last", "right"),
        ("held-out AL first → last (max)", "right"),
        ("seconds", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in result.stages:
        loss = f"{s.losses[0]:.3f} → {s.losses[-1]:.3f}" if s.losses else "—"
        al = [held_out_al(e) for _, e in s.eal]
        eal = f"{al[0]:.3f} → {al[-1]:.3f} ({max(al):.3f})" if al else "—"
        table.add_row(
            s.name, str(len(s.trainable)), str(s.steps), f"{s.lr:g}", f"{s.l2sp:g}", loss, eal, f"{s.seconds:.1f}"
        )
    console.print(table)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row(
        "data", f"{result.sequences} sequences, {result.tokens} tokens (generated in {result.generate_seconds:.1f}s)"
    )
    grid.add_row(
        "TTT step accuracy",
        f"{_acc(result.step_acc_before)} → [bold]{_acc(result.step_acc_after)}[/bold] "
        "[dim](teacher-forced, per TTT step, training data)[/dim]",
    )
    grid.add_row("TTT loss", f"{result.loss_before:.3f} → {result.loss_after:.3f}")
    if result.best is not None:
        kept = (
            "the input (no step beat it)"
            if result.best["stage"] == "start"
            else f"stage {result.best['stage']} step {result.best['step']}"
        )
        grid.add_row(
            "kept",
            f"{kept}: held-out AL {held_out_al(result.eal_before or 0.0):.3f} → "
            f"[bold]{held_out_al(result.best['eal']):.3f}[/bold] [dim](predicted from the TTT steps' top-1 "
            f"accuracy on {result.held_out} held-out sequences)[/dim]",
        )
    grid.add_row("wrote", f"{escape(str(result.out))} in {result.seconds:.1f}s")
    console.print(grid)
    console.print(
        f"[dim]Measure acceptance: eagle-convert smoke {escape(str(plan.target))} "
        f"-d {escape(str(plan.draft))} -d {escape(str(result.out))}[/dim]"
    )
