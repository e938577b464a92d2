"""Reference-engine tokens/s at 1k and 32k context (issue 18, benchmarks).

What `smoke --engine reference --prompts long-context:1k,32k` spends per prompt: the torch reference
engine (`reference/loop.py::speculative_generate`) prefills the prompt through the target (aux
states captured) and through the drafter's first pass, then drafts k tokens and verifies them with
one target forward per round until `--max-new-tokens` are generated. Both phases are timed inside
that one call: the drafter's first forward returning ends the prefill (the loop's own boundary,
recorded by wrapping the two models' `forward`; on a GPU each boundary is synchronised), so a 32k
prefill runs once per repeat. Reported per context length: prefill tokens/s (prompt tokens over the
target's and the drafter's prefill), decode tokens/s (tokens generated after the first, over the
rest of the call) and AL, then the 32k / 1k ratios.

Threads: one by default (`--threads`). On the shared 2-core machine this was written on, torch's
default of two threads made the same 1k run 10-50x slower (prefill 5.0 s against 0.55 s, 16 new
tokens 16.4 s against 0.34 s at load ~4: each parallel region waits for a thread the other jobs
hold), so the default measures the engine, not the scheduler; `--threads 0` keeps torch's default.

The prompts are the long-context suite (`measure/longctx.py`: standard-library code and
`pydoc_data.topics` prose, cut to 99-100 % of N tokens of the fixture tokenizer): by default one
code prompt per length (`--suite long-code`), because one 32k prefill costs about 100 CPU-seconds
here; `--suite long-context` adds a prose prompt, `--prompts-per-length 2` a second of each. The pair is the trained fixture
(`fixtures/trained.py`: an 8-layer, hidden-256 Llama target and its EAGLE-3 draft). That target's
config says `max_position_embeddings` 4096, so `prepare_smoke_prompts` would skip the 32k prompts:
the benchmark measures on a copy of the target folder whose config.json says 32768 (weights and
tokenizer linked, not copied). HF Llama's default rope and the reference drafter compute their
angles from the positions, so nothing else changes; the draft's own config keeps 4096, which the
reference engine does not read (vLLM would refuse such a pair at 32k). The fixture's rule was
trained on short prompts, so its AL at 32k is a property of this toy pair, not a long-context claim.

    python -m benchmarks.refengine_bench [--lengths 1k,32k] [--suite long-code] [--max-new-tokens 16]
        [--repeat 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.timing import print_result
from eagle_convert.vllm_model import default_release

LONG_CONTEXT = 32768  # the copy's max_position_embeddings: a 32k prompt plus its new tokens fit


def long_context_target(target: Path, out: Path, max_positions: int = LONG_CONTEXT) -> Path:
    """`out`: `target`'s files linked, its config.json (`max_position_embeddings`) and
    tokenizer_config.json (`model_max_length`) rewritten with `max_positions` where smaller."""
    out.mkdir(parents=True, exist_ok=True)
    rewrite = {"config.json": "max_position_embeddings", "tokenizer_config.json": "model_max_length"}
    for f in target.iterdir():
        if f.name not in rewrite:
            os.symlink(f.resolve(), out / f.name)
            continue
        cfg = json.loads(f.read_text())
        key = rewrite[f.name]
        cfg[key] = max(int(cfg.get(key) or 0), max_positions)
        (out / f.name).write_text(json.dumps(cfg, indent=2) + "\n")
    return out


class PhaseClock:
    """Wraps a target's and a drafter's `forward` to record when each first returns after `start()`."""

    def __init__(self, target: Any, drafter: Any) -> None:
        import torch

        cuda = target.device.type == "cuda"
        self.sync = torch.cuda.synchronize if cuda else (lambda: None)
        self.t0 = 0.0
        self.marks: dict[str, float] = {}
        for name, obj in (("target", target), ("draft", drafter)):
            obj.forward = self._wrap(name, obj.forward)  # instance attribute: shadows the method

    def _wrap(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            if name not in self.marks:
                self.sync()
                self.marks[name] = time.perf_counter() - self.t0
            return out

        return timed

    def start(self) -> None:
        self.sync()
        self.marks, self.t0 = {}, time.perf_counter()


def _measure(target: Any, drafter: Any, clock: PhaseClock, ids: list[int], args: Any, aux: Any) -> dict[str, Any]:
    from eagle_convert.reference.loop import speculative_generate

    clock.start()
    r = speculative_generate(target, drafter, ids, k=args.k, max_new_tokens=args.max_new_tokens, aux_ids=aux)
    clock.sync()
    total = time.perf_counter() - clock.t0
    prefill = clock.marks["draft"]
    return {
        "prompt_tokens": len(ids),
        "generated_tokens": len(r.tokens),
        "target_prefill_s": clock.marks["target"],
        "prefill_s": prefill,
        "decode_s": total - prefill,
        "rounds": r.num_drafts,
        "accepted": r.num_accepted,
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(x[key] for x in runs)

    prompt = sum(x["prompt_tokens"] for x in runs)
    prefill = sum(x["prefill_s"] for x in runs)
    decoded = sum(x["generated_tokens"] - 1 for x in runs)  # the first token comes from the prefill
    decode = sum(x["decode_s"] for x in runs)
    rounds = sum(x["rounds"] for x in runs)
    return {
        "prompts": len({x["id"] for x in runs}),
        "runs": len(runs),
        "prompt_tokens_median": int(med("prompt_tokens")),
        "prefill_tokens_per_s": round(prompt / prefill, 1),
        "target_share_of_prefill": round(sum(x["target_prefill_s"] for x in runs) / prefill, 3),
        "decode_tokens_per_s": round(decoded / decode, 2),
        "acceptance_length": round(1 + sum(x["accepted"] for x in runs) / max(rounds, 1), 3),
        "prefill_s_median": round(med("prefill_s"), 3),
        "decode_s_median": round(med("decode_s"), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1k,32k", help="long-context lengths (as --prompts long-context:...)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("-k", "--k", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each prompt (sums over runs)")
    parser.add_argument("--suite", choices=("long-code", "long-prose", "long-context"), default="long-code")
    parser.add_argument("--prompts-per-length", type=int, choices=(1, 2), default=1, help="per kind (code, prose)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default, one per core)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch

    if args.threads > 0:  # on a shared 2-core machine 2 threads wait on each other: 1k decode 16 s vs 0.3 s
        torch.set_num_threads(args.threads)
    from eagle_convert.measure import prepare_smoke_prompts, resolve_suite
    from eagle_convert.reference import TargetModel, load_drafter, quiet_loading, speculative_generate
    from eagle_convert.vllm_model import default_aux_ids
    from fixtures.trained import build_trained_pair

    t_setup = time.perf_counter()
    target_dir, draft_dir = build_trained_pair(log=lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="refengine-bench-") as tmp:
        tdir = long_context_target(target_dir, Path(tmp) / "target")
        suite = replace(resolve_suite(f"{args.suite}:{args.lengths}"), long_per_length=args.prompts_per_length)
        pset = prepare_smoke_prompts(tdir, suite, k=args.k, max_new_tokens=args.max_new_tokens)
        prep_s = time.perf_counter() - t_setup
        with quiet_loading():
            target = TargetModel.from_pretrained(tdir, device=args.device)
        drafter = load_drafter(
            draft_dir,
            default_release(),
            target_embed=target.embed_weight,
            target_lm_head=target.lm_head_weight,
            device=target.device,
        )
        aux = tuple(drafter.cfg.aux_layer_ids or default_aux_ids(target.num_layers))
        speculative_generate(target, drafter, pset.prompts[0].token_ids[:32], k=args.k, max_new_tokens=2, aux_ids=aux)
        clock = PhaseClock(target, drafter)
        by_len: dict[int, list[dict[str, Any]]] = {}
        for p in pset.prompts:
            for _ in range(args.repeat):
                run = _measure(target, drafter, clock, list(p.token_ids), args, aux)
                by_len.setdefault(p.bucket, []).append({"id": p.id, **run})
                print(f"{p.id}: {run['prompt_tokens']} tokens, prefill {run['prefill_s']:.2f} s, "
                      f"decode {run['decode_s']:.2f} s", file=sys.stderr)  # fmt: skip
    lengths = {str(n): _summary(runs) for n, runs in sorted(by_len.items())}
    result: dict[str, Any] = {
        "engine": f"reference (torch {torch.__version__} on {args.device}, fp32), {torch.get_num_threads()} thread(s)",
        "pair": "fixtures/trained.py (8-layer hidden-256 Llama target, max_position_embeddings raised to "
        f"{LONG_CONTEXT} in a linked copy)",
        "python": sys.version.split()[0],
        "suite": f"{args.suite}:{args.lengths}, {args.prompts_per_length} per kind and length",
        "k": args.k,
        "max_new_tokens": args.max_new_tokens,
        "repeat": args.repeat,
        "prompt_preparation_s": round(prep_s, 2),
        "lengths": lengths,
    }
    keys = sorted(by_len)
    if len(keys) >= 2:
        lo, hi = lengths[str(keys[0])], lengths[str(keys[-1])]
        result[f"ratio_{keys[-1] // 1000}k_over_{keys[0] // 1000}k"] = {
            "prefill_tokens_per_s": round(hi["prefill_tokens_per_s"] / lo["prefill_tokens_per_s"], 3),
            "decode_tokens_per_s": round(hi["decode_tokens_per_s"] / lo["decode_tokens_per_s"], 3),
        }
    print_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
