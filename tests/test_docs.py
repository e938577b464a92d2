"""The docs site stays true: generated pages are fresh, every command and option is documented, the README is short.

`scripts/docs_gen.py` generates docs/cli.md (every `--help`), docs/python-api.md (the public table) and the
finding-code table; `make docs` runs its `--check` and then `mkdocs build --strict`. These tests run the
same checks without the docs extra, and show that the undocumented-option check can fail.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

import eagle_convert
from eagle_convert.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_LIMIT = 12 * 1024  # issue 17: about 10 KB; the detail lives in docs/


def _load_docs_gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "scripts" / "docs_gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_gen"] = module
    spec.loader.exec_module(module)
    return module


docs_gen = _load_docs_gen()


class _InOrder(click.Group):
    """A plain group that lists its commands in the order given (main's: pipeline order)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


def _plain_group(replace: dict[str, click.Command] | None = None) -> click.Group:
    """A plain click group with main's options and commands (lazy ones loaded), some replaced."""
    cmds = dict(docs_gen.commands(main)) | (replace or {})
    return _InOrder(
        "eagle-convert", commands=cmds, params=main.params, help=main.help, context_settings=main.context_settings
    )


def test_generated_pages_are_fresh() -> None:
    assert docs_gen.stale() == [], "regenerate: python scripts/docs_gen.py"


def test_every_command_and_option_is_documented() -> None:
    assert docs_gen.undocumented(main) == []


def test_the_cli_reference_names_every_command_and_option() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    names = [name for name, _ in docs_gen.commands(main)]
    assert set(names) >= {"inspect", "upgrade", "diff", "validate", "smoke", "finetune", "report", "push", "check"}
    for name, cmd in docs_gen.commands(main):
        section = text.split(f"## `eagle-convert {name}`\n", 1)[1].split("\n## ", 1)[0]
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert any(re.search(rf"(?<![\w-]){re.escape(o)}\b", section) for o in param.opts), (name, param.opts)


def test_an_undocumented_option_fails_the_checks() -> None:
    """A fake option added to a copy of `diff`: no help and no mention fail, and the reference goes stale."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert docs_gen.cli_reference(_plain_group()) == page  # the copy of the CLI reads as the real one
    real = main.get_command(click.Context(main), "diff")
    assert real is not None
    fake = copy.copy(real)
    fake.params = [*real.params, click.Option(["--fake-option"], is_flag=True)]
    group = _plain_group({"diff": fake})
    assert docs_gen.undocumented(group) == [
        "diff --fake-option: no help text",
        "diff --fake-option: not named in docs/diff.md",
    ]
    fake.params[-1].help = "Documented in --help only."
    assert docs_gen.undocumented(group) == ["diff --fake-option: not named in docs/diff.md"]
    fresh = docs_gen.cli_reference(group)
    assert fresh != page and re.search(r"--fake-option +Documented in --help only\.", fresh)


def test_a_command_without_a_page_fails(tmp_path: Path) -> None:
    (tmp_path / "index.md").write_text("`--debug`, `--version`, `-h`/`--help`\n", encoding="utf-8")
    problems = docs_gen.undocumented(main, docs=tmp_path)
    assert "inspect: no page docs/inspect.md" in problems and "check: no page docs/check.md" in problems


def test_python_api_lists_every_public_name() -> None:
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    for name, module in eagle_convert._API.items():
        assert f"::: {module}.{name}\n" in text, name
    with pytest.raises(SystemExit, match=r"add \['new_call'\]"):
        docs_gen.python_api({**eagle_convert._API, "new_call": "eagle_convert.diff"})


def test_every_page_is_in_the_nav() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(items: list) -> list[str]:
        out: list[str] = []
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out += pages(value) if isinstance(value, list) else [value]
        return out

    listed = pages(nav)
    assert sorted(listed) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert "ARCHITECTURE.md" in listed


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= README_LIMIT, f"README.md is {len(text.encode())} bytes: move detail to docs/"
    for target in re.findall(r"\]\((?!https?:)([^)#]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), target
    # Messages point here ("see README 'Supported layouts'": draft/layout.py, schemas/findings.json E001).
    assert "\n## Supported layouts\n" in text


def test_readme_sections_that_messages_name_exist() -> None:
    """A hint such as "see README 'Supported layouts'" (code, schemas) names a section the README has."""
    headings = set(re.findall(r"^#+ (.+)$", README.read_text(encoding="utf-8"), re.M))
    named: set[tuple[str, str]] = set()
    for folder in ("eagle_convert", "schemas"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".json"):
                for section in re.findall(r"README \(?'([^']+)'", path.read_text(encoding="utf-8")):
                    named.add((str(path.relative_to(ROOT)), section))
    assert named, "the layout hint names a README section"
    assert [(p, s) for p, s in sorted(named) if s not in headings] == []


def test_docs_links_stay_inside_the_site() -> None:
    """Every relative link on a docs page names a page of the site (mkdocs does not warn about a link out of docs/: a 404)."""
    bad: list[str] = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\((?!https?:|mailto:|#)([^)#\s]+)", text):
            resolved = (page.parent / target).resolve()
            if not resolved.is_relative_to((ROOT / "docs").resolve()) or not resolved.is_file():
                bad.append(f"{page.name}: {target} (write a repository path as `code`, link only docs pages)")
    assert bad == []


def _public_defs() -> list[tuple[str, ast.FunctionDef | ast.ClassDef]]:
    out = []
    for name, module in eagle_convert._API.items():
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name)
        out.append((name, node))
    return out


def test_public_docstrings_say_args_returns_and_raises() -> None:
    """The Python-API page renders these: each public function names every parameter under Args:, and Returns:."""
    problems = []
    for name, node in _public_defs():
        doc = ast.get_docstring(node) or ""
        if not doc:
            problems.append(f"{name}: no docstring")
        if not isinstance(node, ast.FunctionDef):
            continue
        params = [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
        section = doc.split("Args:", 1)[1].split("\n\n", 1)[0] if "Args:" in doc else ""
        documented = set(re.findall(r"^    (\w+):", section, re.M))
        problems += [f"{name}: parameter {p} not under Args:" for p in params if p not in documented]
        if "Returns:" not in doc:
            problems.append(f"{name}: no Returns:")
    assert problems == []


def test_readme_names_every_command_in_the_clis_order() -> None:
    """README's command paragraph lists exactly the CLI's commands, in `--help`'s order, with the right
    count in words (issue 33: it said "nine" while the CLI had eleven)."""
    import click

    from eagle_convert.cli.app import main

    ctx = click.Context(main)
    commands = [n for n in main.list_commands(ctx) if not main.get_command(ctx, n).hidden]
    text = README.read_text(encoding="utf-8")
    m = re.search(r"^The (\w+) commands, in pipeline order, each with its page:\n(.*?)\n\n", text, re.M | re.S)
    assert m, "README has the paragraph 'The N commands, in pipeline order, each with its page:'"
    named = re.findall(r"\[`([a-z-]+)`\]\(docs/([a-z-]+)\.md\)", m.group(2))
    assert [n for n, _ in named] == commands
    assert all(n == page for n, page in named)
    words = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen".split()
    assert m.group(1) == words[len(commands)]
