"""The GPU check at a published draft's size: an 8B-shaped EAGLE-3 draft against a ~2B random target.

Shape "8b" is Llama-3.1-8B's draft (hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab
128256, a 32000-token draft vocabulary: `fixtures.drafts.build_draft`) and a 4-layer target of the
same width (1.9B parameters), random, written in bf16. The reference engine computes in fp32 (its
own precision, on every device). Shape "small" is the same code at toy size, for the CPU self-test.

Random weights accept almost nothing, so the acceptance lengths sit near 1; what this measures is
that every step runs at this size on the device, its time and peak memory, and (smoke) that the GPU
counts as the CPU does.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpu_run import Outcome, Run, timed

SHAPES = {
    "8b": dict(hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab_size=128256, draft_vocab_size=32000),
    "small": dict(hidden=256, heads=4, kv_heads=2, intermediate=512, vocab_size=8192, draft_vocab_size=2048),
}
TARGET_LAYERS, AUX_IDS = 4, (1, 2, 3)
AL_TOLERANCE = 0.1  # random weights: counters equal unless a near-tie flips one acceptance


def build_large_pair(work: Path, shape: str, device: str, seed: int = 0) -> tuple[Path, Path]:
    """(target, draft) folders of `shape` under `work` (the target's tensors drawn on `device`)."""
    from fixtures.drafts import DraftSpec, build_draft

    dims = SHAPES[shape]
    target = _build_target(work / f"large-{shape}" / "target", dims, device, seed)
    spec = DraftSpec(
        hidden=dims["hidden"],
        heads=dims["heads"],
        kv_heads=dims["kv_heads"],
        intermediate=dims["intermediate"],
        vocab_size=dims["vocab_size"],
        draft_vocab_size=dims["draft_vocab_size"],
        target_layers=TARGET_LAYERS,
        aux_ids=AUX_IDS,
        seed=seed,
    )
    draft = build_draft(work / f"large-{shape}" / "draft", spec)
    return target, draft


def _build_target(out: Path, dims: dict[str, int], device: str, seed: int) -> Path:
    """A random Llama target with the fixture tokenizer; lm_head rows past the tokenizer are zero, so
    greedy decoding stays on tokens the tokenizer can print."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    from fixtures.target import BOS, EOT, PAD, TOKENIZER_VOCAB_SIZE, build_tokenizer

    h, i, v = dims["hidden"], dims["intermediate"], dims["vocab_size"]
    kv = dims["kv_heads"] * (h // dims["heads"])
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int, std: float = 0.02) -> torch.Tensor:
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std
        return x.to(torch.bfloat16).cpu()

    ones = torch.ones(h, dtype=torch.bfloat16)
    tensors = {"model.embed_tokens.weight": randn(v, h, std=0.05), "model.norm.weight": ones}
    for n in range(TARGET_LAYERS):
        p = f"model.layers.{n}."
        tensors |= {
            p + "input_layernorm.weight": ones.clone(),
            p + "post_attention_layernorm.weight": ones.clone(),
            p + "self_attn.q_proj.weight": randn(h, h),
            p + "self_attn.k_proj.weight": randn(kv, h),
            p + "self_attn.v_proj.weight": randn(kv, h),
            p + "self_attn.o_proj.weight": randn(h, h),
            p + "mlp.gate_proj.weight": randn(i, h),
            p + "mlp.up_proj.weight": randn(i, h),
            p + "mlp.down_proj.weight": randn(h, i),
        }
    head = randn(v, h, std=0.05)
    head[TOKENIZER_VOCAB_SIZE:] = 0
    tensors["lm_head.weight"] = head
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer = build_tokenizer()
    LlamaConfig(
        vocab_size=v,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=TARGET_LAYERS,
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"],
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids(BOS),
        eos_token_id=tokenizer.convert_tokens_to_ids(EOT),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        dtype="bfloat16",
    ).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def run_large(run: Run, shape: str) -> None:
    """Build the pair, then each step on the device, one timed check each (smoke also on the CPU)."""
    label, paths = f"{shape} pair", []

    def build() -> Outcome:
        pair, s = timed(lambda: build_large_pair(run.work, shape, run.device))
        paths.extend(pair)
        n_t, n_d = _params(pair[0]), _params(pair[1])
        return Outcome(
            f"{label}: build",
            "PASS",
            f"target {n_t / 1e9:.2f}B parameters, draft {n_d / 1e9:.2f}B (bf16 on disk) in {s:.0f}s",
            figures={"target_params": n_t, "draft_params": n_d},
        )

    run.check(f"{label}: build", build)
    if len(paths) != 2:
        return
    target, draft = paths
    up = run.work / f"large-{shape}" / "eagle31"
    steps = (
        ("upgrade --init calibrated", lambda: _calibrate(run, draft, target, up)),
        ("smoke --engine reference", lambda: _smoke(run, target, [draft, up])),
        ("drift", lambda: _drift(run, target, [draft, up])),
        ("finetune", lambda: _finetune(run, target, up)),
        ("capture --engine reference", lambda: _capture(run, target, draft)),
    )
    for step, fn in steps:
        name = f"{label}: {step} on {run.device}"
        run.check(name, fn)  # each step's Outcome leaves its name to the check


def _params(folder: Path) -> int:
    from safetensors import safe_open

    n = 0
    for f in folder.glob("*.safetensors"):
        with safe_open(str(f), framework="pt") as h:
            for k in h.keys():  # noqa: SIM118 - safe_open is no mapping
                n += math.prod(h.get_slice(k).get_shape())
    return n


def _calibrate(run: Run, draft: Path, target: Path, up: Path) -> Outcome:
    from gpu_steps import calibrated_upgrade

    (_, cal), s = timed(lambda: calibrated_upgrade(draft, target, up, run.device))
    ok = all(math.isfinite(v) and v > 0 for v in cal.values)
    vals = ", ".join(f"{v:.4g}" for v in cal.values)
    return Outcome(
        "",
        "PASS" if ok else "FAIL",
        f"fc_norm [{vals}] from {cal.tokens} tokens in {s:.1f}s",
        figures={"values": cal.values, "tokens": cal.tokens, "seconds": s},
    )


def _smoke(run: Run, target: Path, drafts: list[Path]) -> Outcome:
    from gpu_steps import short_prompts

    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.smoke import run_smoke

    k = 3
    opts = MeasureOptions(engine="reference", k=k, max_new_tokens=16, temperature=0.0)
    short = short_prompts()
    gpu = run_smoke(target, drafts, opts, prompts=short, device=run.device)
    cpu = run_smoke(target, drafts, opts, prompts=short, device="cpu")
    al_g = [d.total.acceptance_length for d in gpu.drafts]
    al_c = [d.total.acceptance_length for d in cpu.drafts]
    gap = max(abs(a - b) for a, b in zip(al_c, al_g))
    possible = all(1.0 <= a <= k + 1 for a in al_g) and all(d.total.num_drafts > 0 for d in gpu.drafts)
    tok_s = [d.total.generated_tokens / d.total.seconds for d in gpu.drafts if d.total.seconds]
    detail = (
        f"AL {' / '.join(f'{a:.2f}' for a in al_g)} (CPU {' / '.join(f'{a:.2f}' for a in al_c)}; EAGLE-3 / "
        f"calibrated EAGLE-3.1), {', '.join(f'{t:.1f}' for t in tok_s)} tokens/s; {gpu.seconds:.1f}s (CPU {cpu.seconds:.1f}s)"
    )
    status = "FAIL" if not possible else "PASS" if gap <= AL_TOLERANCE else "WARN"
    return Outcome(
        "",
        status,
        detail + ("" if possible else "; an AL outside [1, k + 1] or no draft rounds"),
        figures={
            "al_gpu": al_g,
            "al_cpu": al_c,
            "tokens_per_s_gpu": tok_s,
            "seconds_gpu": round(gpu.seconds, 2),
            "seconds_cpu": round(cpu.seconds, 2),
        },
    )


def _drift(run: Run, target: Path, drafts: list[Path]) -> Outcome:
    from gpu_steps import short_prompts

    from eagle_convert.drift import DriftOptions, run_drift

    short = short_prompts()
    rep = run_drift(target, drafts, DriftOptions(device=run.device, depth=4, max_new_tokens=16), prompts=short)
    rms = [r.fed_rms for d in rep.drafts for r in d.overall.depths if r.fed_rms is not None]
    ok = bool(rms) and all(math.isfinite(x) for x in rms)
    return Outcome(
        "",
        "PASS" if ok else "FAIL",
        f"verdicts {' / '.join(d.verdict.status for d in rep.drafts)}; {len(rms)} depth rows, finite: {ok}; "
        f"{rep.seconds:.1f}s",
        figures={"seconds": round(rep.seconds, 2)},
    )


def _finetune(run: Run, target: Path, up: Path) -> Outcome:
    from gpu_steps import short_prompts

    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.run import finetune_draft

    short = short_prompts()
    opts = FinetuneOptions(continuation_tokens=16, steps_fc_norm=4, steps_all=4)
    res = finetune_draft(up, target, run.work / "large-ft", opts, device=run.device, prompts=short, force=True)
    train = [x for st in res.stages for x in st.losses]  # every training step's loss, both stages
    ok = bool(train) and all(math.isfinite(x) for x in [*train, res.loss_before, res.loss_after])
    return Outcome(
        "",
        "PASS" if ok else "FAIL",
        f"training loss {train[0] if train else float('nan'):.3f} -> {train[-1] if train else float('nan'):.3f} "
        f"over {len(train)} steps (finite: {ok}), {res.tokens} tokens; {res.seconds:.1f}s",
        figures={"train_losses": train, "seconds": round(res.seconds, 2)},
    )


def _capture(run: Run, target: Path, draft: Path) -> Outcome:
    from gpu_steps import capture_on, compare_caches

    out = run.work / "large-capture"
    res = capture_on(run.device, draft, target, out)
    _, _, finite = compare_caches(out, out)  # the cache against itself: whether every captured float is finite
    return Outcome(
        "",
        "PASS" if finite else "FAIL",
        f"{res.manifest.tokens} tokens, {res.tokens_per_s:.0f} tokens/s, {res.bytes_per_token / 1024:.0f} KiB "
        f"per token, finite: {finite}; {res.seconds:.1f}s",
        figures={"tokens_per_s": round(res.tokens_per_s, 1), "seconds": round(res.seconds, 2)},
    )
