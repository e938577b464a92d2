"""Markdown summary of a check, for CI job pages (GitHub's `$GITHUB_STEP_SUMMARY`)."""

from __future__ import annotations

import os
from pathlib import Path

from eagle_convert.check.checks import TITLES, format_value
from eagle_convert.check.run import CheckReport
from eagle_convert.io import write_text_atomic

MARK = {"pass": "✅ pass", "fail": "❌ fail", "not-run": "❌ not run", "skip": "⏭️ skip"}


def _cell(value: object) -> str:
    return format_value(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: CheckReport) -> str:
    """A verdict line, what was checked, and one table row per check."""
    verdict = "PASS ✅" if report.passed else "FAIL ❌"
    against = f" against `{report.target}`" if report.target else ""
    base = f", baseline `{report.baseline}`" if report.baseline else ""
    facts = [f"policy `{report.policy.source}`"]
    if report.vllm_version:
        facts.append(f"vLLM {report.vllm_version}")
    facts.append(f"{report.engine_starts} engine start{'s' if report.engine_starts != 1 else ''}")
    facts.append(f"{report.seconds:.1f} s")
    lines = [f"## eagle-convert check: {verdict}", "", f"`{report.draft}`{against}{base} · " + " · ".join(facts), ""]
    lines += [f"**{report.verdict()}**", ""]
    if report.stopped_after:
        lines += [
            f"Stopped after the failing **{TITLES[report.stopped_after]}** stage (`--keep-going` runs every stage).",
            "",
        ]
    lines += ["| stage | check | result | figure | threshold | details |", "|---|---|---|---|---|---|"]
    for r in report.results:
        lines.append(
            f"| {TITLES[r.stage]} | {_cell(r.name)} | {MARK[r.status]} | {_cell(r.figure)} | "
            f"{_cell(r.threshold)} | {_cell(r.message)} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(report: CheckReport, path: str | Path | None = None) -> list[Path]:
    """Write the Markdown to `path` (if given) and append it to `$GITHUB_STEP_SUMMARY` (if set).
    Returns the files written."""
    text = to_markdown(report)
    written = []
    if path is not None:
        write_text_atomic(Path(path), text, fsync=False)  # an interrupt leaves the old file or the new
        written.append(Path(path))
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        written.append(Path(step))
    return written
