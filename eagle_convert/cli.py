"""The `eagle-convert` command line: parse options, call the library, render, map errors.

This is the only place where library exceptions become messages and exit codes:
0 ok, 1 findings or operational failure, 2 usage.
"""

from __future__ import annotations

import json
import os
import sys

from typing import Any

import click
from rich.console import Console

from . import __version__
from .errors import EagleConvertError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _debug_enabled(ctx: click.Context | None) -> bool:
    root = ctx.find_root() if ctx else None
    return bool((root and root.obj and root.obj.get("debug")) or os.environ.get("EAGLE_CONVERT_DEBUG"))


class _Group(click.Group):
    """Turns library errors into one `Error: ...` line and the documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EagleConvertError as exc:
            if _debug_enabled(ctx):
                raise
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)


def _console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eagle-convert")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors (or set EAGLE_CONVERT_DEBUG=1).")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Inspect, upgrade (EAGLE-3 to EAGLE-3.1), validate and smoke-test EAGLE-3 draft checkpoints."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@main.command("inspect")
@click.argument("checkpoint")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/inspect-report.schema.json).")
@click.option("--tensors", is_flag=True, help="Also list every tensor (always included in --json).")
def inspect_cmd(checkpoint: str, as_json: bool, tensors: bool) -> None:
    """Describe CHECKPOINT: a folder, a .safetensors/.bin file, or a hub repo (org/name[@revision]).

    Hub repos are read through config and safetensors headers only: no weights are downloaded.
    """
    from .inspect import inspect_checkpoint

    report = inspect_checkpoint(checkpoint)
    if as_json:
        _echo_json(report.to_dict(tensors=True))
        return
    from .render.inspect import render_inspect

    render_inspect(_console(), report, tensors=tensors)




def _register_extensions() -> None:
    """Attach the other commands; each lives in `eagle_convert/commands/` to keep this file small."""
    from .commands import register_all

    register_all(main)


_register_extensions()
