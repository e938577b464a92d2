"""`eagle-convert check DRAFT --target T [--baseline DRAFT0]`: the pre-deployment gate.

Exit status: 0 every check passed, 1 a check failed, 2 usage or environment.
"""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.options import (
    serve_config_option,
    serve_for_option,
    speculative_config_option,
    vllm_version_option,
)


@click.command("check")
@click.argument("draft")
@click.option("--target", metavar="PATH_OR_REPO", help="The target model (folder or hub repo org/name[@rev]).")
@click.option(
    "--baseline",
    metavar="DRAFT0",
    help="The draft in production: measured on the same prompts in the "
    "same engine build; the gate fails when the AL drop exceeds the policy's allowance.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Policy file (default: ./eagle-check.toml, else the defaults: static validation, plus the "
    "engine load when vLLM is installed).",
)
@vllm_version_option(allow_all=False)
@serve_for_option(repeatable=False)
@serve_config_option()
@speculative_config_option()
@click.option(
    "--max-model-len",
    type=click.IntRange(min=1),
    metavar="N",
    help="The context the target is served with (vllm serve --max-model-len): the static context check uses "
    "it (over the policy's [static] max_model_len) and the engines run with it.",
)
@click.option(
    "--server",
    metavar="URL",
    help="Also measure the draft as deployed on this running vLLM server (the serve stage: AL, per-position and "
    "per-user speedup per level against the policy's [serve] floors; docs/serve.md). Over [serve] server.",
)
@click.option(
    "--baseline-server",
    metavar="URL",
    help="The same target served without speculation, for the serve stage's speedups. Over [serve] baseline_server.",
)
@click.option("--api-key", default=None, help="Bearer key for the servers (default: the [serve] api_key_env variable).")
@click.option("--keep-going", is_flag=True, help="Run every stage even after one fails.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    metavar="FILE",
    help="Also write JUnit XML: one testcase per check, with its figure and threshold.",
)
@click.option(
    "--summary",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    metavar="FILE",
    help="Also write a Markdown summary (appended to $GITHUB_STEP_SUMMARY when that is set).",
)
@click.pass_context
def check_cmd(
    ctx: click.Context,
    draft: str,
    target: str | None,
    baseline: str | None,
    policy_file: Path | None,
    vllm_version: str | None,
    serve_for: str | None,
    serve_config: str | None,
    speculative_config: str | None,
    max_model_len: int | None,
    server: str | None,
    baseline_server: str | None,
    api_key: str | None,
    keep_going: bool,
    as_json: bool,
    junit: Path | None,
    summary: Path | None,
) -> None:
    """Gate DRAFT (folder or hub repo) before deployment: static validation, EAGLE-3.1 features, the
    strict load in vLLM, acceptance floors, output identity and sampling sanity, and the draft as
    deployed on a running server (--server), as the policy (eagle-check.toml) asks. Stages run
    cheapest first and stop at the first failure.
    """
    from eagle_convert.check import ServeTarget, load_policy, run_check, to_junit, write_summary
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.io import write_text_atomic

    policy = load_policy(policy_file)
    if baseline_server is not None and server is None and not policy.get("serve", "server"):
        raise click.UsageError("--baseline-server goes with --server (or [serve] server in the policy)")
    where = ServeTarget(server, baseline_server, api_key) if server or baseline_server or api_key else None
    shared = ctx.find_root().obj or {}  # in-process callers (tests) may share engine runs and the vLLM worker
    with ProgressDisplay(json_mode=as_json) as display:
        report = run_check(
            draft,
            target=target,
            baseline=baseline,
            policy=policy,
            keep_going=keep_going,
            progress=display.say,
            cache=shared.get("check_cache"),
            session=shared.get("check_session"),
            vllm_version=vllm_version,
            speculative_config=speculative_config,
            max_model_len=max_model_len,
            on_tick=display.tick,
            server=where,
            serve_for=serve_for,
            serve_config=serve_config,
        )
    for path in (junit, summary):  # CI paths such as reports/check.xml: create the folder
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []  # what an interrupt from here on says was written (each file atomically)
    on_interrupt(lambda: f"; wrote only {', '.join(map(str, written))}" if written else "; nothing was written")
    if junit is not None:
        write_text_atomic(junit, to_junit(report), fsync=False)
        written.append(junit)
    written += write_summary(report, summary)
    if as_json:
        from eagle_convert.cli.output import echo_json

        echo_json(report.to_dict())
    else:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.check import render_check

        render_check(console(), report)
    if not report.passed:
        ctx.exit(1)


def register(group: click.Group) -> None:
    group.add_command(check_cmd)
