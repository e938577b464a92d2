"""`eagle-convert check DRAFT --target T [--baseline DRAFT0]`: the pre-deployment gate.

Exit status: 0 every check passed, 1 a check failed, 2 usage or environment.
"""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.check import CheckOptions
from eagle_convert.cli.options import dataclass_options


@click.command("check")
@click.argument("draft")
@dataclass_options(CheckOptions, "opts")
@click.pass_context
def check_cmd(ctx: click.Context, draft: str, opts: CheckOptions) -> None:
    """Gate DRAFT (folder or hub repo) before deployment: static validation, EAGLE-3.1 features, the
    strict load in vLLM, acceptance floors, output identity and sampling sanity, and the draft as
    deployed on a running server (--server), as the policy (eagle-check.toml) asks. Stages run
    cheapest first and stop at the first failure.
    """
    from eagle_convert.check import run_check, to_junit, write_summary
    from eagle_convert.cli.interrupt import on_interrupt
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.io import write_text_atomic

    shared = ctx.find_root().obj or {}  # in-process callers (tests) may share engine runs and the vLLM worker
    with ProgressDisplay(json_mode=opts.as_json) as display:
        report = run_check(
            draft,
            opts,
            progress=display.say,
            cache=shared.get("check_cache"),
            session=shared.get("check_session"),
            on_tick=display.tick,
        )
    junit, summary = (None if p is None else Path(p) for p in (opts.junit, opts.summary))
    for path in (junit, summary):  # CI paths such as reports/check.xml: create the folder
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []  # what an interrupt from here on says was written (each file atomically)
    on_interrupt(lambda: f"; wrote only {', '.join(map(str, written))}" if written else "; nothing was written")
    if junit is not None:
        write_text_atomic(junit, to_junit(report), fsync=False)
        written.append(junit)
    written += write_summary(report, summary)
    if opts.as_json:
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
