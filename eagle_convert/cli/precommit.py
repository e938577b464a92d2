"""`eagle-convert-pre-commit FILE...`: the pre-commit hook (.pre-commit-hooks.yaml).

Maps the changed files to their draft folders (check/changed.py) and validates each statically:
config.json, safetensors headers and the small d2t/t2d tensors, no torch and no vLLM, so the hook
takes well under a second per draft. Warnings allowed by the repository's eagle-check.toml
([static] allow_warnings) do not fail; other warnings fail with --strict.
Exit status: 0 clean, 1 a draft has errors (or unallowed warnings with --strict), 2 usage.
"""

from __future__ import annotations

from pathlib import Path

import click

from eagle_convert.cli.errors import format_error
from eagle_convert.errors import EagleConvertError
from eagle_convert.io import printable


class _Command(click.Command):
    """Library errors become one `Error: ...` line and their exit code, as in `eagle-convert`."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EagleConvertError as exc:
            click.echo(f"Error: {printable(format_error(exc, ctx.command), one_line=True)}", err=True)
            ctx.exit(exc.exit_code)


@click.command("eagle-convert-pre-commit", cls=_Command)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--strict", is_flag=True, help="Warnings fail too (unless the policy allows their code).")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Policy whose [static] allow_warnings applies (default: ./eagle-check.toml when present).",
)
@click.option("--target", metavar="PATH_OR_REPO", help="Cross-check every draft against this target's config.")
def precommit_cmd(files: tuple[Path, ...], strict: bool, policy_file: Path | None, target: str | None) -> None:
    """Validate the draft folders that FILES belong to."""
    from eagle_convert.check import draft_folders, load_policy
    from eagle_convert.validate import validate_checkpoint

    policy = load_policy(policy_file)
    allowed = set(policy.get("static", "allow_warnings", []))
    failed = 0
    for folder in draft_folders(files):
        report = validate_checkpoint(folder, target=target)
        bad = report.failing(strict=strict, allowed=allowed)
        for f in report.sorted_findings():
            if f.level == "info":
                continue
            mark = "FAIL" if f in bad else "warn"  # errors always fail; warnings do with --strict
            click.echo(printable(f"{mark} {folder}: {f.code} {f.slug}{' ' + f.where if f.where else ''}: {f.message}"))
        if bad:
            failed += 1
        else:
            click.echo(
                f"ok   {folder}: {report.info.variant if report.info else 'draft'}, {len(report.warnings)} warning(s)"
            )
    if failed:
        click.echo(f"{failed} draft folder(s) failed validation (eagle-convert validate FOLDER for details)", err=True)
        click.get_current_context().exit(1)


main = precommit_cmd  # the console script
