"""Click options made from option objects (`optionspec`), and the few options several commands share.

`dataclass_options` turns the fields of `MeasureOptions`, `FinetuneOptions`, `UpgradeOptions` and
`ReportOptions` into click options, so a flag's name, bounds and help live on the field and cannot
drift between `smoke`, `report`, `finetune` and `upgrade` (report runs all three).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from eagle_convert.errors import EagleConvertError
from eagle_convert.optionspec import OptionSpec, cli_fields, option_kind

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


def _param_type(cls: type, f: dataclasses.Field[Any], spec: OptionSpec) -> Any:
    kind = option_kind(cls, f.name)
    if spec.parse is not None:
        return _Parsed(spec.parse, (spec.metavar or "text").lower())
    if spec.choices is not None:
        return click.Choice(spec.choices)
    if spec.path:
        return click.Path(dir_okay=False)
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
    helptext = f"{spec.help} {help_extra}".strip()
    if option_kind(cls, f.name) is bool and spec.parse is None:
        if default is False:
            return click.option(flag, name, is_flag=True, help=helptext)
        return click.option(f"{flag}/--no-{flag[2:]}", name, default=default, show_default=True, help=helptext)
    decls = [flag, spec.short] if spec.short else [flag]
    show: Any = spec.show_default and default not in (None, ())
    if show and spec.format is not None:
        show = spec.format(default)
    return click.option(
        *decls,
        name,
        type=_param_type(cls, f, spec),
        default=default,
        multiple=spec.multiple,
        metavar=spec.metavar,
        show_default=show,
        help=helptext,
    )


def dataclass_options(
    cls: type,
    into: str,
    *,
    only: Sequence[str] | None = None,
    defaults: dict[str, Any] | None = None,
    help_extra: dict[str, str] | None = None,
) -> Callable[[F], F]:
    """One click option per option field of `cls` (`optionspec.option`), in field order; the command
    receives them as one object, the keyword argument `into` (mergekit's `add_merge_options` idea).

    Args:
        cls: the option dataclass.
        into: the command's parameter that receives the object.
        only: the fields to offer (default all); the others keep their defaults.
        defaults: this command's defaults where they differ from the class's.
        help_extra: a sentence added to a field's help in this command.

    Returns:
        The decorator.
    """
    chosen = [(f, s) for f, s in cli_fields(cls) if only is None or f.name in only]
    own = defaults or {}

    def decorator(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = options_from_params(cls, into, kwargs, pop=True)
            return func(*args, **kwargs)

        out: Any = wrapper
        for f, spec in reversed(chosen):  # click stacks decorators bottom-up
            default = own.get(f.name, f.default)
            out = field_option(cls, f, spec, param_name(into, f.name), default, (help_extra or {}).get(f.name, ""))(out)
        return cast(F, out)

    return decorator


def options_from_params(cls: type, into: str, params: dict[str, Any], *, pop: bool = False) -> Any:
    """The object of `cls` from a command's parsed parameters (`ctx.params`): the fields it offers
    from their options (a repeated option as a tuple), the others at the class's defaults."""
    values: dict[str, Any] = {}
    for f, spec in cli_fields(cls):
        key = param_name(into, f.name)
        if key in params:
            value = params.pop(key) if pop else params[key]
            values[f.name] = tuple(value) if spec.multiple else value
    return cls(**values)


ENGINE_CHOICES = ("auto", "reference", "vllm")


def measure_options(*, buckets: str, concurrency_default: str) -> Callable[[F], F]:
    """`--engine` through `--concurrency`, in that `--help` order. The two commands differ only in
    defaults: `buckets` is the command's `--buckets` default, and `concurrency_default` is the help
    sentence saying what an unset `--concurrency` measures (report picks levels itself on vLLM)."""
    from eagle_convert.measure import PROMPTS_HELP  # here: the suites' names, loaded with the command

    options = [
        click.option(
            "--engine",
            type=click.Choice(ENGINE_CHOICES),
            default="auto",
            show_default=True,
            help="Engine for every measurement: auto = vllm when it is importable and a GPU is present, "
            "else reference (torch).",
        ),
        click.option(
            "--prompts",
            "prompts_file",
            metavar="NAME|FILE|DIR",
            default=None,
            help=PROMPTS_HELP,
        ),
        click.option("--category", "categories", multiple=True, help="Only prompts of this category (repeatable)."),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N prompts per category."),
        click.option(
            "--num-speculative-tokens",
            "-k",
            "k",
            type=click.IntRange(min=1),
            default=3,
            show_default=True,
            help="Draft tokens per round (k); AL is at most k + 1.",
        ),
        click.option(
            "--max-new-tokens",
            type=click.IntRange(min=1),
            default=64,
            show_default=True,
            help="Tokens generated per prompt (EOS ignored).",
        ),
        click.option(
            "--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True, help="0 is greedy."
        ),
        click.option(
            "--seed", type=int, default=0, show_default=True, help="Seed for sampling (and for report's fine-tune)."
        ),
        click.option(
            "--buckets",
            default=buckets,
            show_default=True,
            help="Context lengths to measure, e.g. natural,256,1024: prompts are padded with neutral filler "
            "text to about N tokens; prompts already longer are skipped for that bucket. Long-context "
            "suites' prompts are measured once, in the bucket of their own length.",
        ),
        click.option(
            "--chat-template",
            default=None,
            help="Jinja template (file or literal) replacing the target's; 'none' sends raw text "
            "(report: also for the fine-tune's data).",
        ),
        click.option(
            "--tensor-parallel-size",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="vLLM tensor parallelism.",
        ),
        click.option(
            "--concurrency",
            default=None,
            metavar="LEVELS",
            help="With --engine vllm: also measure per-user decode tokens/s at these concurrencies (e.g. "
            "1,4,16) with each draft and with the target alone (no speculation), and show the speedups "
            f"beside AL. {concurrency_default} On a CPU the speedups do not predict a GPU's (see "
            "docs/smoke.md).",
        ),
    ]

    def apply(f: F) -> F:
        for option in reversed(options):  # click stacks decorators bottom-up
            f = option(f)
        return f

    return apply


def cache_options(*, cache_help: str, capture_help: str) -> Callable[[F], F]:
    """`--cache CACHE` and `--capture ENGINE` (finetune, upgrade): train or calibrate from a capture cache."""
    from eagle_convert.cache import CAPTURE_ENGINES

    cache = click.option(
        "--cache", "cache", type=click.Path(path_type=Path), default=None, metavar="CACHE", help=cache_help
    )
    capture = click.option(
        "--capture", "capture_engine", type=click.Choice(CAPTURE_ENGINES), default=None, help=capture_help
    )
    return lambda f: cache(capture(f))


def vllm_version_option(*, allow_all: bool) -> Callable[[F], F]:
    """`--vllm-version X.Y.Z` (validate, check, inspect): the release the verdict is for."""
    from eagle_convert.vllm_model import NEWEST_RELEASE, OLDEST_RELEASE

    every = " 'all' prints one row per known release (the compatibility matrix)." if allow_all else ""

    def no_all(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value == "all" and not allow_all:
            raise click.BadParameter("'all' (the compatibility matrix) is validate's: name one release here")
        return value

    return click.option(
        "--vllm-version",
        "vllm_version",
        callback=no_all,
        metavar="X.Y.Z" + ("|all" if allow_all else ""),
        default=None,
        help=f"The vLLM release the draft will be served on ({OLDEST_RELEASE} ... {NEWEST_RELEASE}; default: the "
        f"installed vLLM, else the newest known).{every}",
    )


def speculative_config_option() -> Callable[[F], F]:
    """`--speculative-config JSON|FILE` (validate, check, smoke): the deployment's serve config."""
    return click.option(
        "--speculative-config",
        "speculative_config",
        metavar="JSON|FILE",
        default=None,
        help="The speculative config you serve with, exactly as `vllm serve --speculative-config` takes it "
        '(e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\'), or a JSON file holding it: checked '
        "against the draft and the vLLM release; engine runs use exactly these settings (the draft's path "
        'replaces "model").',
    )
