"""Library errors name options by keyword; the command line spells them as flags from one table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from eagle_convert.cli.app import main
from eagle_convert.cli.errors import cli_spelling, flags, format_error
from eagle_convert.errors import EagleConvertError, UsageError
from eagle_convert.io import OutputExistsError

PKG = Path(__file__).resolve().parents[1] / "eagle_convert"


def test_the_library_says_keywords_and_the_cli_says_flags() -> None:
    exc = UsageError("{layout=speculators} needs {target}", hint="or use {layout=vllm}", options=("layout", "target"))
    assert str(exc) == "`layout=speculators` needs `target` (or use `layout=vllm`)"
    assert exc.message == "`layout=speculators` needs `target`" and exc.hint == exc.fix == "or use `layout=vllm`"
    assert format_error(exc) == "--layout speculators needs --target (or use --layout vllm)"


def _command(name: str) -> click.Command:
    command = main.get_command(click.Context(main), name)
    assert command is not None
    return command


def test_a_command_spells_an_option_as_its_field_declares_it() -> None:
    exc = UsageError("{k} and {categories} and {prompts}", options=("k", "categories", "prompts"))
    assert format_error(exc, _command("smoke")) == "--num-speculative-tokens and --category and --prompts"
    assert format_error(exc, _command("finetune")) == "--k and --categories and --train-prompts"
    load = UsageError("{load=vllm} needs {target}", options=("load", "target"))
    assert format_error(load, _command("validate")) == "--load vllm needs --target"


def test_braces_that_name_no_option_stay_as_they_are() -> None:
    exc = UsageError('fc_norm.{i}.weight and {"model": DRAFT} with {force}', options=("force",))
    assert format_error(exc) == 'fc_norm.{i}.weight and {"model": DRAFT} with --force'
    plain = EagleConvertError("fc_norm.{i}.weight {force}")  # no options: nothing is spelled
    assert str(plain) == format_error(plain) == "fc_norm.{i}.weight {force}"


def test_a_prefixed_message_keeps_its_options() -> None:
    exc = OutputExistsError("/o")
    exc.message = f"report stage upgrade: {exc.message}"  # what report's runner does
    assert format_error(exc) == "report stage upgrade: /o: output already exists (pass --force to replace it)"


def test_output_exists_is_a_library_error_with_its_fields() -> None:
    exc = OutputExistsError(Path("/o"))
    assert isinstance(exc, EagleConvertError) and isinstance(exc, FileExistsError)
    assert (exc.file, exc.filename, exc.options) == ("/o", "/o", ("force",))
    assert str(exc) == "/o: output already exists (pass `force` to replace it)"


def _options_named_by_library_errors() -> set[str]:
    """Every string in an `options=(...)` keyword or a `named = (...)` tuple outside cli/."""
    names: set[str] = set()
    for path in PKG.rglob("*.py"):
        if "cli" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "options":
                values = [node.value]
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "named" for t in node.targets
            ):
                values = [node.value]
            for v in values:
                names |= {c.value for c in ast.walk(v) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def test_every_option_a_library_error_names_is_a_flag_of_some_command() -> None:
    """Spelled by some command (its field's flag, else the name with dashes) as a flag it really has."""
    named = _options_named_by_library_errors()
    assert {"force", "aux_layer_ids", "layout", "link", "target", "engine", "allow_invalid", "load"} <= named
    commands = [_command(name) for name in main.list_commands(click.Context(main))]

    def spelled(name: str, command: click.Command) -> bool:
        return cli_spelling(command)(name, None) in {o for p in command.params for o in p.opts}

    assert [n for n in sorted(named) if not any(spelled(n, c) for c in commands)] == []


@pytest.mark.parametrize("name", ["validate", "check", "diff", "push", "smoke", "upgrade"])
def test_flags_are_written_as_flags(name: str) -> None:
    table = flags(_command(name))
    assert table and all(re.fullmatch(r"--[a-z][a-z0-9-]*", f) for f in table.values())


def test_a_name_no_command_declares_is_spelled_with_dashes() -> None:
    assert cli_spelling(None)("max_new_tokens", None) == "--max-new-tokens"
    assert cli_spelling(_command("diff"))("max_new_tokens", "8") == "--max-new-tokens 8"


# Modules whose errors still spell flags (being reworked by other changes; each is converted in turn).
NOT_CONVERTED: set[str] = set()


def test_no_library_error_names_a_flag() -> None:
    """The library raises in keywords (`{name}` + `options`); the flags come from cli/errors.py. A
    message may still show a whole command line (`eagle-convert capture ... --out NEW`, `vllm serve
    --speculative-config`) as the fix or the reference."""
    files = [
        p
        for p in sorted(PKG.rglob("*.py"))
        if "cli" not in p.relative_to(PKG).parts and p.relative_to(PKG).as_posix() not in NOT_CONVERTED
    ]
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "").endswith(("Error", "refuse")):
                for c in ast.walk(node):
                    if (
                        isinstance(c, ast.Constant)
                        and isinstance(c.value, str)
                        and re.search(r"(?<![\w-])--[a-z]", c.value)
                        and not re.search(r"(eagle-convert|vllm serve) ", c.value)
                    ):
                        bad.append(f"{path.relative_to(PKG)}:{node.lineno}: {c.value}")
    assert bad == []
