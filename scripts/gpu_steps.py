"""The GPU check's comparisons on the trained fixture pair: each library call on the CPU and on the
GPU, with the same inputs, and what may differ between them.

Float kernels differ between devices (reduction order, fused kernels), so every comparison states
its tolerance: counters at T=0 must be equal unless a near-tie explains them (a WARN that names it),
measured values within the bounds below.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpu_run import Outcome, Run, free_gpu, timed

ACC_TOLERANCE = 0.1  # per-step accuracy, GPU vs CPU after the same short schedule
TIE_GAP = 1e-2  # a top-2 logit gap below this is a tie that float kernels may break either way
# drift: shares of attention (0..1) and fed-back RMS, same tokens on both devices: fp32 sums in
# another order move them by ~1e-6; 2e-2 absolute (shares) and 2 % (RMS) leave room for TF32 or fused
# attention kernels while a device bug (a wrong mask, a lost norm) moves them by far more.
SHARE_TOLERANCE, RMS_TOLERANCE = 2e-2, 2e-2
# calibration: fc_norm values are medians of per-token RMS over the same tokens: 1e-3 relative.
CALIBRATION_TOLERANCE = 1e-3
# capture: aux states and logits of the same sequences, max |a - b| / rms(a): fp32, 1e-3.
CAPTURE_TOLERANCE = 1e-3


def vllm_version() -> str | None:
    """The installed vLLM's version, read without importing it; None where it is not installed."""
    from eagle_convert.vllm_model.features import vllm_available
    from eagle_convert.vllm_model.features import vllm_version as version

    if not vllm_available():
        return None
    return version() or "unknown version"


def prompts():  # noqa: ANN201 - list[Prompt]
    """The first built-in prompt of each category (coding, chat, reasoning, long document): every
    path of the prompt handling, quick to decode on the CPU run the GPU run is compared with."""
    from eagle_convert.measure.prompts import builtin_prompts, select_prompts

    return select_prompts(builtin_prompts(), limit=1)


def short_prompts(limit: int = 1):  # noqa: ANN201 - list[Prompt]
    """The first `limit` built-in coding and chat prompts: the runs that must stay short (the CPU's
    fine-tune, the captures, every step of the large pair)."""
    from eagle_convert.measure.prompts import builtin_prompts, select_prompts

    return select_prompts(builtin_prompts(), ("coding", "chat"), limit=limit)


def check_reference(run: Run, target: Path, drafts: list[Path]) -> Outcome:
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.smoke import run_smoke

    opts = MeasureOptions(engine="reference", k=3, max_new_tokens=32, temperature=0.0)
    cpu = run_smoke(target, drafts, opts, prompts=prompts(), device="cpu")
    gpu = run_smoke(target, drafts, opts, prompts=prompts(), device=run.device)
    als = " / ".join(f"{d.total.acceptance_length:.2f}" for d in gpu.drafts)
    n = len(gpu.prompts.prompts)
    for dc, dg in zip(cpu.drafts, gpu.drafts):
        for rc, rg in zip(dc.requests, dg.requests):
            if _counts(rc.counts) != _counts(rg.counts):
                why, tie = _why_differ(run, target, Path(dc.path), cpu.prompts.prompts, rc.prompt_id)
                status = "WARN" if tie else "FAIL"
                return Outcome(
                    f"reference engine on {run.device}",
                    status,
                    f"counters differ from the CPU run's for {dc.label} on request {rc.prompt_id} "
                    f"({_counts(rc.counts)} vs {_counts(rg.counts)}): {why}",
                )
    return Outcome(
        f"reference engine on {run.device}",
        "PASS",
        f"counters equal the CPU run's at T=0 ({len(drafts)} drafts x {n} requests); AL {als} "
        f"(EAGLE-3 / EAGLE-3.1 identity upgrade); {gpu.engine_version}",
        figures=smoke_figures(cpu, gpu),
    )


