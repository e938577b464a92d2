"""`eagle-convert diff A B`: what differs between two checkpoints (how a user checks an upgrade)."""

from __future__ import annotations

import click

from eagle_convert.cli.options import dataclass_options
from eagle_convert.diff import DiffOptions


@click.command("diff")
@click.argument("a")
@click.argument("b")
@dataclass_options(DiffOptions, "opts")
@click.pass_context
def diff_cmd(ctx: click.Context, a: str, b: str, opts: DiffOptions) -> None:
    """Compare checkpoints A and B: tensors added, removed, renamed and changed (with the max abs
    difference), and the config.json diff. A and B are folders, weight files or hub repos.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.diff import diff_checkpoints

    result = diff_checkpoints(a, b, opts)
    as_served = None
    if opts.served:
        from eagle_convert.served_diff import served_diff

        as_served = served_diff(a, b)
    if opts.as_json:
        echo_json(result.to_dict() | ({"served": as_served.to_dict()} if as_served else {}))
    else:
        from eagle_convert.cli.render.diff import render_diff, render_served

        render_diff(console(), result)
        if as_served is not None:
            render_served(console(), as_served)
    differs = not as_served.same if as_served is not None else not result.same
    if opts.exit_code and differs:
        ctx.exit(1)


def register(group: click.Group) -> None:
    group.add_command(diff_cmd)
