"""Write eagle_convert/data/spec_bench_sample.jsonl from Spec-Bench's question.jsonl.

    python scripts/make_specbench_sample.py PATH/TO/Spec-Bench/data/spec_bench/question.jsonl

The sample is stratified: five rows per category, evenly spaced over the category's rows in file
order (indices round(i * n / 5), i = 0..4), and only from categories whose source licence allows
redistribution (`eagle_convert/measure/specbench.py`, `SOURCES`; the rest are left out and named in
`eagle_convert/data/NOTICE`). Each row keeps Spec-Bench's `question_id`, `category` and `turns`
verbatim and adds its provenance (`source`, `license`, `origin`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eagle_convert.measure.specbench import SAMPLE_FILE, SOURCES, SPEC_BENCH_COMMIT, SPEC_BENCH_PATH

PER_CATEGORY = 5


def main(argv: list[str]) -> int:
    rows = [json.loads(line) for line in Path(argv[0]).read_text(encoding="utf-8").splitlines() if line.strip()]
    by_cat: dict[str, list[dict]] = {}
    for row in rows:
        by_cat.setdefault(row["category"], []).append(row)
    out = []
    for cat, cat_rows in by_cat.items():
        src = SOURCES[cat]
        if src.license is None:
            continue
        n = len(cat_rows)
        for i in range(PER_CATEGORY):
            row = cat_rows[round(i * n / PER_CATEGORY)]
            out.append(
                {
                    "question_id": row["question_id"],
                    "category": cat,
                    "turns": row["turns"],
                    "source": src.name,
                    "license": src.license,
                    "origin": f"hemingkx/Spec-Bench@{SPEC_BENCH_COMMIT} {SPEC_BENCH_PATH} question_id {row['question_id']}",
                }
            )
    dest = Path(__file__).resolve().parent.parent / "eagle_convert" / "data" / SAMPLE_FILE
    dest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    print(f"{dest}: {len(out)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