def smoke_figures(cpu, gpu) -> dict:  # noqa: ANN001 - two SmokeReports
    """AL per draft and seconds on each device, for the summary."""
    return {
        "al_cpu": [round(d.total.acceptance_length, 4) for d in cpu.drafts],
        "al_gpu": [round(d.total.acceptance_length, 4) for d in gpu.drafts],
        "seconds_cpu": round(cpu.seconds, 2),
        "seconds_gpu": round(gpu.seconds, 2),
    }


def _counts(c) -> tuple:  # noqa: ANN001 - smoke Counts or None
    return None if c is None else (c.num_drafts, c.num_accepted, tuple(c.accepted_per_pos))


def _why_differ(run: Run, target: Path, draft: Path, prepared, prompt_id: str) -> tuple[str, bool]:
    """Replay one request on both devices: where the target's greedy continuation first differs
    and how close its top-2 logits were on the CPU there (a tie float kernels may break either way)."""
    import torch

    from eagle_convert.reference.loop import greedy_generate
    from eagle_convert.reference.target import TargetModel

    ids = next(p.token_ids for p in prepared if p.id == prompt_id)
    conts = {}
    for dev in ("cpu", run.device):
        tgt = TargetModel.from_pretrained(target, device=dev)
        conts[dev] = greedy_generate(tgt, ids, 32)
    a, b = conts["cpu"], conts[run.device]
    j = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if j is None:
        return (
            "the target decodes the same tokens on both devices, so the drafts' proposals differ "
            "(drafter float kernels at a near-tie)",
            True,
        )
    tgt = TargetModel.from_pretrained(target, device="cpu")
    with torch.no_grad():
        logits = tgt.forward(torch.tensor([ids + a[:j]]), aux_ids=[]).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    gap = float(top[0] - top[1])
    tie = gap < TIE_GAP
    return (
        f"the target's greedy continuation differs at token {j} (CPU top-2 logit gap {gap:.2e}: "
        f"{'a near-tie that CPU and GPU float kernels break differently' if tie else 'not a tie'})",
        tie,
    )


def check_finetune(run: Run, target: Path, up: Path) -> Outcome:
    import torch

    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.run import finetune_draft
    from eagle_convert.validate.run import validate_checkpoint

    short = short_prompts()  # the CPU run must stay short too
    opts = FinetuneOptions(continuation_tokens=16, steps_fc_norm=8, steps_all=8)  # lr and l2sp: the defaults
    kw = dict(prompts=short, force=True)
    cpu = finetune_draft(up, target, run.work / "ft-cpu", opts, device="cpu", **kw)
    if run.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    gpu = finetune_draft(up, target, run.work / "ft-gpu", opts, device=run.device, **kw)
    peak = torch.cuda.max_memory_allocated() / 2**20 if run.device.startswith("cuda") else 0.0
    if run.device.startswith("cuda") and peak <= 0:
        return Outcome(
            f"finetune on {run.device}", "FAIL", "the GPU run allocated no CUDA memory: it trained on the CPU"
        )
    gap = max(abs(a - b) for a, b in zip(cpu.step_acc_after, gpu.step_acc_after))
    report = validate_checkpoint(run.work / "ft-gpu")
    fmt = lambda xs: "[" + ", ".join(f"{x:.2f}" for x in xs) + "]"  # noqa: E731
    detail = (
        f"step acc {fmt(gpu.step_acc_before)} -> {fmt(gpu.step_acc_after)} in {gpu.seconds:.0f}s "
        f"(CPU: {fmt(cpu.step_acc_before)} -> {fmt(cpu.step_acc_after)} in {cpu.seconds:.0f}s); "
        + (f"peak CUDA memory {peak:.0f} MiB; " if run.device.startswith("cuda") else "")
        + f"written draft validates: {not report.errors}"
    )
    losses = [getattr(r, k, 0.0) for r in (cpu, gpu) for k in ("loss_before", "loss_after")]
    finite = all(math.isfinite(x) for x in losses)
    ok = gap <= ACC_TOLERANCE and not report.errors and finite
    why = f"; largest per-step gap {gap:.3f} > {ACC_TOLERANCE}" if gap > ACC_TOLERANCE else ""
    return Outcome(
        f"finetune on {run.device}",
        "PASS" if ok else "FAIL",
        detail + why + ("" if finite else f"; a loss is not finite: {losses}"),
        figures={
            "step_acc_after_cpu": cpu.step_acc_after,
            "step_acc_after_gpu": gpu.step_acc_after,
            "loss_after_cpu": getattr(cpu, "loss_after", None),
            "loss_after_gpu": getattr(gpu, "loss_after", None),
            "seconds_cpu": round(cpu.seconds, 2),
            "seconds_gpu": round(gpu.seconds, 2),
        },
    )


