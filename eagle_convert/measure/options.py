"""`MeasureOptions`: the measurement settings smoke and report share, declared once with help and bounds,
and `Measure`, what they resolve to once.

`smoke`'s and `report`'s click options are made from these fields (`optionspec`) and report's
`commands.sh` writes its `smoke` lines from them (`optionspec.to_argv`), so a flag cannot mean one
thing in smoke and another in report. `MeasureOptions.resolve` decides the engine, k, the serve
config, the concurrency levels and the prompt suite in one place; the engines take the `Measure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eagle_convert.errors import UsageError
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.measure.prompts import NATURAL, parse_buckets
from eagle_convert.measure.results import smoke_settings
from eagle_convert.measure.suites import PROMPTS_HELP, Suite, resolve_suite, select_suite
from eagle_convert.measure.throughput import DEFAULT_CONCURRENCY, parse_concurrency
from eagle_convert.optionspec import check, option
from eagle_convert.validate import speculative_config_option

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release, ServeConfig

DEFAULT_K = 3
ENGINES = ("reference", "vllm")
ENGINE_CHOICES = ("auto", *ENGINES)
# Keys the reference engine follows (it always drafts as method eagle3, at num_speculative_tokens).
REFERENCE_KEYS = ("method", "model", "num_speculative_tokens")
# What every measuring run imports (the tokenizer, and torch for either engine); --plot adds matplotlib.


def default_engine() -> str:
    """vllm when it is importable and a GPU is present, else the reference engine."""
    from eagle_convert.vllm_model import vllm_available

    if not vllm_available():
        return "reference"
    import torch

    return "vllm" if torch.cuda.is_available() else "reference"


def _buckets(text: str) -> tuple[int, ...]:
    return tuple(parse_buckets(text))


def format_buckets(buckets: tuple[int, ...]) -> str:
    """`(0, 1024)` -> `"natural,1024"` (the inverse of `parse_buckets`)."""
    return ",".join("natural" if b == NATURAL else str(b) for b in buckets)


def parse_levels(text: str) -> tuple[int, ...]:
    """`"1,4,16"` -> `(1, 4, 16)`; `"none"` -> `()` (report: no per-user tokens/s)."""
    return () if text.strip().lower() == "none" else tuple(parse_concurrency(text))


def format_levels(levels: tuple[int, ...]) -> str:
    """`(1, 4, 16)` -> `"1,4,16"`; `()` -> `"none"`."""
    return ",".join(map(str, levels)) or "none"


@dataclass(frozen=True)
class MeasureOptions:
    """How drafts are measured, as asked: the engine, the prompts, the decoding and the context buckets.

    `engine` "auto" (or None) is `default_engine()`; `k` None takes the speculative config's
    num_speculative_tokens, else 3; `concurrency` None (report's default) is 1,4,16 on vLLM, else
    none. `resolve` decides them.
    """

    engine: str | None = option(
        "auto",
        choices=ENGINE_CHOICES,
        help="Engine for every measurement: auto = vllm when it is importable and a GPU is present, "
        "else reference (torch).",
    )
    prompts: str | None = option(None, metavar="NAME|FILE|DIR", help=PROMPTS_HELP)
    categories: tuple[str, ...] = option(
        flag="--category", multiple=True, help="Only prompts of this category (repeatable)."
    )
    limit: int | None = option(None, min=1, help="At most N prompts per category.")
    k: int | None = option(
        None,
        flag="--num-speculative-tokens",
        short="-k",
        min=1,
        show_default=str(DEFAULT_K),  # None: the speculative config's num_speculative_tokens, else 3
        help="Draft tokens per round (k); AL is at most k + 1.",
    )
    max_new_tokens: int = option(64, min=1, help="Tokens generated per prompt (EOS ignored).")
    temperature: float = option(0.0, min=0, help="0 is greedy.")
    seed: int = option(0, help="Seed for sampling (and for report's fine-tune).")
    buckets: tuple[int, ...] = option(
        (NATURAL,),
        parse=_buckets,
        format=format_buckets,
        help="Context lengths to measure, e.g. natural,256,1024: prompts are padded with neutral filler "
        "text to about N tokens; prompts already longer are skipped for that bucket. Long-context "
        "suites' prompts are measured once, in the bucket of their own length.",
    )
    chat_template: str | None = option(
        None,
        help="Jinja template (file or literal) replacing the target's; 'none' sends raw text "
        "(report: also for the fine-tune's data).",
    )
    tensor_parallel_size: int = option(1, min=1, help="vLLM tensor parallelism.")
    concurrency: tuple[int, ...] | None = option(
        (),
        metavar="LEVELS",
        parse=parse_levels,
        format=format_levels,
        help="With --engine vllm: also measure per-user decode tokens/s at these concurrencies (e.g. "
        "1,4,16) with each draft and with the target alone (no speculation), and show the speedups "
        "beside AL. {extra} On a CPU the speedups do not predict a GPU's (see docs/smoke.md).",
    )
    speculative_config: str | dict[str, Any] | None = speculative_config_option()  # validate's and check's

    def __post_init__(self) -> None:
        check(self)

    def resolve(
        self, command: str, release: Release, *, k_sweep: bool = False, categories: str = "--category"
    ) -> Measure:
        """Decide, once, what every engine runs with.

        Args:
            command: the command named when an extra is missing ("smoke", "report").
            release: the release whose rules read the speculative config (the one the command's entry
                resolved: the installed vLLM's, which the engines run).
            k_sweep: smoke's k sweep: on vLLM it times its step costs at concurrency 1, so 1 joins the levels.
            categories: how the refusal of an unknown category names `categories` (check: its policy key).

        Returns:
            The frozen `Measure`.

        Raises:
            MissingExtraError: torch and the tokenizer (or, for vLLM, vLLM) are not installed.
            UsageError: an unknown engine, a bound out of range, `concurrency` without vLLM, a
                speculative config `release` refuses, whose k is not `k`, or (reference engine)
                with keys other than method and num_speculative_tokens; a bad prompt suite.
        """
        require("smoke", command, TORCH_MODULES)  # before default_engine(), which imports torch
        engine = default_engine() if self.engine in (None, "auto") else str(self.engine)
        serve, k = self._serve(engine, release)
        levels = self.concurrency
        if levels is None:
            levels = DEFAULT_CONCURRENCY if engine == "vllm" else ()
        for bad, message, names in (
            (engine not in ENGINES, f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})", ()),
            (k < 1, "{k} must be at least 1", ("k",)),
            (self.max_new_tokens < 1, "{max_new_tokens} must be at least 1", ("max_new_tokens",)),
            (self.temperature < 0, "{temperature} must be >= 0", ("temperature",)),
            (self.tensor_parallel_size < 1, "{tensor_parallel_size} must be at least 1", ("tensor_parallel_size",)),
            (
                bool(levels) and engine != "vllm",
                "{concurrency} measures per-user tokens/s with {engine=vllm} only",
                ("concurrency", "engine"),
            ),
        ):
            if bad:
                raise UsageError(message, options=names)
        if engine == "vllm":
            require("vllm", f"{command} --engine vllm")
        if k_sweep and engine == "vllm" and 1 not in levels:  # the step costs come from c = 1
            levels = tuple(sorted({1, *levels}))
        suite = select_suite(resolve_suite(self.prompts), self.categories, self.limit, option=categories)
        return Measure(
            engine,
            k,
            serve,
            suite,
            self.max_new_tokens,
            self.temperature,
            self.seed,
            self.buckets,
            self.chat_template,
            self.tensor_parallel_size,
            tuple(levels),
        )

    def _serve(self, engine: str, release: Release) -> tuple[ServeConfig | None, int]:
        """The parsed speculative config (None without one) and the k every engine drafts with."""
        if self.speculative_config is None:
            return None, DEFAULT_K if self.k is None else self.k
        from eagle_convert.vllm_model import parse_serve_config

        serve = parse_serve_config(self.speculative_config, release)
        assert serve is not None  # a value was given
        if self.k is not None and serve.k is not None and serve.k != self.k:
            raise UsageError(
                f"{{k={self.k}}} but {{speculative_config}} num_speculative_tokens is {serve.k}",
                hint="give k once",
                options=("k", "speculative_config"),
            )
        if engine == "reference":
            other = [key for key in serve.data if key not in REFERENCE_KEYS]
            if other or serve.method not in (None, "eagle3"):
                what = other[0] if other else f"method {serve.method!r}"
                raise UsageError(
                    "{speculative_config}: the reference engine drafts as method eagle3 at num_speculative_tokens "
                    f"only; {what} needs {{engine=vllm}}",
                    options=("speculative_config", "engine"),
                )
        return serve, serve.k if serve.k is not None else (DEFAULT_K if self.k is None else self.k)


@dataclass(frozen=True)
class Measure:
    """`MeasureOptions` decided (`MeasureOptions.resolve`): what every engine runs with, nothing left open.

    `serve` is the parsed speculative config (None without one); `concurrency` the per-user tokens/s
    levels (vLLM only); `tensor_parallel_size` as asked (vLLM's; report also hands it to a vLLM capture).
    """

    engine: str
    k: int
    serve: ServeConfig | None
    suite: Suite
    max_new_tokens: int
    temperature: float
    seed: int
    buckets: tuple[int, ...]
    chat_template: str | None
    tensor_parallel_size: int
    concurrency: tuple[int, ...]

    @property
    def served(self) -> dict[str, Any] | None:
        """The speculative config's keys as given, None without one."""
        return None if self.serve is None or not self.serve.given else dict(self.serve.data)

    def settings(self, chat_template: str | None) -> dict[str, Any]:
        """A `SmokeReport`'s `settings` block (`chat_template`: the label of the template the prompts used)."""
        return smoke_settings(
            k=self.k,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            seed=self.seed,
            buckets=self.buckets,
            chat_template=chat_template,
            tensor_parallel_size=self.tensor_parallel_size if self.engine == "vllm" else 1,
            speculative_config=self.served,
        )
