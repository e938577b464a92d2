"""`eagle-convert push DIR org/name`: upload a draft folder to the Hugging Face Hub (validated first)."""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.options import dataclass_options
from eagle_convert.push import PushOptions


@click.command("push")
@click.argument("folder", type=click.Path(path_type=Path))
@click.argument("repo_id", metavar="ORG/NAME")
@dataclass_options(PushOptions, "opts")
def push_cmd(folder: Path, repo_id: str, opts: PushOptions) -> None:
    """Upload the draft FOLDER to the hub model repo ORG/NAME in one commit (or one pull request).

    The draft is validated first (eagle-convert validate) and refused when it has errors, unless
    --allow-invalid. The repo is created when missing. An eagle-convert model card (README.md) is sent
    with its `vllm serve` command pointing at ORG/NAME: the folder's own card retargeted, or one
    generated when the folder has no README.md (a README.md of your own is sent as it is). HF_TOKEN
    (or `hf auth login`) and HF_ENDPOINT are honoured.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.push import plan_push, push_draft

    if opts.dry_run:
        plan = plan_push(folder, repo_id, opts)
        if opts.as_json:
            echo_json(plan.to_dict())
        else:
            from eagle_convert.cli.render.push import render_push_plan

            render_push_plan(console(), folder, plan)
        if plan.refused:
            click.get_current_context().exit(1)
        return
    result = push_draft(folder, repo_id, opts)
    if opts.as_json:
        echo_json(result.to_dict())
        return
    from eagle_convert.cli.render.push import render_push

    render_push(console(), folder, result)


def register(group: click.Group) -> None:
    group.add_command(push_cmd)
