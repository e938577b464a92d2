"""GPU check: run eagle-convert's GPU branches end to end on the fixtures and print one summary.

    make gpu-check                          # or: PYTHONPATH=. python scripts/gpu_check.py
    python scripts/gpu_check.py --only reference --only finetune --budget-s 300

On a machine with an NVIDIA GPU it checks, in this order (under 8 minutes on one GPU):

1. **reference engine on cuda**: `smoke --engine reference` on the CPU and on the GPU, on the
   trained fixture pair (`fixtures/trained.py`: a tiny target and an EAGLE-3 draft trained for it)
   and its EAGLE-3.1 upgrade, at temperature 0. The acceptance counters must be equal; where they
   are not, the first request that differs is replayed to say why (the target's greedy
   continuations diverge at a near-tie of two logits, or the drafts' proposals do).
2. **finetune on cuda**: `finetune` of the upgrade, a short schedule, on the CPU and on the GPU:
   both must finish and write a draft that reloads; the GPU's per-step accuracies must stay within
   0.1 of the CPU's (float kernels differ; a device bug gives errors or far larger gaps).
3. **vLLM on the GPU** (only when `vllm` is importable): `validate --load vllm` of the upgrade
   (loads it with vLLM's loader, strictly) and `smoke --engine vllm` of both drafts (each must
   have drafted, with an AL within [1, k + 1]).

It needs torch, transformers, tokenizers and safetensors (no click, rich or network): on a bare
GPU machine run it from the source tree with `PYTHONPATH=.`. The vLLM part is skipped with one
line where vLLM is not installed.

Exit codes: 0 every check that ran passed; 1 a check failed (each failure is one line in the
summary; tracebacks go to WORK/gpu-check.log); 2 nothing was checked: no CUDA device (one line),
or torch/transformers missing. `--device cpu` runs the same checks on the CPU only, to test this
script on a machine without a GPU (CPU against CPU: the comparisons are trivially equal).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eagle_convert.vllm_model import default_release

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the source tree: eagle_convert and fixtures

EXIT_OK, EXIT_FAILED, EXIT_ENV = 0, 1, 2
CHECKS = ("reference", "finetune", "vllm")
ACC_TOLERANCE = 0.1  # per-step accuracy, GPU vs CPU after the same short schedule
TIE_GAP = 1e-2  # a top-2 logit gap below this is a tie that float kernels may break either way
# (library modules the checks use: imported before the device check, so a broken install fails early)
MODULES = (
    "eagle_convert.measure.smoke",
    "eagle_convert.finetune.run",
    "eagle_convert.upgrade.apply",
    "eagle_convert.validate.run",
    "eagle_convert.reference.loop",
    "fixtures.trained",
)


@dataclass
class Outcome:
    name: str
    status: str  # PASS | WARN | FAIL | SKIP
    detail: str


class Run:
    """The work folder, the log, the time budget and the outcomes."""

    def __init__(self, work: Path, budget_s: float, device: str) -> None:
        self.work, self.budget_s, self.device = work, budget_s, device
        self.t0 = time.perf_counter()
        self.log = open(work / "gpu-check.log", "a", encoding="utf-8")  # noqa: SIM115 - closed in main
        self.outcomes: list[Outcome] = []

    def say(self, msg: str) -> None:
        line = f"[{time.perf_counter() - self.t0:5.0f}s] {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def check(self, name: str, fn: Callable[[], Outcome | list[Outcome]]) -> None:
        if time.perf_counter() - self.t0 > self.budget_s:
            self.outcomes.append(Outcome(name, "SKIP", f"time budget of {self.budget_s:.0f}s used up"))
            return
        self.say(f"{name} ...")
        try:
            got = fn()
        except Exception as exc:  # one line here, the traceback in the log
            self.log.write(traceback.format_exc())
            got = Outcome(name, "FAIL", f"{type(exc).__name__}: {_one_line(exc)} (traceback: {self.log.name})")
        for o in got if isinstance(got, list) else [got]:
            self.outcomes.append(o)
            self.say(f"{o.status} {o.name}: {o.detail}")
        _free_gpu()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def environment(device: str) -> tuple[str | None, str]:
    """(None, description) when the checks can run, else (the one-line reason, "")."""
    missing = [m for m in ("torch", "transformers", "tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        return f"gpu-check: {', '.join(missing)} not installed: nothing was checked", ""
    import torch

    for mod in MODULES:
        importlib.import_module(mod)
    vllm = _vllm_version()
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return (
                f"gpu-check: no CUDA device (torch {torch.__version__}, CUDA build "
                f"{torch.version.cuda or 'none'}): nothing was checked"
            ), ""
        idx = torch.device(device).index or 0
        name = f"{torch.cuda.get_device_name(idx)}, CUDA {torch.version.cuda}"
    else:
        name = "CPU only (self-test of this script: every comparison is CPU against CPU)"
    return None, f"{name}; torch {torch.__version__}; vLLM {vllm or 'not installed'}"


def _vllm_version() -> str | None:
    """The installed vLLM's version, read without importing it; None where it is not installed."""
    from eagle_convert.vllm_model.features import vllm_available, vllm_version

    if not vllm_available():
        return None
    return vllm_version() or "unknown version"


