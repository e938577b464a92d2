"""The finding-code table in docs/findings.md (the one place it is printed) is the one schemas/findings.json generates."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_convert.cli.render.validate import MARK_END, MARK_START, findings_markdown
from eagle_convert.validate.findings import code_table

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "findings.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_table_is_generated_from_the_schema(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    table = text.split(MARK_START, 1)[1].split(MARK_END, 1)[0].strip()
    assert table == findings_markdown(), "regenerate: python -m eagle_convert.cli.render.validate --markdown"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_code_is_documented_once(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for code, info in code_table().items():
        assert text.count(f"| `{code}` | `{info.slug}` |") == 1, code


def test_codes_are_well_formed() -> None:
    families = {
        "0": "files",
        "1": "keys",
        "2": "shapes",
        "3": "config",
        "4": "vocab",
        "5": "target",
        "6": "producer",
        "7": "engine",
        "8": "deep",
        "9": "serve",
    }
    for code, info in code_table().items():
        assert len(code) == 4 and code[1:].isdigit()
        assert families[code[1]] == info.family, code
        assert info.title and info.why and info.fix.endswith(".")