def check_vllm(run: Run, target: Path, drafts: list[Path]) -> list[Outcome]:
    if vllm_version() is None:
        return [
            Outcome("vllm", "SKIP", "vLLM is not installed here: smoke --engine vllm and validate --load vllm not run")
        ]
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.smoke import run_smoke
    from eagle_convert.validate.run import validate_checkpoint

    out = []
    report = validate_checkpoint(drafts[1], target=target, load="vllm")
    engine = report.engine or {}
    applied = engine.get("applied") or {}
    ok = not report.errors and engine.get("ok") and applied.get("fc_norm") is True
    codes = sorted({f.code for f in report.errors})
    out.append(
        Outcome(
            "validate --load vllm",
            "PASS" if ok else "FAIL",
            f"EAGLE-3.1 upgrade {'loads' if engine.get('ok') else 'does not load'} in vLLM "
            f"{engine.get('vllm_version')}, fc_norm {applied.get('fc_norm')}, "
            f"{len(engine.get('unwritten') or [])} unwritten parameters" + (f"; errors {codes}" if codes else ""),
        )
    )
    free_gpu()
    k = 3
    rep = run_smoke(target, drafts, MeasureOptions(engine="vllm", k=k, max_new_tokens=32), prompts=prompts())
    out.append(vllm_smoke_outcome(rep, k))
    return out


def vllm_smoke_outcome(rep, k: int) -> Outcome:  # noqa: ANN001 - smoke SmokeReport
    """FAIL where a draft's counters cannot come from a working draft: no draft rounds at all means
    vLLM never speculated with it (or its counters were not read), and AL then reads 1.0 by
    definition; a round emits 1 to k + 1 tokens, so an AL outside [1, k + 1] is a counting bug."""
    als = " / ".join(f"{d.total.acceptance_length:.2f}" for d in rep.drafts)
    detail = f"AL {als} (EAGLE-3 / EAGLE-3.1 identity upgrade), {rep.engine_version}, {rep.seconds:.0f}s"
    bad = [
        f"{d.label}: no draft rounds" if d.total.num_drafts == 0 else f"{d.label}: AL outside [1, {k + 1}]"
        for d in rep.drafts
        if d.total.num_drafts == 0 or not 1.0 <= d.total.acceptance_length <= k + 1
    ]
    return Outcome("smoke --engine vllm", "FAIL" if bad else "PASS", "; ".join([detail, *bad]))


