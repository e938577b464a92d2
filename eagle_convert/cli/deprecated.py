"""Renamed flags and command forms keep working for a while, each with one warning line on stderr.

A rename must not break the scripts that use the old spelling, and must not stay silent either: the
old flag becomes a hidden alias of the new one (`renamed_option`), a positional that became an
option stays a hidden optional argument (`positional_to_option`), and any other old positional form
is told apart by the command itself and reported with `warn_deprecated`. All print the same line:

    Warning: --engine is deprecated; use --load (it will be removed in a later release).

stdout is untouched, so `--json` output stays parseable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["deprecation_line", "positional_to_option", "renamed_option", "warn_deprecated"]


def deprecation_line(old: str, new: str) -> str:
    """The one warning line for `old` (a flag or a command form) replaced by `new`."""
    return f"Warning: {old} is deprecated; use {new} (it will be removed in a later release)."


def warn_deprecated(old: str, new: str) -> None:
    """Print `deprecation_line(old, new)` on stderr, e.g. when a command sees its old positional
    form (`smoke TARGET -d DRAFT`): the command decides which form it was given, this says it."""
    click.echo(deprecation_line(old, new), err=True)


def _hidden_alias(old: str, new: click.Option, name: str) -> click.Option:
    """A hidden option spelled `old` that parses exactly as `new` does (type, flag, count, repeat)."""
    if new.secondary_opts:
        raise TypeError(f"renamed_option: {new.opts[0]} has an off switch ({new.secondary_opts[0]}); not supported")
    kwargs: dict[str, Any] = {"hidden": True, "callback": new.callback, "metavar": new.metavar}
    if new.is_flag:
        kwargs.update(is_flag=True, flag_value=new.flag_value)
    elif new.count:
        kwargs.update(count=True)
    else:
        kwargs.update(type=new.type, multiple=new.multiple, nargs=new.nargs)
    return click.Option([old, name], **kwargs)


def _given(ctx: click.Context, name: str) -> bool:
    """The user set parameter `name` (command line, environment, default map or prompt)."""
    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


def _declared(f: Callable[..., Any], new: str, missing: str) -> tuple[list[click.Parameter], click.Option, str]:
    """The parameters declared below a deprecation decorator, the option spelled `new` among
    them, and its name; TypeError(`missing`) when there is none."""
    declared: list[click.Parameter] = getattr(f, "__click_params__", [])
    target = next((p for p in declared if isinstance(p, click.Option) and new in p.opts), None)
    if target is None or target.name is None:
        raise TypeError(missing)
    return declared, target, target.name


def _routed(
    f: Callable[..., Any],
    target: click.Option,
    new_name: str,
    alias_name: str,
    *,
    used: Callable[[click.Context, Any], bool],
    clash: str,
    deprecated: tuple[str, str],
) -> Callable[..., Any]:
    """`f`, taking an old spelling's value (parameter `alias_name`, when `used`) under `new_name`
    after the deprecation line; both spellings at once is `clash` (exit 2). A required `target`
    becomes optional to click and stays required here: either spelling satisfies it."""
    required, target.required = target.required, False
    if required:  # --help still says [required]: the new spelling is the one to use
        record = target.get_help_record

        def help_record(ctx: click.Context) -> tuple[str, str] | None:
            target.required = True
            try:
                return record(ctx)
            finally:
                target.required = False

        target.get_help_record = help_record  # type: ignore[method-assign]

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        value = kwargs.pop(alias_name)
        if used(ctx, value):
            if _given(ctx, new_name):
                raise click.UsageError(clash)
            warn_deprecated(*deprecated)
            kwargs[new_name] = value
        elif required and not _given(ctx, new_name):
            raise click.MissingParameter(ctx=ctx, param=target)
        return f(*args, **kwargs)

    return command


def renamed_option(old: str, new: str) -> Callable[[F], F]:
    """Keep the old flag `old` as a hidden alias of the command's option `new`.

    Write it directly above the new option's decorator (click applies decorators bottom-up, so the
    new option must already be declared). The alias parses like the new option and hands its value
    to the command under the new option's name, after printing `deprecation_line(old, new)` once;
    passing both spellings is a usage error (exit 2). A required new option stays required: either
    spelling satisfies it.

    Args:
        old: The old flag, e.g. `"--engine"`.
        new: One of the new option's flags, e.g. `"--load"`.

    Returns:
        A decorator for the click command function.

    Raises:
        TypeError: at import time, when no option spelled `new` is declared below the decorator, or
            it is an on/off switch (`--x/--no-x`).
    """

    def decorate(f: F) -> F:
        declared, target, new_name = _declared(f, new, f"renamed_option: declare {new} below the alias of {old}")
        alias_name = "deprecated_" + old.lstrip("-").replace("-", "_")
        alias = _hidden_alias(old, target, alias_name)
        command = _routed(
            f,
            target,
            new_name,
            alias_name,
            used=lambda ctx, _value: _given(ctx, alias_name),
            clash=f"{old} is the old name of {new}: pass {new} only",
            deprecated=(old, new),
        )
        command.__click_params__ = [*declared, alias]  # type: ignore[attr-defined]
        return cast(F, command)

    return decorate


class _HiddenArgument(click.Argument):
    """A positional kept for an old command form: parsed, but never shown in the usage line."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return []


def positional_to_option(new: str, *, old_form: str, new_form: str) -> Callable[[F], F]:
    """Keep accepting, as a hidden optional last positional, what the command's option `new` now takes.

    Write it directly above the new option's decorator, as `renamed_option`. A value given in the old
    position reaches the command under the new option's name, after printing
    `deprecation_line(old_form, new_form)` once; giving both is a usage error (exit 2). A required new
    option stays required: either form satisfies it.

    Args:
        new: The new option's flag, e.g. `"--out"`.
        old_form: The old command form, e.g. `"upgrade CHECKPOINT OUTPUT"`.
        new_form: The form that replaces it, e.g. `"upgrade CHECKPOINT --out OUTPUT"`.

    Returns:
        A decorator for the click command function.

    Raises:
        TypeError: at import time, when no option spelled `new` is declared below the decorator.
    """

    def decorate(f: F) -> F:
        declared, target, new_name = _declared(f, new, f"positional_to_option: declare {new} below it")
        alias_name = "deprecated_positional_" + new_name
        alias = _HiddenArgument([alias_name], type=target.type, required=False)
        command = _routed(
            f,
            target,
            new_name,
            alias_name,
            used=lambda _ctx, value: value is not None,
            clash=f"{new_form} and {old_form} at once: pass {new} only",
            deprecated=(old_form, new_form),
        )
        # click builds its parameters from this list reversed: first here is the last positional.
        command.__click_params__ = [alias, *declared]  # type: ignore[attr-defined]
        return cast(F, command)

    return decorate
