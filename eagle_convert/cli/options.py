"""Click options made from option objects (`optionspec`), and the few options several commands share.

`dataclass_options` turns the fields of each command's option object into click options (a `nested`
object's where it is declared: report composes `MeasureOptions`, `FinetuneOptions` and `DriftOptions`;
check composes validate's fields), so a flag's name, bounds and help live on the field and cannot drift
between the commands that share it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import click

from eagle_convert.errors import EagleConvertError
from eagle_convert.optionspec import Nested, OptionSpec, cli_fields, offers, option_kind

F = TypeVar("F", bound=Callable[..., Any])


class _Parsed(click.ParamType):
    """A field with its own reader (`OptionSpec.parse`): a ValueError is click's "Invalid value",
    an EagleConvertError (a UsageError naming the flag) reaches the group's one-line error."""

    def __init__(self, parse: Callable[[str], Any], name: str) -> None:
        self.parse, self.name = parse, name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default, already the field's value
        try:
            return self.parse(value)
        except EagleConvertError:
            raise
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class _ShownDefault(click.Option):
    """An option whose default is None (a rule decides) but whose --help names what the rule gives."""

    def __init__(self, *args: Any, shown: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shown = shown

    def get_help_extra(self, ctx: click.Context) -> Any:
        return {**super().get_help_extra(ctx), "default": self.shown}


def _param_type(cls: type, f: dataclasses.Field[Any], spec: OptionSpec) -> Any:
    kind = option_kind(cls, f.name)
    if spec.parse is not None:
        return _Parsed(spec.parse, (spec.metavar or "text").lower())
    if spec.choices is not None:
        return click.Choice(spec.choices)
    if spec.path:
        return click.Path(dir_okay=False, writable=spec.path == "out")
    if kind is int:
        lo, hi = (None if b is None else int(b) for b in (spec.min, spec.max))
        return click.IntRange(min=lo, max=hi) if (lo, hi) != (None, None) else int
    if kind is float:
        return click.FloatRange(min=spec.min, max=spec.max) if (spec.min, spec.max) != (None, None) else float
    return str


def param_name(into: str, field: str) -> str:
    """The click parameter of `field` of the object passed as `into` (unique across objects)."""
    return f"{into}__{field}"


def field_option(
    cls: type, f: dataclasses.Field[Any], spec: OptionSpec, name: str, default: Any, help_extra: str = ""
) -> Callable[[F], F]:
    """The click option of one option field (`default` may differ from the field's: report's buckets)."""
    flag = spec.flag_for(f.name)
    if "{extra}" in spec.help:  # the command's sentence goes where the field's help says
        helptext = spec.help.replace("{extra}", help_extra).replace("  ", " ").strip()
    else:
        helptext = f"{spec.help} {help_extra}".strip()
    if option_kind(cls, f.name) is bool and spec.parse is None:
        if default in (False, None):  # None: not given (push --private leaves the repo's visibility)
            return click.option(flag, name, is_flag=True, default=default, help=helptext)
        return click.option(f"{flag}/--no-{flag[2:]}", name, default=default, show_default=True, help=helptext)
    decls = [flag, spec.short] if spec.short else [flag]
    extra: dict[str, Any] = {"envvar": spec.envvar, "show_envvar": True} if spec.envvar else {}
    if default is dataclasses.MISSING:  # a field without a default: the option is required
        extra, default = extra | {"required": True}, None
    if isinstance(spec.show_default, str) and default is None:
        extra |= {"cls": _ShownDefault, "shown": spec.show_default}
    show = spec.show_default is True and default not in (None, ())
    if show and spec.format is not None:
        default = spec.format(default)  # click shows and parses the flag's text (`parse` reads it back)
    if not extra.get("required"):  # click 8.3 takes an explicit default=None as a value: no "Missing option"
        extra["default"] = default
    return click.option(
        *decls,
        name,
        type=_param_type(cls, f, spec),
        multiple=spec.multiple,
        metavar=spec.metavar,
        show_default=show,
        help=helptext,
        **extra,
    )


def _offered(
    cls: type, into: str, fields: Any, defaults: dict[str, Any], extra: dict[str, str], path: str = ""
) -> Iterator[tuple[type, dataclasses.Field[Any], OptionSpec, str, Any, str]]:
    """(class, field, spec, click name, default, help extra) of each option offered, nested objects' in place."""
    for f, spec in fields:
        if isinstance(spec, Nested):
            yield from _offered(
                spec.cls, param_name(into, f.name), spec.fields(), spec.defaults, extra, f"{path}{f.name}."
            )
        else:
            yield cls, f, spec, param_name(into, f.name), defaults.get(f.name, f.default), extra.get(path + f.name, "")


def dataclass_options(
    cls: type,
    into: str,
    *,
    only: Sequence[str] | None = None,
    defaults: dict[str, Any] | None = None,
    help_extra: dict[str, str] | None = None,
) -> Callable[[F], F]:
    """One click option per option field of `cls` (`optionspec.option`), in field order, a `nested`
    object's options where it is declared; the command receives them as one object, the keyword
    argument `into` (mergekit's `add_merge_options` idea).

    Args:
        cls: the option dataclass.
        into: the command's parameter that receives the object.
        only: the fields to offer (default all); the others keep their defaults.
        defaults: this command's defaults where they differ from the class's.
        help_extra: a sentence added to a field's help in this command (a nested one's: "measure.concurrency").

    Returns:
        The decorator.
    """
    chosen = [(f, s) for f, s in offers(cls) if only is None or f.name in only]
    offered = list(_offered(cls, into, chosen, defaults or {}, help_extra or {}))

    def decorator(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = options_from_params(cls, into, kwargs, pop=True)
            return func(*args, **kwargs)

        out: Any = wrapper
        for owner, f, spec, name, default, extra in reversed(offered):  # click stacks decorators bottom-up
            out = field_option(owner, f, spec, name, default, extra)(out)
        return cast(F, out)

    return decorator


def options_from_params(
    cls: type, into: str, params: dict[str, Any], *, pop: bool = False, _defaults: dict[str, Any] | None = None
) -> Any:
    """The object of `cls` from a command's parsed parameters (`ctx.params`): the fields it offers
    from their options (a repeated option as a tuple), nested objects likewise, the others at the
    class's defaults."""
    values: dict[str, Any] = dict(_defaults or {})
    for f, spec in cli_fields(cls):
        key = param_name(into, f.name)
        if key in params:
            value = params.pop(key) if pop else params[key]
            values[f.name] = tuple(value) if spec.multiple else value
    for f, sub in offers(cls):
        if isinstance(sub, Nested):
            values[f.name] = options_from_params(
                sub.cls, param_name(into, f.name), params, pop=pop, _defaults=sub.defaults
            )
    return cls(**values)


def vllm_version_option() -> Callable[[F], F]:
    """`--vllm-version X.Y.Z` (inspect): check's field (one release, never 'all'), received as `vllm_version`."""
    from eagle_convert.check import CheckOptions

    [(f, spec)] = [(f, s) for f, s in cli_fields(CheckOptions) if f.name == "vllm_version"]
    return field_option(CheckOptions, f, spec, "vllm_version", None)
