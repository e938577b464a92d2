"""Prompt-suite preparation time for 32k-token prompts (issue 18, benchmarks).

What `smoke --prompts long-context:32k` does before any engine starts: read the corpora (the
standard library's sources, `pydoc_data.topics`), cut 2 code + 2 prose prompts to 31,680..32,000
tokens of the target's tokenizer (chat template included), then `prepare_prompts` renders and
tokenizes them for the engines. Beside it, for scale, today's filler bucket: the 15 built-in
prompts padded to 32,000 tokens of filler (`--buckets 32000`).

The tokenizer is the fixture target's 4096-token byte-level BPE (about 1.8 characters per token on
code, so a 32k prompt is about 58 kB of text) unless `--tokenizer` names a folder with a real one.

    python -m benchmarks.suite_bench [--repeat 3] [--tokenizer DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.timing import median_seconds, print_result

LENGTH = 32000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--tokenizer", type=Path, default=None, help="a folder with a tokenizer (default: the fixture's)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from eagle_convert.measure.prepare import long_rows, token_counter
    from eagle_convert.measure.prompts import builtin_prompts, prepare_prompts
    from eagle_convert.measure.suites import resolve_suite

    if args.tokenizer is None:
        from fixtures.target import build_tokenizer

        tok, tok_label = build_tokenizer(), "fixture byte-level BPE (4096 tokens)"
    else:
        from transformers import AutoTokenizer

        tok, tok_label = AutoTokenizer.from_pretrained(args.tokenizer), str(args.tokenizer)
    tok.model_max_length = 10**6  # no "longer than the maximum" warning in the timings

    calls = [0]
    count = token_counter(tok)

    def counted(text: str) -> int:
        calls[0] += 1
        return count(text)

    def suite() -> None:
        calls[0] = 0
        rows, lengths = long_rows(resolve_suite(f"long-context:{LENGTH // 1000}k"), counted)
        pset = prepare_prompts(rows.prompts, tok)
        assert all(0.99 * LENGTH <= p.num_tokens <= LENGTH for p in pset.prompts), [p.num_tokens for p in pset.prompts]

    def filler() -> None:
        prepare_prompts(builtin_prompts(), tok, buckets=[LENGTH])

    t0 = time.perf_counter()
    suite()
    first = time.perf_counter() - t0
    counts_per_run = calls[0]
    suite_s = median_seconds(suite, args.repeat)
    filler_s = median_seconds(filler, max(1, args.repeat // 2))
    result = {
        "tokenizer": tok_label,
        "python": sys.version.split()[0],
        "length_tokens": LENGTH,
        "long_context_prompts": 4,
        "long_context_first_s": round(first, 3),
        "long_context_median_s": round(suite_s, 3),
        "long_context_per_prompt_s": round(suite_s / 4, 3),
        "token_counts_per_run": counts_per_run,
        "filler_bucket_prompts": len(builtin_prompts()),
        "filler_bucket_median_s": round(filler_s, 3),
        "filler_bucket_per_prompt_s": round(filler_s / len(builtin_prompts()), 3),
    }
    print_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
