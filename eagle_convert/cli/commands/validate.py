"""`eagle-convert validate`: check a draft before deploying it to vLLM (exit 0 ok, 1 errors, 2 usage)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from eagle_convert.cli.options import dataclass_options
from eagle_convert.validate import ValidateOptions

if TYPE_CHECKING:
    from eagle_convert.validate import Matrix, ValidationReport


@contextlib.contextmanager
def _progress(enabled: bool, as_json: bool) -> Iterator[Callable[[int, int, str], None] | None]:
    """The deep scan's bytes on the one progress display (`cli/progress.py`), as a `validate`
    progress callback; None without --deep."""
    if not enabled:
        yield None
        return
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.progress import Tick

    with ProgressDisplay(json_mode=as_json) as display:
        yield lambda done, total, tensor: display.tick(Tick("deep_scan", done, total, tensor))


@click.command("validate")
@click.argument("checkpoint")
@dataclass_options(ValidateOptions, "opts")
def validate_cmd(checkpoint: str, opts: ValidateOptions) -> None:
    """Check CHECKPOINT (folder, file or hub repo) the way vLLM will load it, before deploying it.

    Static checks read config.json, safetensors headers and the small d2t/t2d tensors only.
    Exit status: 0 no errors, 1 errors (or warnings with --strict), 2 usage. Finding codes are
    listed in docs/findings.md. With --vllm-version all: one verdict per known vLLM
    release; the exit status is the default release's (the installed vLLM, else the newest).
    With --for sglang / trtllm: that engine's verdict; with several --for (or --for all) one row
    per engine release, and every named engine's errors fail.
    """
    from eagle_convert.validate import run_validate

    with _progress(opts.deep, opts.as_json) as progress:
        result, gate = run_validate(checkpoint, opts, progress=progress)
    _emit(result, gate, strict=opts.strict, as_json=opts.as_json, junit=opts.junit)


def _emit(
    result: ValidationReport | Matrix, gate: ValidationReport, *, strict: bool, as_json: bool, junit: str | None
) -> None:
    """`gate`'s JUnit file, then `result` as JSON or rendered; exit 1 when `result` failed."""
    if junit is not None:
        Path(junit).write_text(gate.to_junit(strict=strict), encoding="utf-8")
    if as_json:
        from eagle_convert.cli.output import echo_json

        echo_json(result.to_dict())
    else:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.validate import render_matrix, render_validate
        from eagle_convert.validate import ValidationReport

        if isinstance(result, ValidationReport):
            render_validate(console(), result, strict=strict)
        else:
            render_matrix(console(), result, strict=strict)
    if result.failed(strict=strict):
        click.get_current_context().exit(1)


def register(group: click.Group) -> None:
    group.add_command(validate_cmd)
