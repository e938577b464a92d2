"""Render a `push` result."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from eagle_convert.cli.render.inspect import human_bytes
from eagle_convert.push import PushResult


def render_push(console: Console, folder: Path, result: PushResult) -> None:
    if result.validation_errors:
        console.print(
            f"[yellow]warning:[/yellow] pushed despite validation errors "
            f"{', '.join(result.validation_errors)} (--force)"
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
