"""The project stands alone: nothing it ships cites the team's internal reference documents.

Code, schemas, docs, fixtures and benchmarks cite vLLM's own source (file, function, version) or
public issues and PRs; a citation of an internal document or a path into `shared/` points a reader
at text they cannot see. This module is the only file allowed to spell those names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()

# What ships or documents the project; tests/ too, except this file.
SCANNED = (
    "eagle_convert",
    "schemas",
    "docs",
    "README.md",
    "CHANGELOG.md",
    "Makefile",
    "fixtures",
    "benchmarks",
    "tests",
)

INTERNAL = re.compile(
    r"vllm-loader|vllm-on-cpu|checkpoint-formats|field-reports|\bstyle\.md\b"
    r"|\.\./shared\b|(?<![\w.-])shared/",
)


def _files(root: Path) -> list[Path]:
    """Text-bearing files under the scanned paths, skipping hidden folders (build caches) and bytecode."""
    out: list[Path] = []
    for name in SCANNED:
        top = root / name
        if top.is_file():
            out.append(top)
            continue
        for p in sorted(top.rglob("*")) if top.is_dir() else []:
            rel = p.relative_to(root).parts
            if not p.is_file() or any(part.startswith(".") or part == "__pycache__" for part in rel):
                continue
            out.append(p)
    return out


def internal_references(root: Path) -> list[str]:
    """`path:line: text` for every line that names an internal document or a path into `shared/`."""
    hits: list[str] = []
    for path in _files(root):
        if path.resolve() == THIS:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # binary (e.g. a .safetensors fixture): nothing to cite in it
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if INTERNAL.search(line):
                hits.append(f"{path.relative_to(root)}:{no}: {line.strip()[:160]}")
    return hits


def test_project_cites_no_internal_document() -> None:
    hits = internal_references(ROOT)
    assert not hits, "cite vLLM's source (file, function, 0.32.0) or a public issue/PR instead of:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    ("rel", "line"),
    [
        ("eagle_convert/x.py", '"""Loads silently (docs/vllm-loader.md §3.1)."""'),
        ("eagle_convert/sub/y.py", "# see vllm-on-cpu gotcha 1"),
        ("schemas/s.json", '{"$comment": "from checkpoint-formats §2"}'),
        ("docs/d.md", "As field-reports.md says"),
        ("README.md", "Follow style.md."),
        ("CHANGELOG.md", "- details in ../shared"),
        ("Makefile", "\t# shared/docs/notes"),
        ("fixtures/f.py", "# Sources: `shared/docs` tables"),
        ("benchmarks/b.py", "# (../shared/docs/vllm)"),
        ("tests/test_z.py", "# vllm-loader §3.2, by hand"),
    ],
)
def test_checker_finds_an_injected_citation(tmp_path: Path, rel: str, line: str) -> None:
    """Each kind of citation, in each scanned place, is reported with its file and line."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("first line\n" + line + "\n", encoding="utf-8")
    assert internal_references(tmp_path) == [f"{Path(rel)}:2: {line.strip()}"]


def test_checker_ignores_ordinary_words_and_hidden_caches(tmp_path: Path) -> None:
    """`shared` as a word, other style files, and generated caches are not citations."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "The embedding is shared from the target; target-shared/ and my_shared/ paths; lint_style.mdx.\n",
        encoding="utf-8",
    )
    cache = tmp_path / "fixtures" / ".cache"
    cache.mkdir(parents=True)
    (cache / "notes.txt").write_text("vllm-loader.md\n", encoding="utf-8")
    (tmp_path / "fixtures" / "w.bin").write_bytes(b"\xff\xfe vllm-loader \xff")
    assert internal_references(tmp_path) == []