def check_drift(run: Run, target: Path, drafts: list[Path]) -> Outcome:
    """`drift` on both devices: the verdicts must agree, the shares and RMS by depth stay close."""
    from eagle_convert.drift import DriftOptions, run_drift

    kw = dict(depth=4, max_new_tokens=16)
    cpu = run_drift(target, drafts, DriftOptions(device="cpu", **kw), prompts=prompts())
    gpu = run_drift(target, drafts, DriftOptions(device=run.device, **kw), prompts=prompts())
    share_gap = rms_gap = 0.0
    bad: list[str] = []
    for dc, dg in zip(cpu.drafts, gpu.drafts):
        if dc.verdict.status != dg.verdict.status:
            bad.append(f"{dc.label}: verdict {dc.verdict.status} on the CPU, {dg.verdict.status} on {run.device}")
        for rc, rg in zip(dc.overall.depths, dg.overall.depths):
            for a, b in ((rc.sink, rg.sink), (rc.context, rg.context), (rc.own, rg.own)):
                if a is not None and b is not None:
                    share_gap = max(share_gap, abs(a - b))
            if rc.fed_rms and rg.fed_rms is not None:
                rms_gap = max(rms_gap, abs(rc.fed_rms - rg.fed_rms) / rc.fed_rms)
    values = [x for d in gpu.drafts for r in d.overall.depths for x in (r.sink, r.fed_rms) if x is not None]
    if not all(math.isfinite(x) for x in values):
        bad.append("a share or RMS is not finite")
    sinks = " / ".join(
        f"{d.verdict.sink_min if d.verdict.sink_min is not None else float('nan'):.3f}" for d in gpu.drafts
    )
    detail = (
        f"verdicts {' / '.join(d.verdict.status for d in gpu.drafts)} on both devices; lowest sink share {sinks}; "
        f"largest gap: share {share_gap:.2e}, fed-back RMS {rms_gap:.2%} in {gpu.seconds:.1f}s "
        f"(CPU {cpu.seconds:.1f}s)"
    )
    close = share_gap <= SHARE_TOLERANCE and rms_gap <= RMS_TOLERANCE
    status = "FAIL" if bad else "PASS" if close else "WARN"
    if not close and not bad:
        detail += f" (beyond {SHARE_TOLERANCE} / {RMS_TOLERANCE:.0%}: the decoded tokens may differ at a near-tie)"
    return Outcome(
        f"drift on {run.device}",
        status,
        "; ".join([detail, *bad]),
        figures={
            "share_gap": share_gap,
            "rms_gap": rms_gap,
            "verdicts": [d.verdict.status for d in gpu.drafts],
            "seconds_cpu": round(cpu.seconds, 2),
            "seconds_gpu": round(gpu.seconds, 2),
        },
    )


def calibrated_upgrade(draft: Path, target: Path, out: Path, device: str):  # noqa: ANN201
    """`upgrade --init calibrated` as the command composes it, the calibration on `device`:
    (the upgrade run, the calibration)."""
    from eagle_convert.finetune import calibrate_fc_norm
    from eagle_convert.upgrade import UpgradeOptions, upgrade_draft

    cals = []

    def calibrate(ckpt, plan):  # noqa: ANN001, ANN202
        cals.append(calibrate_fc_norm(ckpt, target, aux_ids=plan.aux.ids, release=plan.release, device=device))
        return cals[-1].norm_init()

    opts = UpgradeOptions(init="calibrated")
    run = upgrade_draft(draft, out, opts, target=target, force=True, calibrate=calibrate)
    return run, cals[0]


