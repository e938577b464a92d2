"""Findings are data: a stable code, a level, where (tensor or config field), a message and a fix.

The code table lives in `schemas/findings.json`, so the docs (docs/findings.md), the JSON output and the JUnit
report all name the same codes; rules only pick a code and say what they saw.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args

from eagle_convert.draft import load_schema
from eagle_convert.jsonable import Jsonable

Level = Literal["error", "warning", "info"]
LEVELS: tuple[Level, ...] = ("error", "warning", "info")
# What a finding does to what vLLM serves (schemas/findings.json "impact"); all but "hygiene" change it.
# "unverified": the rules were not read from the vLLM served (E705, E706), so what it serves is not known.
Impact = Literal[
    "fails-to-load", "loads-other-weights", "computes-differently", "caps-context", "hygiene", "unverified"
]
IMPACTS: tuple[Impact, ...] = get_args(Impact)


@dataclass(frozen=True)
class CodeInfo:
    """One row of `schemas/findings.json`."""

    code: str
    slug: str
    family: str
    level: Level
    title: str
    why: str
    fix: str
    impact: Impact


@cache
def code_table() -> dict[str, CodeInfo]:
    """code -> CodeInfo of every code in use, checked once: the letter must agree with the level, and a
    retired code (`"retired": true`, kept so it is never reused) is not in the table."""
    table: dict[str, CodeInfo] = {}
    seen: set[str] = set()
    for row in load_schema("findings.json")["codes"]:
        if row["code"] in seen:
            raise ValueError(f"schemas/findings.json: duplicate code {row['code']!r}")
        seen.add(row["code"])
        if row.get("retired"):
            continue
        info = CodeInfo(
            row["code"], row["slug"], row["family"], row["level"], row["title"], row["why"], row["fix"], row["impact"]
        )
        if info.code[0] != info.level[0].upper() or info.code in table or info.impact not in IMPACTS:
            raise ValueError(f"schemas/findings.json: bad or duplicate code {info.code!r}")
        table[info.code] = info
    return table


@dataclass(frozen=True)
class Finding(Jsonable):
    """One problem (or note) found in a checkpoint."""

    code: str
    slug: str
    level: Level
    message: str
    fix: str
    tensor: str | None = None
    field: str | None = None
    impact: Impact = "hygiene"

    @property
    def where(self) -> str:
        return self.tensor or self.field or ""

    @property
    def changes_serving(self) -> bool:
        """Whether vLLM serves the draft otherwise than it was trained (or not at all)."""
        return self.impact != "hygiene"


def finding(
    code: str,
    message: str,
    *,
    tensor: str | None = None,
    field: str | None = None,
    fix: str | None = None,
    impact: Impact | None = None,
) -> Finding:
    """A Finding for `code`; level, slug and impact come from the table, `fix` defaults to the table's.

    Args:
        impact: what it does to serving in the release checked, where that differs from the table's.
    """
    info = code_table()[code]
    return Finding(code, info.slug, info.level, message, fix or info.fix, tensor, field, impact or info.impact)


@dataclass
class Report:
    """An ordered list of findings with the counts, exit status, JSON and JUnit forms."""

    source: str
    findings: list[Finding] = field(default_factory=list)
    families_run: list[str] = field(default_factory=list)

    def add(self, items: list[Finding] | Finding) -> None:
        self.findings.extend([items] if isinstance(items, Finding) else items)

    def counts(self) -> dict[str, int]:
        counter = Counter(f.level for f in self.findings)
        return {level: counter.get(level, 0) for level in LEVELS}

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def codes(self) -> set[str]:
        return {f.code for f in self.findings}

    def failing(self, *, strict: bool = False, allowed: Collection[str] = ()) -> list[Finding]:
        """What fails a gate: every error; with `strict` every warning whose code is not `allowed`.
        The one "report passes" rule: validate --strict, pre-commit and check's static stage apply it."""
        return self.errors + ([w for w in self.warnings if w.code not in allowed] if strict else [])

    def failed(self, *, strict: bool = False, allowed: Collection[str] = ()) -> bool:
        return bool(self.failing(strict=strict, allowed=allowed))

    def sorted_findings(self) -> list[Finding]:
        order = {level: i for i, level in enumerate(LEVELS)}
        return sorted(self.findings, key=lambda f: (order[f.level], f.code, f.where))

    def findings_dicts(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.sorted_findings()]

    def to_junit(self, *, strict: bool = False, suite: str = "eagle-convert validate") -> str:
        """JUnit XML: one testcase per rule family run (passes when it found no errors) and one per
        finding (errors fail; warnings fail only with `strict`; infos pass with their message)."""
        cases: list[ET.Element] = []
        failures = 0
        for family in self.families_run:
            case = ET.Element("testcase", classname=f"validate.{family}", name=f"{family} checks")
            bad = [f for f in self.findings if _family(f) == family and _fails(f, strict)]
            if bad:
                failures += 1
                ET.SubElement(case, "failure", message=f"{len(bad)} finding(s)", type="findings").text = "\n".join(
                    f"{f.code} {f.slug}: {f.message}" for f in bad
                )
            cases.append(case)
        for f in self.sorted_findings():
            name = f"{f.code} {f.slug}" + (f": {f.where}" if f.where else "")
            case = ET.Element("testcase", classname=f"validate.{_family(f)}.{f.code}", name=name)
            if _fails(f, strict):
                failures += 1
                ET.SubElement(case, "failure", message=f.message, type=f.code).text = f"{f.message}\nfix: {f.fix}"
            else:
                ET.SubElement(case, "system-out").text = f"[{f.level}] {f.message}\nfix: {f.fix}"
            cases.append(case)
        root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=str(failures))
        ts = ET.SubElement(
            root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0", skipped="0"
        )
        ET.SubElement(ET.SubElement(ts, "properties"), "property", name="source", value=self.source)
        ts.extend(cases)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _fails(f: Finding, strict: bool) -> bool:
    return f.level == "error" or (strict and f.level == "warning")


def _family(f: Finding) -> str:
    return code_table()[f.code].family