def prepare(run: Run, pair: Path | None) -> tuple[Path, Path, Path]:
    """(target, EAGLE-3 draft, its EAGLE-3.1 upgrade): the trained fixture pair, built or reused."""
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.upgrade.plan import plan_upgrade
    from fixtures.trained import build_trained_pair

    if pair is not None:
        target, draft = pair / "target", pair / "draft"
    else:
        run.say("building the trained fixture pair (about 2 minutes on one CPU thread; cached in fixtures/.cache)")
        target, draft = build_trained_pair(log=run.say)
    up = run.work / "eagle31"
    ckpt = open_checkpoint(draft)
    apply_upgrade(plan_upgrade(ckpt, describe(ckpt, default_release())), up, force=True)
    return target, draft, up


def prompts():  # noqa: ANN201 - list[Prompt]
    """The first built-in prompt of each category (coding, chat, reasoning, long document): every
    path of the prompt handling, quick to decode on the CPU run the GPU run is compared with."""
    from eagle_convert.measure.prompts import builtin_prompts, select_prompts

    return select_prompts(builtin_prompts(), limit=1)


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
    )


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
    from eagle_convert.measure.prompts import builtin_prompts, select_prompts
    from eagle_convert.validate.run import validate_checkpoint

    short = select_prompts(builtin_prompts(), ("coding", "chat"), limit=1)  # the CPU run must stay short too
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
    ok = gap <= ACC_TOLERANCE and not report.errors
    return Outcome(
        f"finetune on {run.device}",
        "PASS" if ok else "FAIL",
        detail if ok else f"{detail}; largest per-step gap {gap:.3f} > {ACC_TOLERANCE}",
    )


def check_vllm(run: Run, target: Path, drafts: list[Path]) -> list[Outcome]:
    if _vllm_version() is None:
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
    _free_gpu()
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


def summary(run: Run, env: str) -> int:
    counts = {s: sum(o.status == s for o in run.outcomes) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    lines = [f"gpu-check summary ({env})"]
    lines += [f"  {o.status:<4} {o.name}: {o.detail}" for o in run.outcomes]
    lines.append(
        f"result: {counts['PASS']} passed, {counts['WARN']} passed with a note, {counts['FAIL']} failed, "
        f"{counts['SKIP']} skipped in {time.perf_counter() - run.t0:.0f}s"
    )
    print("\n".join(lines), flush=True)
    (run.work / "gpu-check.json").write_text(
        json.dumps({"environment": env, "outcomes": [o.__dict__ for o in run.outcomes], "counts": counts}, indent=1)
        + "\n"
    )
    return EXIT_FAILED if counts["FAIL"] else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/gpu_check.py",
        description=__doc__.splitlines()[0],
        epilog="exit codes: 0 passed, 1 a check failed, 2 nothing checked (no CUDA device, "
        "torch or transformers missing)",
    )
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (self-test without a GPU)")
    ap.add_argument("--only", action="append", choices=CHECKS, help="run only these checks (repeatable)")
    ap.add_argument("--pair", type=Path, help="a folder with target/ and draft/ (default: the trained fixture pair)")
    ap.add_argument(
        "--work", type=Path, help="where outputs, gpu-check.log and gpu-check.json go (default: a temp dir)"
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=420,
        help="start no further check after this many seconds (default 420: the whole run stays under 8 "
        "minutes on one GPU)",
    )
    args = ap.parse_args(argv)
    try:
        why, env = environment(args.device)
    except ImportError as exc:
        print(f"gpu-check: cannot import what the checks need ({_one_line(exc)}): nothing was checked")
        return EXIT_ENV
    if why:
        print(why)
        return EXIT_ENV
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    run = Run(work, args.budget_s, args.device)
    run.say(f"gpu-check: {env}; work folder {work}")
    try:
        todo = args.only or list(CHECKS)
        paths: list[Path] = []

        def _prepare() -> Outcome:
            paths.extend(prepare(run, args.pair))
            return Outcome("prepare", "PASS", f"target {paths[0]}, draft {paths[1]}, upgrade {paths[2]}")

        run.check("prepare", _prepare)
        if len(paths) == 3:
            target, draft, up = paths
            if "reference" in todo:
                run.check(f"reference engine on {run.device}", lambda: check_reference(run, target, [draft, up]))
            if "finetune" in todo:
                run.check(f"finetune on {run.device}", lambda: check_finetune(run, target, up))
            if "vllm" in todo:
                run.check("vllm", lambda: check_vllm(run, target, [draft, up]))
        return summary(run, env)
    finally:
        run.log.close()


if __name__ == "__main__":
    raise SystemExit(main())
