"""`eagle-convert diff A B`: what differs between two checkpoints (how a user checks an upgrade)."""

from __future__ import annotations

import click


@click.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option("--headers-only", is_flag=True, help="Compare names, dtypes and shapes only; read no tensor data.")
@click.option("--exit-code", is_flag=True, help="Exit with 1 when the checkpoints differ (like git diff --exit-code).")
@click.pass_context
def diff_cmd(ctx: click.Context, a: str, b: str, as_json: bool, headers_only: bool, exit_code: bool) -> None:
    """Compare checkpoints A and B: tensors added, removed, renamed and changed (with the max abs
    difference), and the config.json diff. A and B are folders, weight files or hub repos.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.diff import diff_checkpoints

    result = diff_checkpoints(a, b, compare_data=not headers_only)
    if as_json:
        echo_json(result.to_dict())
    else:
        from eagle_convert.cli.render.diff import render_diff

        render_diff(console(), result)
    if exit_code and not result.same:
        ctx.exit(1)


def register(group: click.Group) -> None:
    group.add_command(diff_cmd)
