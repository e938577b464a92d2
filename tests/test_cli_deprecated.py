"""Renamed flags keep working as hidden aliases with one warning line (`cli/deprecated.py`)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from eagle_convert.cli.deprecated import deprecation_line, renamed_option, warn_deprecated


@click.command("demo")
@click.argument("draft")
@renamed_option("--engine", "--load")
@click.option("--load", type=click.Choice(["vllm"]), help="Also load it.")
@renamed_option("--force", "--allow-invalid")
@click.option("--allow-invalid", is_flag=True, help="Go on anyway.")
def demo(draft: str, load: str | None, allow_invalid: bool) -> None:
    click.echo(f"{draft} load={load} allow_invalid={allow_invalid}")


@click.command("needs")
@renamed_option("--model", "--target")
@click.option("--target", required=True, help="The target.")
def needs(target: str) -> None:
    click.echo(f"target={target}")


def run(command: click.Command, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(command, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_the_warning_is_one_line() -> None:
    assert deprecation_line("--engine", "--load") == (
        "Warning: --engine is deprecated; use --load (it will be removed in a later release)."
    )


def test_the_new_names_print_no_warning() -> None:
    assert run(demo, "D", "--load", "vllm", "--allow-invalid") == (0, "D load=vllm allow_invalid=True\n", "")
    assert run(demo, "D") == (0, "D load=None allow_invalid=False\n", "")


def test_an_old_flag_with_a_value_still_works_and_warns_once() -> None:
    assert run(demo, "D", "--engine", "vllm") == (
        0,
        "D load=vllm allow_invalid=False\n",
        "Warning: --engine is deprecated; use --load (it will be removed in a later release).\n",
    )


def test_an_old_switch_still_works_and_warns_once() -> None:
    assert run(demo, "--force", "D") == (
        0,
        "D load=None allow_invalid=True\n",
        "Warning: --force is deprecated; use --allow-invalid (it will be removed in a later release).\n",
    )


def test_the_old_flag_is_checked_like_the_new_one() -> None:
    code, out, err = run(demo, "D", "--engine", "torch")
    assert (code, out) == (2, "")
    assert err.endswith("Error: Invalid value for '--engine': 'torch' is not 'vllm'.\n")


def test_both_spellings_at_once_are_a_usage_error() -> None:
    code, out, err = run(demo, "D", "--engine", "vllm", "--load", "vllm")
    assert (code, out) == (2, "")
    assert err.endswith("Error: --engine is the old name of --load: pass --load only\n")


def test_the_old_flag_is_hidden_from_help() -> None:
    code, out, _ = run(demo, "--help")
    assert code == 0 and "--load" in out and "--allow-invalid" in out
    assert "--engine" not in out and "--force" not in out


def test_either_spelling_satisfies_a_required_option() -> None:
    assert run(needs, "--target", "T") == (0, "target=T\n", "")
    assert run(needs, "--model", "T") == (
        0,
        "target=T\n",
        "Warning: --model is deprecated; use --target (it will be removed in a later release).\n",
    )
    code, out, err = run(needs)
    assert (code, out) == (2, "")
    assert err.endswith("Error: Missing option '--target'.\n")


def test_an_old_positional_form_is_reported_by_the_command() -> None:
    @click.command("smoke")
    @click.argument("first")
    @click.option("--draft", "-d")
    def smoke(first: str, draft: str | None) -> None:
        if draft is not None:
            warn_deprecated("smoke TARGET -d DRAFT", "smoke DRAFT --target TARGET")

    assert run(smoke, "T", "-d", "D") == (
        0,
        "",
        "Warning: smoke TARGET -d DRAFT is deprecated; use smoke DRAFT --target TARGET "
        "(it will be removed in a later release).\n",
    )


def test_an_alias_of_an_undeclared_option_fails_at_import() -> None:
    with pytest.raises(TypeError, match="declare --load below the alias of --engine"):

        @renamed_option("--engine", "--load")
        def f() -> None: ...


OLD_SMOKE = (
    "Warning: smoke TARGET -d DRAFT is deprecated; use smoke DRAFT --target TARGET "
    "(it will be removed in a later release).\n"
)


@pytest.mark.parametrize(
    ("argv", "drafts", "warning"),
    [
        (["A", "B", "--target", "T"], ["A", "B"], ""),
        (["A", "--target", "T", "-k", "4"], ["A"], ""),
        (["T", "-d", "A", "-d", "B"], ["A", "B"], OLD_SMOKE),
        (["T", "--draft", "A", "-k", "4"], ["A"], OLD_SMOKE),
        (
            ["A", "--target", "T", "-d", "B"],
            ["A", "B"],
            "Warning: -d/--draft is deprecated; use DRAFT arguments (it will be removed in a later release).\n",
        ),
    ],
)
def test_smoke_draft_first_and_the_old_target_first_form(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], drafts: list[str], warning: str
) -> None:
    """`smoke DRAFT... --target T` as every command; `smoke T -d DRAFT` still reaches run_smoke the same way."""
    from eagle_convert.cli.app import main
    from eagle_convert.errors import UsageError

    seen = []

    def capture(target, got, opts, **kw):  # noqa: ANN001, ANN003
        seen.append((target, got, opts.k))
        raise UsageError("stop here")

    monkeypatch.setattr("eagle_convert.smoke.run.run_smoke", capture)
    res = CliRunner().invoke(main, ["smoke", *argv])
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", warning + "Error: stop here\n")
    assert seen == [("T", drafts, 4 if "-k" in argv else 3)]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["A"], "Error: Missing option '--target'.\n"),
        (
            ["T", "U", "-d", "A"],
            "Error: smoke TARGET -d DRAFT (the old form) takes one TARGET, got 2: use smoke DRAFT [DRAFT ...] "
            "--target TARGET\n",
        ),
    ],
)
def test_smoke_form_errors_are_usage(argv: list[str], error: str) -> None:
    from eagle_convert.cli.app import main

    res = CliRunner().invoke(main, ["smoke", *argv])
    assert res.exit_code == 2 and res.stdout == "" and res.stderr.endswith(error)
    shown = CliRunner().invoke(main, ["smoke", "--help"], terminal_width=200).stdout
    assert "Usage: main smoke [OPTIONS] DRAFT [DRAFT ...]" in shown and "--draft" not in shown
