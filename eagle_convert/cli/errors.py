"""How the command line names the library's options in its error lines: each flag read from the command.

A library error names an option of the call by its keyword (`EagleConvertError.options`, written
`{name}` or `{name=value}` in the message); `str(exc)` spells it as the keyword, and this module
spells it as the flag that sets it in the command that failed: `{force}` -> `--force`,
`{layout=speculators}` -> `--layout speculators`. The flags are the command's own click options,
which `cli/options.py::dataclass_options` makes from the option objects' fields (the parameter
`into__field` sets `field`), so no table repeats them: `{k}` is `--num-speculative-tokens` where
`MeasureOptions.k` declares it so. A name the command has no option for is `--name-with-dashes`.
"""

from __future__ import annotations

import click

from eagle_convert.errors import EagleConvertError, Spelling


def flags(command: click.Command | None) -> dict[str, str]:
    """Each option of `command` by its library keyword (the field it sets, else its parameter name) -> its flag."""
    out: dict[str, str] = {}
    for p in command.params if command is not None else ():
        if isinstance(p, click.Option) and p.name and not p.hidden:
            out.setdefault(p.name.rpartition("__")[2], next((o for o in p.opts if o.startswith("--")), p.opts[0]))
    return out


def cli_spelling(command: click.Command | None) -> Spelling:
    """A `Spelling` naming each option as `command`'s flag (`--layout speculators`)."""
    table = flags(command)

    def spell(name: str, value: str | None) -> str:
        flag = table.get(name) or "--" + name.replace("_", "-")
        return flag if value is None else f"{flag} {value}"

    return spell


def format_error(exc: EagleConvertError, command: click.Command | None = None) -> str:
    """The error's message and hint as the command line says them (flags, not keywords).

    Args:
        exc: The library error.
        command: The command that raised it, whose options name the flags (None: every name with dashes).

    Returns:
        `message (hint)` with every option the error names spelled as a flag.
    """
    return exc.render(cli_spelling(command))
