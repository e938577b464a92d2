"""Capture throughput, cache size, and training from the cache vs online (issue 20's benchmark).

On the trained fixture pair and N corpus prompts (rendered and continued as `finetune` does):

    reference   capture tokens/s with the torch reference target (fp32, 1 thread by default)
    vllm        capture tokens/s with vLLM against vLLM's own prefill tokens/s on the same sequences
                without the hooks (`capture_shard(hooks=False)`, the same engine): the ratio is what
                taking the states out costs (skipped without vLLM, or with --no-vllm)
    bytes       cache bytes per token
    training    train_draft steps/s (the same steps, batch 8 and seed) from the cache vs from the
                live reference target (its one forward over the data is part of the online cost),
                and trained tokens/s (positions the loss scores per step, each sample's last 128)
    parallel    the same training from the cache over `--nproc` gloo processes
                (`finetune/distributed.py`; each rank --threads threads) against one process

    python -m benchmarks.capture_bench [--prompts 16] [--continuation 32] [--steps 10] [--nproc 2]
        [--no-vllm] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from eagle_convert.vllm_model import default_release


def _data(n: int, work: Path) -> Path:
    from fixtures.corpus_prompts import corpus_prompts

    p = work / "prompts.jsonl"
    p.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in corpus_prompts(n, seed=5)))
    return p


def _train_rate(source: Any, drafter_of: Any, seqs: list[list[int]], steps: int) -> float:
    from eagle_convert.reference import train_draft

    drafter = drafter_of()
    t0 = time.perf_counter()
    train_draft(source, drafter, seqs, aux_ids=[1, 3, 6], steps=steps, lr=1e-4, batch_size=8, seed=0, max_len=128)
    return steps / (time.perf_counter() - t0)  # optimizer steps per second, target features included


def _trained_tokens(seqs: list[list[int]], steps: int, max_len: int = 128) -> int:
    """Positions trained over `steps` steps of batch 8, seed 0: the batches `train_draft` draws."""
    import torch

    gen = torch.Generator().manual_seed(0)
    return sum(
        min(len(seqs[i]), max_len) for _ in range(steps) for i in torch.randperm(len(seqs), generator=gen)[:8].tolist()
    )


def _parallel_rate(
    cache: Path, draft: Path, drafter_of: Any, seqs: list[list[int]], steps: int, nproc: int
) -> tuple[float, float]:
    """Steps/s of the same training over `nproc` gloo processes: (spawning, the job's broadcast and
    joining included; the training steps alone)."""
    from eagle_convert.cache import CachedTarget
    from eagle_convert.finetune.distributed import job_for, launch, send
    from eagle_convert.reference import train_draft

    kw = dict(aux_ids=[1, 3, 6], steps=steps, lr=1e-4, batch_size=8, seed=0, max_len=128)
    config = json.loads((draft / "config.json").read_text())
    drafter, source = drafter_of(), CachedTarget(cache)
    t0 = time.perf_counter()
    with launch(nproc, "cpu") as ranks:
        send(ranks, job_for(cache, drafter, config, seqs, [kw]))
        t1 = time.perf_counter()
        train_draft(source, drafter, seqs, parallel=ranks, cache_target=False, **kw)
        t2 = time.perf_counter()
    return steps / (time.perf_counter() - t0), steps / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--continuation", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--nproc", type=int, default=2, help="data-parallel processes (0: skip)")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from eagle_convert.cache import CachedTarget, CaptureOptions
    from eagle_convert.finetune import FinetuneOptions, capture_training_data
    from eagle_convert.reference import TargetModel, load_drafter
    from eagle_convert.vllm_model import vllm_available
    from fixtures.trained import build_trained_pair

    torch.set_num_threads(args.threads)
    target, draft = build_trained_pair(log=lambda _m: None)
    out: dict[str, Any] = {"prompts": args.prompts, "continuation_tokens": args.continuation, "threads": args.threads}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = FinetuneOptions(prompts=str(_data(args.prompts, work)))
        data = FinetuneOptions(prompts=data.prompts, continuation_tokens=args.continuation)
        tgt = TargetModel.from_pretrained(target, device="cpu")
        ref = capture_training_data(
            draft, target, work / "ref", data, CaptureOptions("reference", shard_size=8), reference_target=tgt
        )
        out["reference"] = {
            "tokens": ref.tokens,
            "seconds": round(ref.seconds, 3),
            "tokens_per_s": round(ref.tokens_per_s),
        }
        out["bytes_per_token"] = {"reference_fp32": round(ref.bytes_per_token)}
        cache = CachedTarget(work / "ref")
        seqs = cache.sequences()

        def drafter():
            return load_drafter(
                draft, default_release(), target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight
            )

        online, cached = _train_rate(tgt, drafter, seqs, args.steps), _train_rate(cache, drafter, seqs, args.steps)
        out["training_steps_per_s"] = {
            "online": round(online, 2),
            "cache": round(cached, 2),
            "cache_over_online": round(cached / online, 3),
        }
        per_step = _trained_tokens(seqs, args.steps) / args.steps
        out["training_tokens_per_s"] = {"online": round(online * per_step), "cache": round(cached * per_step)}
        if args.nproc > 1:
            whole, steps_only = _parallel_rate(work / "ref", draft, drafter, seqs, args.steps, args.nproc)
            out["parallel"] = {
                "nproc": args.nproc,
                "threads_per_rank": args.threads,
                "cache_tokens_per_s": round(steps_only * per_step),
                "over_one_process": round(steps_only / cached, 3),
                "with_startup_tokens_per_s": round(whole * per_step),
                "note": "gloo on the CPU; with_startup adds spawning the ranks, the job's broadcast and joining",
            }
        if vllm_available() and not args.no_vllm:
            from eagle_convert.vllm import EngineSession

            opts = CaptureOptions("vllm", shard_size=8, max_model_len=max(map(len, seqs)) + 8)
            with EngineSession() as s:
                got = capture_training_data(draft, target, work / "vllm", data, opts, session=s)
                vseqs = CachedTarget(work / "vllm").sequences()
                t0 = time.perf_counter()
                plain = s.capture_shard(
                    target,
                    [(f"s{i}", q) for i, q in enumerate(vseqs)],
                    aux_ids=[],
                    rows=None,
                    path=work / "unused",
                    metadata={},
                    hooks=False,
                    max_model_len=opts.max_model_len,
                )
                plain_s = time.perf_counter() - t0
                starts = s.engine_starts
            prefill_rate = plain["tokens"] / plain_s
            out["vllm"] = {
                "tokens": got.tokens,
                "capture_tokens_per_s": round(got.tokens_per_s),
                "prefill_tokens_per_s": round(prefill_rate),
                "capture_over_prefill": round(got.tokens_per_s / prefill_rate, 3),
                "engine_starts": starts,
                "note": "capture time includes writing and hashing shards; prefill is the same engine, hooks off",
            }
            out["bytes_per_token"]["vllm"] = round(got.bytes_per_token)
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
