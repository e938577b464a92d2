"""Option objects whose fields carry their command-line facts: one typed home per option set.

A frozen dataclass declares each option once, with `option(default, help=..., min=..., ...)`: the
CLI builds its click options from those fields (`cli/options.py::dataclass_options`), and
`to_argv` writes the flags that reproduce an object (report's `commands.sh`), and `check` refuses
an object built outside its bounds (each class's `__post_init__` calls it), so the help, the
bounds and the spelling of a flag cannot drift between the commands that share it, and no library
entry re-checks them. No click here:
the metadata is plain data that the CLI layer reads (vLLM's `SpeculativeConfig` and mergekit's
`MergeOptions` keep their options the same way).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass
from typing import Any

from eagle_convert.errors import UsageError

KEY = "eagle_convert.option"  # the dataclass field metadata key
NEST_KEY = "eagle_convert.nested"  # a field holding another option object (composition)


@dataclass(frozen=True)
class OptionSpec:
    """The command-line facts of one field: its flag, help text, bounds and how its text reads."""

    help: str
    flag: str | None = None  # "--name"; None: the field name with dashes
    short: str | None = None  # "-k"
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    multiple: bool = False  # repeatable: the field is a tuple of the items
    metavar: str | None = None
    path: bool | str = False  # a file (the CLI checks it is not a folder); "out": one written (and writable)
    parse: Callable[[str], Any] | None = None  # the flag's text -> the field's value
    format: Callable[[Any], str] | None = None  # the field's value -> the flag's text (to_argv)
    show_default: bool | str = True  # a text: what --help shows where None means a rule (k: the config's, else 3)
    envvar: str | None = None  # read from this environment variable when the flag is absent

    def flag_for(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")


def option(
    default: Any = MISSING,
    *,
    help: str,
    flag: str | None = None,
    short: str | None = None,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[str, ...] | None = None,
    multiple: bool = False,
    metavar: str | None = None,
    path: bool | str = False,
    parse: Callable[[str], Any] | None = None,
    format: Callable[[Any], str] | None = None,
    show_default: bool | str = True,
    envvar: str | None = None,
) -> Any:
    """A dataclass field that is also a command-line option.

    Args:
        default: the field's default (a `multiple` field defaults to `()`).
        help: the `--help` text.
        flag: the long flag (default: `--` and the field name with dashes).
        short: a one-letter alias such as `-k`.
        min: the smallest value a number may take (inclusive).
        max: the largest value a number may take (inclusive).
        choices: the only values a text may take.
        multiple: the flag repeats; the field is a tuple.
        metavar: the value's name in `--help`.
        path: the value is a file path; "out": a file the command writes.
        parse: reads the flag's text into the field's value (raise `UsageError` on bad text).
        format: writes the field's value as the flag's text (the inverse of `parse`).
        show_default: `--help` shows the default (a text: shows that).
        envvar: the environment variable read when the flag is absent (`--help` names it).

    Returns:
        A `dataclasses.field` carrying an `OptionSpec` in its metadata.
    """
    if multiple and default is MISSING:
        default = ()
    spec = OptionSpec(
        help, flag, short, min, max, choices, multiple, metavar, path, parse, format, show_default, envvar
    )
    return dataclasses.field(default=default, metadata={KEY: spec})


@dataclass(frozen=True)
class Nested:
    """A field holding another option object whose options the command offers as its own (report
    offers smoke's, finetune's and drift's): which of them, under which flags, with which defaults."""

    cls: type
    only: tuple[str, ...] | None = None  # the fields offered (None: all)
    flags: dict[str, str] = dataclasses.field(default_factory=dict)  # field -> this command's flag
    prefix: str = ""  # this command's help starts with it ("Fine-tune: ")
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)  # this command's defaults

    def default(self) -> Any:
        return self.cls(**self.defaults)

    def fields(self) -> Iterator[tuple[dataclasses.Field[Any], Any]]:
        """The offered fields, their specs as this command spells them (a nested object's: its `Nested`)."""
        for f, spec in offers(self.cls):
            if isinstance(spec, Nested):
                if self.only is None or f.name in self.only:
                    yield f, spec
            elif self.only is None or f.name in self.only:
                help = spec.help[0].lower() + spec.help[1:] if self.prefix else spec.help
                yield f, dataclasses.replace(spec, flag=self.flags.get(f.name, spec.flag), help=self.prefix + help)


