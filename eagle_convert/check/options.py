"""`CheckOptions`: what `check` is asked for besides the draft, declared once (`optionspec`).

The `check` command's click options are made from these fields and `run_check` takes the object.
The options check shares with `validate` (`--vllm-version`, `--for`, `--serve-config`,
`--speculative-config`) are validate's declarations (`validate.options`), so their help and
spelling are the same in both commands; check names one release and one engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_convert.optionspec import check, option
from eagle_convert.validate import (
    serve_config_option,
    serve_for_option,
    speculative_config_option,
    vllm_version_option,
)


@dataclass(frozen=True)
class CheckOptions:
    """The target and baseline, the policy file, the release and engine, the serving context and
    config, the running servers, and the CI outputs."""

    target: str | None = option(
        None, metavar="PATH_OR_REPO", help="The target model (folder or hub repo org/name[@rev])."
    )
    baseline: str | None = option(
        None,
        metavar="DRAFT0",
        help="The draft in production: measured on the same prompts in the same engine build; the gate fails "
        "when the AL drop exceeds the policy's allowance.",
    )
    policy: str | None = option(
        None,
        metavar="FILE",
        path=True,
        help="Policy file (default: ./eagle-check.toml, else the defaults: static validation, plus the "
        "engine load when vLLM is installed).",
    )
    vllm_version: str | None = vllm_version_option(allow_all=False)
    serve_for: str | None = serve_for_option(repeatable=False)
    serve_config: str | None = serve_config_option()
    speculative_config: str | dict[str, Any] | None = speculative_config_option()
    max_model_len: int | None = option(
        None,
        min=1,
        metavar="N",
        help="The context the target is served with (vllm serve --max-model-len): the static context check uses "
        "it (over the policy's [static] max_model_len) and the engines run with it.",
    )
    server: str | None = option(
        None,
        metavar="URL",
        help="Also measure the draft as deployed on this running vLLM server (the serve stage: AL, per-position "
        "and per-user speedup per level against the policy's [serve] floors; docs/serve.md). Over [serve] server.",
    )
    baseline_server: str | None = option(
        None,
        metavar="URL",
        help="The same target served without speculation, for the serve stage's speedups. Over [serve] "
        "baseline_server.",
    )
    api_key: str | None = option(None, help="Bearer key for the servers (default: the [serve] api_key_env variable).")
    keep_going: bool = option(False, help="Run every stage even after one fails.")
    as_json: bool = option(False, flag="--json", help="Print the report as JSON.")
    junit: str | None = option(
        None,
        metavar="FILE",
        path="out",
        help="Also write JUnit XML: one testcase per check, with its figure and threshold.",
    )
    summary: str | None = option(
        None,
        metavar="FILE",
        path="out",
        help="Also write a Markdown summary (appended to $GITHUB_STEP_SUMMARY when that is set).",
    )

    def __post_init__(self) -> None:
        check(self)
