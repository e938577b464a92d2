"""The `eagle-convert` command line: parse options, call the library, render, map errors.

This is the only place where library exceptions become messages (their options spelled as flags by
`cli.errors`) and exit codes:
0 ok, 1 findings or operational failure, 2 usage; an interrupted command exits 130 (SIGINT),
143 (SIGTERM) or 129 (SIGHUP) with one line saying what was written (`cli.interrupt`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import click

from eagle_convert._version import __version__
from eagle_convert.cli.errors import format_error
from eagle_convert.cli.helpformat import HelpContext
from eagle_convert.cli.interrupt import interrupt_exit_code, interrupt_message, raising_signals
from eagle_convert.cli.options import vllm_version_option
from eagle_convert.cli.output import console, echo_json
from eagle_convert.errors import EagleConvertError
from eagle_convert.io import printable

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
# Lazily loaded commands (module names under eagle_convert/cli/commands/), in pipeline order: the
# order `--help` lists them in, after `inspect` (defined here): look, convert, compare, check the
# static path, measure, capture the target's features, train, gate, report, publish.
COMMANDS = ("upgrade", "diff", "validate", "smoke", "drift", "capture", "finetune", "report", "check", "push")
PIPELINE = ("inspect", *COMMANDS)


def _command_module_exists(name: str) -> bool:
    return importlib.util.find_spec(f"eagle_convert.cli.commands.{name}") is not None


def _is_command_decorator(node: ast.expr, name: str) -> bool:
    """`@click.command("name")` (or `@command("name")`)."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return called == "command" and node.args[0].value == name


def help_stand_in(name: str) -> click.Command | None:
    """A command carrying only `name`'s docstring, read from its module's source without importing
    it (the group's --help lists every command; importing them all would triple its start-up).
    None when the source cannot be read or holds no such command (the caller imports it then)."""
    spec = importlib.util.find_spec(f"eagle_convert.cli.commands.{name}")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_command_decorator(d, name) for d in node.decorator_list):
            return click.Command(name, help=ast.get_docstring(node, clean=False))
    return None


def _debug_enabled(ctx: click.Context | None) -> bool:
    root = ctx.find_root() if ctx else None
    return bool((root and root.obj and root.obj.get("debug")) or os.environ.get("EAGLE_CONVERT_DEBUG"))


class _Group(click.Group):
    """Turns library errors into one `Error: ...` line and the documented exit code.

    Commands other than `inspect` are imported on first use (`eagle_convert.cli.commands.<name>`,
    each with `register(group)`), so `inspect` starts fast and never loads torch or vLLM. Every
    command's context is `HelpContext`: its `--help` never splits a word (cli/helpformat.py).
    """

    context_class = HelpContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command in pipeline order (`PIPELINE`); one added without a place in it comes last."""
        names = set(self.commands) | {c for c in COMMANDS if _command_module_exists(c)}
        return [c for c in PIPELINE if c in names] + sorted(names - set(PIPELINE))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of --help from each command's docstring, importing none of them."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name) or help_stand_in(name) or self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS and _command_module_exists(cmd_name):
            importlib.import_module(f"eagle_convert.cli.commands.{cmd_name}").register(self)
        cmd = self.commands.get(cmd_name)
        if cmd is not None:
            cmd.context_class = HelpContext
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with raising_signals():
                return super().invoke(ctx)
        except EagleConvertError as exc:
            if _debug_enabled(ctx):
                raise
            line = format_error(exc, self.get_command(ctx, ctx.invoked_subcommand or ""))
            click.echo(f"Error: {printable(line, one_line=True)}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP raised by raising_signals
            click.echo(interrupt_message(exc), err=True)
            ctx.exit(interrupt_exit_code(exc))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eagle-convert")
@click.option(
    "--debug", is_flag=True, help="Show tracebacks instead of one-line errors (or set EAGLE_CONVERT_DEBUG=1)."
)
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Inspect, upgrade (EAGLE-3 to EAGLE-3.1), validate, measure and publish EAGLE-3 draft checkpoints.

    The commands, in pipeline order: inspect, upgrade, diff, validate, smoke, drift, capture,
    finetune, report, check, push.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@main.command("inspect")
@click.argument("checkpoint")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/inspect-report.schema.json).")
@click.option("--tensors", is_flag=True, help="Also list every tensor (always included in --json).")
@vllm_version_option()
def inspect_cmd(checkpoint: str, as_json: bool, tensors: bool, vllm_version: str | None) -> None:
    """Describe CHECKPOINT: a folder, a .safetensors/.bin file, or a hub repo (org/name[@revision]).

    Hub repos are read through config and safetensors headers only: no weights are downloaded.
    """
    from eagle_convert.draft import inspect_checkpoint

    report = inspect_checkpoint(checkpoint, vllm_version=vllm_version)
    if as_json:
        echo_json(report.to_dict(tensors=True))
        return
    from eagle_convert.cli.render.inspect import render_inspect

    render_inspect(console(), report, tensors=tensors)


if __name__ == "__main__":
    main()
