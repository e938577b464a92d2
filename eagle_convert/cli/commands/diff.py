"""`eagle-convert diff A B`: what differs between two checkpoints (how a user checks an upgrade)."""

from __future__ import annotations

import click


@click.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option("--headers-only", is_flag=True, help="Compare names, dtypes and shapes only; read no tensor data.")
@click.option("--exit-code", is_flag=True, help="Exit with 1 when the checkpoints differ (like git diff --exit-code).")
@click.option(
    "--served",
    is_flag=True,
    help="Also say whether A and B compute the same function as vLLM serves them (configs read as vLLM "
    "reads them, missing norms as ones, the dtype the target's); with --exit-code, exit 1 when that differs.",
)
@click.pass_context
def diff_cmd(
    ctx: click.Context, a: str, b: str, as_json: bool, headers_only: bool, exit_code: bool, served: bool
) -> None:
    """Compare checkpoints A and B: tensors added, removed, renamed and changed (with the max abs
    difference), and the config.json diff. A and B are folders, weight files or hub repos.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.diff import diff_checkpoints
    from eagle_convert.errors import UsageError

    if served and headers_only:
        raise UsageError("--served compares tensor values: drop --headers-only", options=("served", "headers_only"))
    result = diff_checkpoints(a, b, compare_data=not headers_only)
    as_served = None
    if served:
        from eagle_convert.served_diff import served_diff

        as_served = served_diff(a, b)
    if as_json:
        echo_json(result.to_dict() | ({"served": as_served.to_dict()} if as_served else {}))
    else:
        from eagle_convert.cli.render.diff import render_diff, render_served

        render_diff(console(), result)
        if as_served is not None:
            render_served(console(), as_served)
    differs = not as_served.same if as_served is not None else not result.same
    if exit_code and differs:
        ctx.exit(1)


def register(group: click.Group) -> None:
    group.add_command(diff_cmd)