def check_calibrate(run: Run, target: Path, draft: Path) -> Outcome:
    """`upgrade --init calibrated` on both devices: the same fc_norm values, a valid output."""
    from eagle_convert.validate.run import validate_checkpoint

    (_, cpu), cpu_s = timed(lambda: calibrated_upgrade(draft, target, run.work / "cal-cpu", "cpu"))
    (_, gpu), gpu_s = timed(lambda: calibrated_upgrade(draft, target, run.work / "cal-gpu", run.device))
    gap = max(abs(a - b) / abs(a) for a, b in zip(cpu.values, gpu.values))
    agree = (cpu.agreement, gpu.agreement)
    report = validate_checkpoint(run.work / "cal-gpu")
    finite = all(math.isfinite(v) for v in gpu.values)
    ok = gap <= CALIBRATION_TOLERANCE and not report.errors and finite
    fmt = ", ".join(f"{v:.4g}" for v in gpu.values)
    detail = (
        f"fc_norm [{fmt}] on {gpu.device} ({gpu.tokens} tokens), largest relative gap to the CPU's {gap:.1e}; "
        f"held-out agreement {_pct(agree[1])} (CPU {_pct(agree[0])}); {gpu_s:.1f}s (CPU {cpu_s:.1f}s); "
        f"written draft validates: {not report.errors}"
    )
    return Outcome(
        f"upgrade --init calibrated on {run.device}",
        "PASS" if ok else "FAIL",
        detail if ok else f"{detail}; tolerance {CALIBRATION_TOLERANCE}",
        figures={
            "values_cpu": cpu.values,
            "values_gpu": gpu.values,
            "agreement": list(agree),
            "gap": gap,
            "seconds_cpu": cpu_s,
            "seconds_gpu": gpu_s,
        },
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def capture_on(device: str, draft: Path, target: Path, out: Path, n: int = 16):  # noqa: ANN201
    """`capture --engine reference` with the target loaded on `device` (the command's own choice is
    the GPU when torch sees one; the CPU run of the comparison names it)."""
    from eagle_convert.cache import CaptureOptions
    from eagle_convert.finetune import FinetuneOptions, capture_training_data
    from eagle_convert.reference import TargetModel, quiet_loading

    with quiet_loading():
        tgt = TargetModel.from_pretrained(target, device=device)
    short = short_prompts(limit=2)
    return capture_training_data(
        draft,
        target,
        out,
        FinetuneOptions(continuation_tokens=n),
        CaptureOptions(engine="reference"),
        prompts=short,
        force=True,
        reference_target=tgt,
    )


def check_capture(run: Run, target: Path, draft: Path) -> Outcome:
    """`capture --engine reference` on both devices: the same sequences, aux states and logits close."""
    cpu = capture_on("cpu", draft, target, run.work / "capture-cpu")
    gpu = capture_on(run.device, draft, target, run.work / "capture-gpu")
    gaps, same_ids, finite = compare_caches(run.work / "capture-cpu", run.work / "capture-gpu")
    worst = max(gaps.values(), default=0.0)
    detail = (
        f"{gpu.manifest.tokens} tokens in {len(gpu.manifest.shards)} shards, {gpu.tokens_per_s:.0f} tokens/s "
        f"(CPU {cpu.tokens_per_s:.0f}); sequences equal: {same_ids}; largest relative gap "
        + ", ".join(f"{k} {v:.1e}" for k, v in sorted(gaps.items()))
    )
    status = "FAIL" if not finite else "PASS" if same_ids and worst <= CAPTURE_TOLERANCE else "WARN"
    if status == "WARN":
        detail += f" (beyond {CAPTURE_TOLERANCE} or other sequences: a near-tie in the greedy continuation?)"
    if not finite:
        detail += "; a captured tensor is not finite"
    return Outcome(
        f"capture --engine reference on {run.device}",
        status,
        detail,
        figures={
            "gaps": gaps,
            "sequences_equal": same_ids,
            "tokens": gpu.manifest.tokens,
            "tokens_per_s_cpu": round(cpu.tokens_per_s, 1),
            "tokens_per_s_gpu": round(gpu.tokens_per_s, 1),
        },
    )


def compare_caches(a: Path, b: Path) -> tuple[dict[str, float], bool, bool]:
    """Per tensor kind (aux, logits), max |a - b| / rms(a) over every shard; whether the token ids
    are equal; whether every float in `b` is finite."""
    import torch
    from safetensors.torch import load_file

    gaps: dict[str, float] = {}
    same, finite = True, True
    files = sorted(p.name for p in a.glob("*.safetensors"))
    if files != sorted(p.name for p in b.glob("*.safetensors")):
        return gaps, False, True
    for name in files:
        ta, tb = load_file(str(a / name)), load_file(str(b / name))
        for key, x in ta.items():
            y = tb.get(key)
            kind = key.rsplit(".", 1)[-1]
            if y is None or x.shape != y.shape:
                same = False
                continue
            if not x.is_floating_point():  # token ids must be equal; argmax follows the logits' gap
                same = same and (kind != "ids" or bool(torch.equal(x, y)))
                continue
            finite = finite and bool(torch.isfinite(y).all())
            rms = float(x.float().pow(2).mean().sqrt()) or 1.0
            gaps[kind] = max(gaps.get(kind, 0.0), float((x.float() - y.float()).abs().max()) / rms)
    return gaps, same, finite
