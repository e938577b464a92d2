"""Piped output (a file, a CI log): one renderer policy for plain text (issue 33 item 2). No line
ends in spaces, and every line fits `PIPED_WIDTH` (100) columns unless a value longer than a line
(a path) is on it; rich's automatic highlighter colours nothing by guesswork."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from eagle_convert.cli.app import main
from eagle_convert.cli.output import PIPED_WIDTH, console

_BOX = re.compile(r"[\u2500-\u257f]")  # rich's table borders
WIDTH = 100  # what a log viewer or a side-by-side diff shows without scrolling


_CLOSED = re.compile(r"[\u2510\u2513\u2503\u2502\u2524\u252b\u2529\u2518\u251b\u2528\u2525]$")  # a table's right edge


def _problems(text: str, long_values: tuple[str, ...] = ()) -> list[str]:
    """Lines with trailing spaces, table lines cut at the right edge (rich crops a table wider than the
    console), or lines wider than PIPED_WIDTH without a value that is itself wider."""
    bad = []
    for line in text.splitlines():
        if line != line.rstrip():
            bad.append(f"trailing spaces: {line!r}")
        elif line[:1] in "\u250c\u250f\u2502\u2503\u2514\u2517\u251c\u2521\u2523\u2517" and not _CLOSED.search(line):
            bad.append(f"table cut at the right edge: {line!r}")
        elif len(line) > WIDTH and not any(v in line and len(v) > WIDTH - 10 for v in long_values):
            bad.append(f"{len(line)} columns: {line!r}")
    return bad


@pytest.fixture(scope="module")
def drafts(built_fixtures, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {
        name: built_fixtures(name) for name in ("specforge-eagle3", "nemo-eagle3", "vllm-eagle31", "kimi-mla-eagle3")
    }
    up = tmp_path_factory.mktemp("piped") / "up"
    res = CliRunner().invoke(main, ["upgrade", str(out["specforge-eagle3"]), "--out", str(up)])
    assert res.exit_code == 0, res.output
    out["upgraded"] = up
    return out


def _commands(d: dict[str, Path], tmp: Path) -> list[list[str]]:
    sf, nemo, e31, mla, up = (
        str(d[k]) for k in ("specforge-eagle3", "nemo-eagle3", "vllm-eagle31", "kimi-mla-eagle3", "upgraded")
    )
    return [
        ["inspect", sf],
        ["inspect", mla, "--tensors"],
        ["inspect", nemo],
        ["validate", sf],
        ["validate", nemo],
        ["validate", mla, "--vllm-version", "all"],
        ["validate", e31, "--vllm-version", "9.9.9"],  # E706's long slug and fix beside an empty `where`
        ["check", sf, "--keep-going"],
        ["check", nemo, "--keep-going"],
        ["diff", sf, up],
        ["diff", e31, mla],
        ["upgrade", sf, "--out", str(tmp / "again"), "--dry-run"],
        ["upgrade", sf, "--out", str(tmp / "again")],
    ]


def test_every_command_piped_has_no_trailing_spaces_and_fits_100_columns(drafts, tmp_path: Path) -> None:
    assert PIPED_WIDTH == WIDTH
    long_values = tuple(str(p) for p in drafts.values()) + (str(tmp_path),)
    for args in _commands(drafts, tmp_path):
        res = CliRunner().invoke(main, args)
        assert res.exit_code in (0, 1), (args, res.output)
        assert res.stdout.strip(), args
        assert _problems(res.stdout, long_values) == [], args


def test_a_console_off_a_terminal_strips_only_finished_lines() -> None:
    """The padding of a table cell goes; a print that ends mid-line keeps its spaces for the next."""
    from eagle_convert.cli.safeconsole import SafeConsole

    buf = io.StringIO()
    c = SafeConsole(file=buf, width=40, soft_wrap=False, color_system=None, highlight=False)
    from rich.table import Table

    t = Table.grid(padding=(0, 2))
    t.add_row("draft", "x")
    t.add_row("verdict for", "vLLM 0.32.0")
    c.print(t)
    c.print("a ", end="")
    c.print("b")
    assert buf.getvalue() == "draft        x\nverdict for  vLLM 0.32.0\na b\n"
    buf = io.StringIO()  # with colour (FORCE_COLOR in a CI log): spaces before the closing codes go too
    c = SafeConsole(file=buf, width=40, soft_wrap=False, color_system="standard", force_terminal=False)
    c.print("[bold]PASS[/bold]   ")
    assert buf.getvalue() == "\x1b[1mPASS\x1b[0m\n"


def test_rich_highlights_no_part_of_a_version() -> None:
    """ "vLLM 0.32.0" and "E101" print as written: no span from rich's ReprHighlighter (which coloured
    0, 32 and 0 as three numbers)."""
    text = console().render_str("verdict for vLLM 0.32.0 (E101 at layers.0.mlp, 'x' True None)")
    assert text.spans == []


@pytest.mark.parametrize("width", [80, 100])
def test_a_full_check_table_splits_no_word(width: int) -> None:
    """Every kind of check the gate writes (long names and thresholds of the engine stages) at 80 and
    100 columns: narrow columns wrap between words, never inside one."""
    from eagle_convert.check.checks import TITLES, CheckResult, format_value
    from eagle_convert.check.policy import Policy
    from eagle_convert.check.run import CheckReport
    from eagle_convert.cli.render.check import render_check

    results = [
        CheckResult("static: warnings", "static", True, 0, "0 (allowed: W307)", "no warnings"),
        CheckResult("feature fc_norm", "features", True, "draft: yes, vLLM: yes", "required", "src:fc_norm"),
        CheckResult("engine load (strict)", "engine", True, "0 unwritten", "0 unwritten", "loaded 12 parameters"),
        CheckResult("per-position acceptance", "acceptance", True, "0.450 / 0.400 / 0.370", ">= 0.3 / 0.25 / 0.2", ""),
        CheckResult("AL category long-document", "acceptance", True, 1.09, ">= 1", "AL 1.09 over 2 requests"),
        CheckResult("repetition loops", "alarms", True, 0.125, "<= 25% of requests", "1 of 8 outputs end in a loop"),
        CheckResult("relative AL drop vs baseline", "baseline", True, 0.01, "<= 2.0%", "drop 0.05 (2.2%)"),
        CheckResult(
            "mixed batch (greedy next to sampled requests)",
            "identity",
            True,
            "0 of 8 differ",
            "0 (near-ties excused: top-2 logits within 2 bfloat16 ulps)",
            "8 of 8 prompts identical token for token",
        ),
        CheckResult("T->0 converges to greedy", "sampling", True, "0 of 2 differ", "0 at T=0.01", "identical"),
        CheckResult("drift: fed-back RMS growth", "drift", True, 1.5, "<= 3.0", "fed-back RMS grows 1.5x (depth 3)"),
    ]
    report = CheckReport(
        "demo-out/report/eagle31-finetuned", "demo-out/trained/target", None, Policy(), results=results
    )
    buf = io.StringIO()
    render_check(Console(file=buf, width=width, soft_wrap=False, color_system=None), report)
    text = buf.getvalue()
    assert [line for line in text.splitlines() if len(line.rstrip()) > width] == []
    shown = set(_BOX.sub(" ", text).split())
    fields = [(TITLES[r.stage], r.name, format_value(r.figure), format_value(r.threshold), r.message) for r in results]
    assert sorted({w for row in fields for f in row for w in f.split()} - shown) == []


def test_a_crafted_100000_character_tensor_name_is_shown_shortened(built_fixtures, tmp_path: Path) -> None:
    """Issue 33: the table renderer wrapped the name over a thousand lines; now it is shortened with
    its length (cli.output.shorten_long_words), in validate and check alike; --json keeps it whole."""
    import json
    import shutil
    import struct

    draft = tmp_path / "long"
    draft.mkdir()
    shutil.copy(built_fixtures("vllm-eagle3") / "config.json", draft / "config.json")
    header = json.dumps({"a" * 100_000: {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (draft / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    for args in (["validate", str(draft)], ["check", str(draft), "--keep-going"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1, res.output
        assert len(res.stdout) < 5000 and "characters)" in " ".join(res.stdout.split()), args
        assert _problems(res.stdout) == [], args
    res = CliRunner().invoke(main, ["validate", str(draft), "--json"])
    assert "a" * 100_000 in res.stdout
