"""GPU check: run eagle-convert's GPU paths end to end, compare them with the CPU, time them, and
write one summary (text and JSON).

    make gpu-check                          # EC_DEVICE=cpu make gpu-check: the CPU self-test
    PYTHONPATH=. python scripts/gpu_check.py --only reference --only large --budget-s 300

On a machine with an NVIDIA GPU it checks, in this order (about 5 minutes on one H200):

1. **the trained fixture pair** (`fixtures/trained.py`: a tiny target and an EAGLE-3 draft trained for
   it), each library call on the CPU and on the GPU with the same inputs (`scripts/gpu_steps.py`
   states each tolerance): `smoke --engine reference` of the draft and its EAGLE-3.1 upgrade at
   T=0 (counters equal, or a near-tie that explains them), `drift` (verdicts equal, shares and
   RMS close), `upgrade --init calibrated` (the same fc_norm values), `finetune` (per-step
   accuracies within 0.1, finite losses) and `capture --engine reference` (the same sequences,
   aux states and logits close);
2. **an 8B-shaped draft against a 1.9B random target** (`scripts/gpu_large.py`), bf16 on disk:
   each of the five steps on the GPU, timed, with its peak GPU memory; smoke's AL also on the CPU;
3. **vLLM on the GPU** (only when `vllm` is importable): `validate --load vllm` of the upgrade and
   `smoke --engine vllm` of both drafts.

It needs torch, transformers, tokenizers and safetensors (no click, rich or network). Every check
is timed; the summary (`gpu-check.json`) is rewritten after each, in the work folder and in
`--out`, so a run stopped at its limit still leaves what it measured.

Exit codes: 0 every check that ran passed; 1 a check failed (each failure is one line in the
summary; tracebacks go to WORK/gpu-check.log); 2 nothing was checked: no CUDA device (one line),
or torch/transformers missing. `--device cpu` runs the same checks on the CPU only, to test this
script on a machine without a GPU (CPU against CPU: the comparisons are trivially equal).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # gpu_run, gpu_steps, gpu_large beside this file
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # fixtures; an installed eagle_convert (make gpu-check) still comes first

from gpu_run import Outcome, Run, one_line  # noqa: E402
from gpu_steps import (  # noqa: E402
    check_calibrate,
    check_capture,
    check_drift,
    check_finetune,
    check_reference,
    check_vllm,
    compare_caches,
    vllm_smoke_outcome,
    vllm_version,
)

__all__ = ["Run", "check_drift", "check_finetune", "check_reference", "compare_caches", "main", "vllm_smoke_outcome"]

EXIT_OK, EXIT_FAILED, EXIT_ENV = 0, 1, 2
CHECKS = ("reference", "drift", "calibrate", "finetune", "capture", "large", "vllm")
# (library modules the checks use: imported before the device check, so a broken install fails early)
MODULES = (
    "eagle_convert.measure.smoke",
    "eagle_convert.drift",
    "eagle_convert.finetune.run",
    "eagle_convert.finetune.calibrate",
    "eagle_convert.finetune.capture",
    "eagle_convert.upgrade.run",
    "eagle_convert.validate.run",
    "eagle_convert.reference.loop",
    "fixtures.trained",
    "fixtures.drafts",
)


def environment(device: str) -> tuple[str | None, dict]:
    """(None, facts) when the checks can run, else (the one-line reason, {})."""
    missing = [m for m in ("torch", "transformers", "tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        return f"gpu-check: {', '.join(missing)} not installed: nothing was checked", {}
    import torch
    import transformers

    for mod in MODULES:
        importlib.import_module(mod)
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return (
                f"gpu-check: no CUDA device (torch {torch.__version__}, CUDA build "
                f"{torch.version.cuda or 'none'}): nothing was checked"
            ), {}
        idx = torch.device(device).index or 0
        name = f"{torch.cuda.get_device_name(idx)}, CUDA {torch.version.cuda}"
    else:
        name = "CPU only (self-test of this script: every comparison is CPU against CPU)"
    import eagle_convert

    return None, {
        "device": name,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "vllm": vllm_version(),
        "python": sys.version.split()[0],
        "cpu_threads": torch.get_num_threads(),
        "eagle_convert": f"{eagle_convert.__version__} from {Path(eagle_convert.__file__).parent.parent}",
    }


def prepare(run: Run, pair: Path | None) -> tuple[Path, Path, Path]:
    """(target, EAGLE-3 draft, its EAGLE-3.1 upgrade): the trained fixture pair, built or reused."""
    from eagle_convert.upgrade import upgrade_draft
    from fixtures.trained import build_trained_pair

    if pair is not None:
        target, draft = pair / "target", pair / "draft"
    else:
        run.say("building the trained fixture pair (about 2 minutes on one CPU thread; cached in fixtures/.cache)")
        target, draft = build_trained_pair(log=run.say)
    up = run.work / "eagle31"
    upgrade_draft(draft, up, force=True)
    return target, draft, up


def summary(run: Run) -> int:
    env = run.environment
    counts = run.counts()
    lines = [
        f"gpu-check summary ({env.get('device')}; torch {env.get('torch')}; vLLM {env.get('vllm') or 'not installed'})"
    ]
    lines += [f"  {o.status:<4} {o.name}: {o.detail}" for o in run.outcomes]
    lines.append(
        f"result: {counts['PASS']} passed, {counts['WARN']} passed with a note, {counts['FAIL']} failed, "
        f"{counts['SKIP']} skipped in {run.summary_dict()['seconds']:.0f}s"
    )
    print("\n".join(lines), flush=True)
    run.write_summary()
    return EXIT_FAILED if counts["FAIL"] else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/gpu_check.py",
        description=__doc__.splitlines()[0],
        epilog="exit codes: 0 passed, 1 a check failed, 2 nothing checked (no CUDA device, "
        "torch or transformers missing)",
    )
    ap.add_argument(
        "--device",
        default=os.environ.get("EC_DEVICE") or "cuda",
        help="cuda (default; or $EC_DEVICE), cuda:N, or cpu (self-test without a GPU)",
    )
    ap.add_argument("--only", action="append", choices=CHECKS, help="run only these checks (repeatable)")
    ap.add_argument("--pair", type=Path, help="a folder with target/ and draft/ (default: the trained fixture pair)")
    ap.add_argument("--large-shape", choices=("8b", "small"), help="default: 8b on a GPU, small on the CPU")
    ap.add_argument("--work", type=Path, help="outputs, gpu-check.log and gpu-check.json (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="also write gpu-check.json here (make gpu-check: $OUT when set)")
    ap.add_argument("--install", default="", help="how the package was installed (recorded in the summary)")
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
        print(f"gpu-check: cannot import what the checks need ({one_line(exc)}): nothing was checked")
        return EXIT_ENV
    if why:
        print(why)
        return EXIT_ENV
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    run = Run(work, args.budget_s, args.device, out=args.out)
    run.environment = {**env, **({"install": args.install} if args.install else {})}
    run.say(f"gpu-check: {env['device']}; torch {env['torch']}; work folder {work}")
    try:
        todo = args.only or list(CHECKS)
        paths: list[Path] = []

        def _prepare() -> Outcome:
            paths.extend(prepare(run, args.pair))
            return Outcome("prepare", "PASS", f"target {paths[0]}, draft {paths[1]}, upgrade {paths[2]}")

        if set(todo) - {"large"}:
            run.check("prepare", _prepare)
        if len(paths) == 3:
            target, draft, up = paths
            tiny = {
                "reference": (f"reference engine on {run.device}", lambda: check_reference(run, target, [draft, up])),
                "drift": (f"drift on {run.device}", lambda: check_drift(run, target, [draft, up])),
                "calibrate": (
                    f"upgrade --init calibrated on {run.device}",
                    lambda: check_calibrate(run, target, draft),
                ),
                "finetune": (f"finetune on {run.device}", lambda: check_finetune(run, target, up)),
                "capture": (
                    f"capture --engine reference on {run.device}",
                    lambda: check_capture(run, target, draft),
                ),
            }
            for key, (name, fn) in tiny.items():
                if key in todo:
                    run.check(name, fn)
        if "large" in todo:
            from gpu_large import run_large

            run_large(run, args.large_shape or ("8b" if run.cuda else "small"))
        if "vllm" in todo and len(paths) == 3:
            run.check("vllm", lambda: check_vllm(run, paths[0], paths[1:]))
        return summary(run)
    finally:
        run.log.close()


if __name__ == "__main__":
    raise SystemExit(main())
