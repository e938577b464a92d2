"""report's text outputs from recorded data, no engine: report.md's category and drift tables and
the terminal's side-by-side table at 80 columns (issue 33)."""

from __future__ import annotations

from types import SimpleNamespace

try:
    from tests import plotdata
except ImportError:  # tests/ itself on sys.path
    import plotdata  # type: ignore[no-redef]

LABELS = list(plotdata.LABELS)


def test_category_table_repeats_no_row() -> None:
    """A category measured in one bucket only, and a bucket holding one category only, get no
    'across' row: it would repeat the row above (the demo's long-context prompts sit in ~1000)."""
    from eagle_convert.report.markdown import _groups

    lines = _groups(plotdata.smoke_report().to_dict())
    rows = [tuple(c.strip() for c in line.strip("|").split("|")) for line in lines[2:] if line]
    keys = [r[:2] for r in rows]
    assert keys == [
        ("coding", "natural"),
        ("chat", "natural"),
        ("math", "natural"),
        ("summarization", "natural"),
        ("long-code", "~1000 tokens"),
        ("long-prose", "~1000 tokens"),
        ("all", "natural"),
        ("all", "~1000 tokens"),
    ]
    assert rows[-2][2] == "8" and rows[-1][2] == "2"  # runs: every prompt of the bucket


def test_drift_tables_have_sample_counts() -> None:
    from eagle_convert.report.markdown import _drift

    lines = _drift(plotdata.drift_report().to_dict(), 3)
    head = next(line for line in lines if line.startswith("| depth"))
    assert head == (
        "| depth | n (draft passes) | sink share | own share | fed-back RMS | conditional acceptance (accepted / reached) |"
    )
    assert "| 1 | 20 | 0.03 | 0.10 | 1 | 0.75 (30 / 40) |" in lines


def test_report_md_shows_al_png() -> None:
    """Every PNG report writes is shown in report.md (al.png was written and referenced nowhere)."""
    import re

    from eagle_convert.report import markdown
    from eagle_convert.report.plots import PLOTS

    source = open(markdown.__file__).read()
    shown = set(re.findall(r"\]\(([a-z]+\.png)\)", source))
    assert set(PLOTS) <= shown


def _report_data(names: list[str], k: int) -> dict:
    return {
        "draft": "demo-out/trained/draft",
        "target": "demo-out/trained/target",
        "acceptance": {
            "settings": {"k": k, "temperature": 0.0, "max_new_tokens": 32},
            "engine": "reference",
            "engine_version": "torch 2.8.0 on cpu",
            "prompts": {"count": 12},
            "drafts": [
                {
                    "label": n,
                    "variant": "EAGLE-3" if i == 0 else "EAGLE-3.1",
                    "total": {"acceptance_length": 3.1 + i / 10, "per_position": [0.8] * k},
                }
                for i, n in enumerate(names)
            ],
            "throughput": None,
        },
        "ran": ["smoke"],
        "skipped": [],
        "seconds": 100.0,
        "variants": [{"name": n, "validate": {"ok": i != 2, "errors": 2}} for i, n in enumerate(names)],
        "checks": [],
        "drift": None,
        "throughput_note": "no throughput measured",
        "notes": [],
    }


def test_terminal_table_keeps_variant_names_at_80_columns() -> None:
    from rich.console import Console

    from eagle_convert.cli.render.report import render_report

    long = "eagle31-finetuned-from-calibrated"  # 33 characters
    for k, names in ((3, ["eagle3", "eagle31-identity", "eagle31-calibrated", long]), (5, LABELS)):
        console = Console(width=80, record=True, force_terminal=False)
        render_report(console, SimpleNamespace(data=_report_data(names, k)))
        out = console.export_text()
        assert "…" not in out, out
        rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0].startswith("eagle3")]
        assert [r[0] for r in rows] == names, out
        assert [r[2] for r in rows] == ["3", "3.1", "3.1", "3.1"], out  # the kind, whole
        assert max(len(line) for line in out.splitlines()) <= 80
