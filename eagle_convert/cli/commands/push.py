"""`eagle-convert push DIR org/name`: upload a draft folder to the Hugging Face Hub (validated first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


@click.command("push")
@click.argument("folder", type=click.Path(path_type=Path))
@click.argument("repo_id", metavar="ORG/NAME")
@click.option(
    "--revision",
    metavar="BRANCH",
    default=None,
    help="Branch to commit to (created from main when missing). Default: main.",
)
@click.option("--create-pr", is_flag=True, help="Open a pull request against the branch instead of committing to it.")
@click.option(
    "--private", is_flag=True, default=None, help="Create the repo private (an existing repo keeps its visibility)."
)
@click.option(
    "--target",
    metavar="PATH_OR_REPO",
    default=None,
    help="Also cross-check the draft against its target while validating.",
)
@click.option("--allow-invalid", is_flag=True, help="Push a draft that fails validation anyway.")
@click.option(
    "--message", "commit_message", default=None, help="Commit message (default: Upload FOLDER with eagle-convert)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Validate and show what would be sent (repo, files and sizes, commit message, verdict); send "
    "nothing. Works offline; exits 1 when the push would be refused.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result (or, with --dry-run, the plan) as JSON.")
def push_cmd(
    folder: Path,
    repo_id: str,
    revision: str | None,
    create_pr: bool,
    private: bool | None,
    target: str | None,
    allow_invalid: bool,
    commit_message: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Upload the draft FOLDER to the hub model repo ORG/NAME in one commit (or one pull request).

    The draft is validated first (eagle-convert validate) and refused when it has errors, unless
    --allow-invalid. The repo is created when missing. An eagle-convert model card (README.md) is sent
    with its `vllm serve` command pointing at ORG/NAME: the folder's own card retargeted, or one
    generated when the folder has no README.md (a README.md of your own is sent as it is). HF_TOKEN
    (or `hf auth login`) and HF_ENDPOINT are honoured.
    """
    from eagle_convert.cli.output import console, echo_json
    from eagle_convert.push import plan_push, push_draft

    options: dict[str, Any] = dict(
        revision=revision,
        create_pr=create_pr,
        private=private,
        allow_invalid=allow_invalid,
        target=target,
        commit_message=commit_message,
    )
    if dry_run:
        plan = plan_push(folder, repo_id, **options)
        if as_json:
            echo_json(plan.to_dict())
        else:
            from eagle_convert.cli.render.push import render_push_plan

            render_push_plan(console(), folder, plan)
        if plan.refused:
            click.get_current_context().exit(1)
        return
    result = push_draft(folder, repo_id, **options)
    if as_json:
        echo_json(result.to_dict())
        return
    from eagle_convert.cli.render.push import render_push

    render_push(console(), folder, result)


def register(group: click.Group) -> None:
    group.add_command(push_cmd)
