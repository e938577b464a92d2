"""validate's output reads at 80 columns: no word split across lines, long findings as a list under
a narrow table, and COLUMNS honoured when the output is piped (issue 21 item 2)."""

from __future__ import annotations

import io
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from eagle_convert.cli.app import main
from eagle_convert.cli.output import PIPED_WIDTH, output_width
from eagle_convert.cli.render.validate import render_validate
from eagle_convert.validate.run import ValidationReport, validate_checkpoint
from fixtures.drafts import FIXTURE_MATRIX

_BOX = re.compile(r"[\u2500-\u257f]")  # rich's table borders


def _render(report: ValidationReport, width: int) -> str:
    buffer = io.StringIO()
    render_validate(Console(file=buffer, width=width, soft_wrap=False, color_system=None), report)
    return buffer.getvalue()


def _split_words(text: str, report: ValidationReport) -> list[str]:
    """Words of the findings (code, slug, where, message, fix) that the rendered text does not hold whole."""
    shown = set(_BOX.sub(" ", text).split())
    wanted = {
        w for f in report.findings for field in (f.code, f.slug, f.where, f.message, f.fix) for w in field.split()
    }
    return sorted(wanted - shown)


@pytest.fixture(scope="module")
def reports(built_fixtures) -> Iterator[dict[str, ValidationReport]]:
    """Every fixture draft's validation, the widest (most and longest findings) first. The drafts are
    copied under a short temporary folder: a finding quoting a path holds it as one word, and pytest's
    own folder (longer under xdist, `popen-gwN/`, or a long user name) must not decide the layout."""
    with tempfile.TemporaryDirectory(prefix="w") as short:
        out = {
            name: validate_checkpoint(shutil.copytree(built_fixtures(name), Path(short) / name))
            for name in FIXTURE_MATRIX
        }
    yield dict(
        sorted(out.items(), key=lambda kv: -sum(len(f.message) + len(f.fix) + len(f.where) for f in kv[1].findings))
    )


@pytest.mark.parametrize("width", [80, 100, PIPED_WIDTH])
def test_every_report_fits_without_split_words(reports: dict[str, ValidationReport], width: int) -> None:
    widest = next(iter(reports))
    assert len(reports[widest].findings) >= 3  # the widest has something to wrap
    for name, report in reports.items():
        text = _render(report, width)
        too_long = [line for line in text.splitlines() if len(line.rstrip()) > width]
        assert too_long == [], (name, too_long)
        assert _split_words(text, report) == [], name


def test_narrow_table_lists_the_findings_under_it(reports: dict[str, ValidationReport]) -> None:
    name = next(iter(reports))
    report = reports[name]
    text = _render(report, 80)
    head = [line for line in text.splitlines() if line.startswith("┃")][0]
    assert _BOX.sub(" ", head).split() == ["#", "level", "code"]
    for i, f in enumerate(report.sorted_findings(), 1):
        assert f"{i}. {f.code}" + (f" at {f.where}" if f.where else "") in text
    wide = _render(report, 240)  # room for everything: one table, no list
    assert _BOX.sub(" ", [line for line in wide.splitlines() if line.startswith("┃")][0]).split() == [
        "level",
        "code",
        "where",
        "finding",
        "fix",
    ]
    assert "1. " not in wide


def test_columns_is_honoured_when_piped(built_fixtures, monkeypatch: pytest.MonkeyPatch) -> None:
    draft = built_fixtures("nemo-eagle3")  # four findings, long where and messages
    report = validate_checkpoint(draft)
    wide = CliRunner().invoke(main, ["validate", str(draft)])
    assert max(len(line) for line in wide.stdout.splitlines()) > 80  # 160 columns by default
    narrow = CliRunner().invoke(main, ["validate", str(draft)], env={"COLUMNS": "80"})
    assert narrow.exit_code == wide.exit_code == 1
    assert max(len(line.rstrip()) for line in narrow.stdout.splitlines()) <= 80
    assert _split_words(narrow.stdout, report) == []
    for value, width in (("80", 80), ("132", 132), ("abc", PIPED_WIDTH), ("5", PIPED_WIDTH), ("", PIPED_WIDTH)):
        monkeypatch.setenv("COLUMNS", value)
        assert output_width() == width, value
