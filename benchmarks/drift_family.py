"""`drift` side by side on the trained fixture pair: the EAGLE-3 draft and its three EAGLE-3.1 versions.

The family (`benchmarks.engine_share_bench.build_family`, built once into the work folder): the
trained EAGLE-3 draft (`fixtures.trained`), its identity upgrade (`upgrade`: fc_norm ones,
norm_output on), the calibrated upgrade (`upgrade --init calibrated`) and the calibrated draft
fine-tuned (`finetune --steps-all 20`). One `run_drift` on all four (the built-in prompts,
reference engine, greedy) at the built-in prompts' natural lengths and at a long bucket; prints a
table per bucket (depth 1 / mid / last: sink share, fed-back RMS, conditional acceptance) and the
verdicts, writes the JSON report and the PNG.

    python -m benchmarks.drift_family [--buckets natural,1024] [--depth 8] [--max-new-tokens 64]
        [--limit N] [--workdir DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.engine_share_bench import build_family

LABELS = ("EAGLE-3", "3.1 identity", "3.1 calibrated", "3.1 fine-tuned")


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def table(report) -> str:
    """Markdown: one row per draft x bucket, the depth-1, middle and last depth side by side."""
    from eagle_convert.drift.plot import bucket_rows
    from eagle_convert.measure import bucket_label

    depth = report.settings["depth"]
    picks = sorted({1, (depth + 1) // 2, depth})
    head = ["draft", "bucket"] + [f"{what} d{d}" for what in ("sink", "RMS", "acc") for d in picks] + ["verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in report.drafts:
        for bucket, rows in sorted(bucket_rows(d).items()):
            by = {r.depth: r for r in rows}
            cells = [d.label, bucket_label(bucket)]
            cells += [_fmt(by[p].sink) for p in picks]
            cells += [_fmt(by[p].fed_rms, ".3g") for p in picks]
            cells += [_fmt(by[p].acceptance) for p in picks]
            cells.append(d.verdict.status)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buckets", default="natural,1024")
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=None, help="prompts per category of the built-in set")
    ap.add_argument("--workdir", type=Path, default=None, help="where the family is built (reused)")
    ap.add_argument("--out", type=Path, default=Path("drift-family"), help="report.json, drift.png, table.md")
    args = ap.parse_args(argv)
    from eagle_convert.drift import plot_drift, run_drift
    from eagle_convert.measure import builtin_prompts, parse_buckets, select_prompts

    work = args.workdir or Path(tempfile.gettempdir()) / "eagle-convert-engine-share-bench"
    work.mkdir(parents=True, exist_ok=True)
    target, family = build_family(work)
    from fixtures.trained import build_trained_pair

    _, eagle3 = build_trained_pair(log=lambda _m: None)
    drafts = [eagle3, *family]
    prompts = select_prompts(builtin_prompts(), (), args.limit)
    report = run_drift(
        target,
        drafts,
        prompts=prompts,
        depth=args.depth,
        max_new_tokens=args.max_new_tokens,
        buckets=parse_buckets(args.buckets),
        device="cpu",
        progress=print,
    )
    # Labels by role (the folders are named draft, eagle31-identity, ...).
    report = replace(report, drafts=[replace(d, label=label) for d, label in zip(report.drafts, LABELS)])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report.to_dict()) + "\n")
    plot_drift(report, args.out / "drift.png")
    text = table(report)
    verdicts = "\n".join(f"- {d.label}: {d.verdict.text}" for d in report.drafts)
    (args.out / "table.md").write_text(text + "\n\n" + verdicts + "\n")
    print(text)
    print(verdicts)
    print(f"{report.seconds:.0f} s; {args.out / 'drift.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