def nested(
    cls: type,
    *,
    only: tuple[str, ...] | None = None,
    flags: dict[str, str] | None = None,
    prefix: str = "",
    defaults: dict[str, Any] | None = None,
) -> Any:
    """A dataclass field holding a `cls` object whose option fields (`only`) are this object's options too."""
    spec = Nested(cls, only, dict(flags or {}), prefix, dict(defaults or {}))
    return dataclasses.field(default_factory=spec.default, metadata={NEST_KEY: spec})


def offers(cls: type) -> Iterator[tuple[dataclasses.Field[Any], OptionSpec | Nested]]:
    """Every option field and nested option object of `cls`, in declaration order."""
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(KEY) or f.metadata.get(NEST_KEY)
        if spec is not None:
            yield f, spec


def cli_fields(cls: type) -> Iterator[tuple[dataclasses.Field[Any], OptionSpec]]:
    """The fields of an option dataclass that are options, in declaration order."""
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(KEY)
        if spec is not None:
            yield f, spec


def option_kind(cls: type, name: str) -> type:
    """The scalar type of a field (bool, int, float or str): `int | None` and `tuple[int, ...]` are int."""
    hint = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(hint) is tuple or (args and typing.get_origin(args[0]) is tuple):
        inner = typing.get_args(args[0]) if typing.get_origin(hint) is not tuple else tuple(args)
        args = [a for a in inner if a is not Ellipsis]
    kind = args[0] if args else hint
    return kind if kind in (bool, int, float, str) else str


def _problem(value: Any, spec: OptionSpec) -> str | None:
    """What is wrong with one value of a field (None: nothing); `{name}` stands for the field."""
    if spec.choices is not None and value not in spec.choices:
        return f"{{name={value!r}}}: expected one of {', '.join(spec.choices)}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if spec.min is not None and value < spec.min:
        return f"{{name}} must be at least {spec.min:g}"
    if spec.max is not None and value > spec.max:
        return f"{{name}} must be at most {spec.max:g}"
    return None


def check(opts: Any) -> None:
    """Refuse an option object whose fields break their declared bounds or choices (None is unset).

    Called from each option class's `__post_init__`, so a Python caller is refused when it builds
    the object, as the CLI's click types refuse the flag: no library entry re-checks a bound.

    Raises:
        UsageError: naming the field (`{name}`: a keyword in Python, the flag on the command line).
    """
    for f, spec in cli_fields(type(opts)):
        value = getattr(opts, f.name)
        for item in value if spec.multiple else (value,):
            problem = None if item is None else _problem(item, spec)
            if problem is not None:
                raise UsageError(problem.replace("{name", "{" + f.name), options=(f.name,))


def _text(value: Any, spec: OptionSpec) -> str:
    if spec.format is not None:
        return spec.format(value)
    return repr(value) if isinstance(value, float) else str(value)


def to_argv(opts: Any, *, exclude: tuple[str, ...] = (), _nest: Nested | None = None) -> list[str]:
    """The flags that give `opts` from the class defaults: only the fields that differ, in field order
    (a `nested` object's where it is declared).

    Args:
        opts: an instance of an option dataclass.
        exclude: fields left out (the command spells them its own way).
        _nest: `opts` is held by a `nested` field: its offered fields, flags and defaults.

    Returns:
        The argument list (unquoted), e.g. `["--limit", "2", "--category", "chat"]`.

    Raises:
        ValueError: a field is None where its default is not (no flag says "unset").
    """
    out: list[str] = []
    cls = type(opts)
    base = None if _nest is None else _nest.default()
    for f, spec in offers(cls) if _nest is None else _nest.fields():
        if isinstance(spec, Nested):
            out += [] if f.name in exclude else to_argv(getattr(opts, f.name), _nest=spec)
            continue
        value, default = getattr(opts, f.name), f.default if base is None else getattr(base, f.name)
        if value == default or f.name in exclude:
            continue
        flag = spec.flag_for(f.name)
        if option_kind(cls, f.name) is bool and spec.parse is None:
            out.append(flag if value else "--no-" + flag[2:])
        elif value is None:
            raise ValueError(f"{cls.__name__}.{f.name}: None cannot be written as {flag}")
        elif spec.multiple:
            for item in value:
                out += [flag, _text(item, spec)]
        else:
            out += [flag, _text(value, spec)]
    return out
