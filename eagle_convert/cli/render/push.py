"""Render a `push` result, or with `--dry-run` what it would send."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from eagle_convert.cli.render.inspect import human_bytes
from eagle_convert.draft import CARD_FILE
from eagle_convert.push import PushPlan, PushResult


def render_push(console: Console, folder: Path, result: PushResult) -> None:
    if result.validation_errors:
        console.print(
            f"[yellow]warning:[/yellow] pushed despite validation errors "
            f"{', '.join(result.validation_errors)} (--allow-invalid)"
        )
    total = sum(result.files.values())
    where = (
        f"pull request {escape(result.pr_url)}"
        if result.pr_url
        else f"{escape(result.repo_id)}@{escape(result.revision)}"
    )
    console.print(
        f"[green]pushed[/green] {escape(str(folder))}: {len(result.files)} files, {human_bytes(total)} "
        f"→ {where} (commit {result.commit_oid[:12]}, {escape(result.endpoint)})"
    )
    if result.card_retargeted:
        console.print(f"[dim]README.md: the vllm serve command now loads {escape(result.repo_id)}[/dim]")
    if result.card_generated:
        console.print(
            f"[dim]README.md: a model card generated for {escape(result.repo_id)} (the folder had none)[/dim]"
        )


def render_push_plan(console: Console, folder: Path, plan: PushPlan) -> None:
    """The repo, every file with its size, the commit message and the validation verdict."""
    how = f"pull request against {escape(plan.revision)}" if plan.create_pr else f"commit to {escape(plan.revision)}"
    new = "created private when missing" if plan.private else "created when missing"
    console.print(f"[bold]dry run[/bold]: nothing is sent to {escape(plan.endpoint)}")
    console.print(f"repo     {escape(plan.repo_id)} ({how}; {new})")
    console.print(f"message  {escape(plan.commit_message)}")
    total = sum(plan.files.values())
    console.print(f"files    {len(plan.files)}, {human_bytes(total)} ({total:,} bytes)")
    width = max(map(len, plan.files), default=0)
    for name, size in plan.files.items():
        note = ""
        if name == CARD_FILE and (plan.card_retargeted or plan.card_generated):
            made = "generated: the folder has none; " if plan.card_generated else ""
            note = f"  [dim]({made}its vllm serve command loads {escape(plan.repo_id)})[/dim]"
        console.print(f"  {escape(name.ljust(width))}  {human_bytes(size):>10}{note}")
    warnings = f", {plan.validation_warnings} warning{'s' * (plan.validation_warnings != 1)}"
    if not plan.validation_errors:
        console.print(f"validate [green]passes[/green] (0 errors{warnings})")
        return
    n = len(plan.validation_errors)
    codes = ", ".join(code for code, _ in plan.validation_errors)
    if plan.allow_invalid:
        console.print(
            f"validate [red]fails[/red] ({n} error{'s' * (n > 1)}: {codes}{warnings}); --allow-invalid pushes it anyway"
        )
        return
    code, message = plan.validation_errors[0]
    console.print(
        f"validate [red]fails[/red] ({n} error{'s' * (n > 1)}: {codes}{warnings}); push would refuse it: "
        f"{code}: {escape(message)} (see eagle-convert validate {escape(str(folder))}, or pass --allow-invalid)"
    )
