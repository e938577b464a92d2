"""Benchmark: static `validate` on 8B-shaped synthetic drafts of two sizes (time must stay flat).

Run: `.venv/bin/python -m benchmarks.validate_bench [--out bench-out] [--deep]`. Builds (or reuses)
the synthetic Llama-3.1-8B EAGLE-3 draft without and with `embed_tokens` (0.8 vs 1.8 GiB, a 32k
draft vocabulary, so d2t/t2d are read for real) and times, in one run: the library call
`validate_checkpoint(path)` (warm, median), the full CLI in a fresh process (`eagle-convert validate --json`,
which includes interpreter start-up and imports) and `python -c pass` as the start-up baseline.
Static validation reads config, headers and d2t/t2d only, so its time must not grow with the
weights. `--deep` also times one `validate --deep` per size and reports its peak RSS (bounded by
the chunk size, not the checkpoint).

`--matrix` measures `validate --vllm-version all` (one verdict per known vLLM release, 17 of them)
against one `validate`, side by side, on the 8B-shaped draft alone and with a config-only Llama-3.1-8B
target: the library calls warm (median wall and CPU time: CPU time is what a busy machine does not
distort) and the CLI in a fresh process each (what a user waits for). The matrix opens, classifies
and reads d2t/t2d and the target once and re-runs only the static rules per release, so it must
cost at most 2x one validate; the ratios are printed with `within_2x`.

`--for-all` measures `validate --for all` (every vLLM release plus SGLang's and TensorRT-LLM's rows)
against `validate --vllm-version all` and against one `validate`, the same way: the engine rows reuse the
newest vLLM release's reading of the draft, so they must add at most 20% to the vLLM matrix
(`within_1_2x`), and `validate --for all` (issue 30's done-when) and `validate --for sglang|trtllm` must
cost at most 1.2x one validate. The variants run side by side, one of each per round (`--repeat` rounds,
5 for the issue's check), medians reported.

`--target` measures `validate DRAFT --target TARGET` against an 8B-shaped target (benchmarks/synth_target.py:
a sparse 16 GB safetensors whose embedding is the draft's and whose lm_head rows at the d2t-mapped ids are
the draft's), each run in a fresh process: its time and peak RSS against `validate DRAFT` alone and against
`cat TARGET > /dev/null` (what reading the target's weights costs at all), and the target bytes it read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.synth import build_synthetic_draft
from benchmarks.timing import folder_bytes, median_seconds

_DEEP_SNIPPET = """
import json, resource, sys, time
from eagle_convert.validate.run import validate_checkpoint
t = time.perf_counter(); r = validate_checkpoint(sys.argv[1], deep=True); s = time.perf_counter() - t
print(json.dumps({"deep_s": s, "deep_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "deep_errors": len(r.errors)}))
"""


_TARGET_SNIPPET = """
import json, resource, sys, time
from eagle_convert.validate.run import validate_checkpoint
target = None if sys.argv[2] == "-" else sys.argv[2]
t = time.perf_counter(); r = validate_checkpoint(sys.argv[1], target=target, deep=sys.argv[3] == "deep")
s = time.perf_counter() - t
print(json.dumps({"s": s, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "codes": sorted(r.codes()), "notes": r.notes}))
"""
_CAT_SNIPPET = """
import json, resource, subprocess, sys, time
t = time.perf_counter(); subprocess.run(["cat", sys.argv[1]], stdout=subprocess.DEVNULL, check=True)
print(json.dumps({"s": time.perf_counter() - t,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _fresh(snippet: str, *args: str, repeat: int) -> dict:
    """Median time and largest peak RSS of `repeat` fresh-process runs of `snippet`."""
    import statistics

    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", snippet, *args], check=True, capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        for _ in range(repeat)
    ]
    return runs[-1] | {
        "s": statistics.median(r["s"] for r in runs),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
    }


def measure_target(draft: Path, target: Path, repeat: int, *, deep: bool) -> dict:
    """validate --target (sampled rows; with `deep` also every row) vs validate alone vs cat of the target."""
    weights = target / "model.safetensors"
    rows = {
        "target_file_gib": weights.stat().st_size / 2**30,
        "validate": _fresh(_TARGET_SNIPPET, str(draft), "-", "static", repeat=repeat),
        "validate_target": _fresh(_TARGET_SNIPPET, str(draft), str(target), "static", repeat=repeat),
        "cat_target": _fresh(_CAT_SNIPPET, str(weights), repeat=repeat),
    }
    if deep:
        rows["validate_target_deep"] = _fresh(_TARGET_SNIPPET, str(draft), str(target), "deep", repeat=1)
    vt, cat = rows["validate_target"], rows["cat_target"]
    rows["ratios"] = {
        "time_validate_target_over_cat": vt["s"] / cat["s"],
        "rss_validate_target_over_cat": vt["peak_rss_mib"] / cat["peak_rss_mib"],
        "time_target_checks_over_cat": (vt["s"] - rows["validate"]["s"]) / cat["s"],
        "rss_validate_target_over_validate": vt["peak_rss_mib"] / rows["validate"]["peak_rss_mib"],
    }
    return rows


LLAMA31_8B_TARGET = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
}


def _median_cpu_and_wall(fn, repeat: int) -> tuple[float, float]:
    """(median CPU seconds, median wall seconds) of `repeat` calls of `fn`."""
    import statistics
    import time

    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def measure_matrix(folder: Path, target: Path | None, repeat: int) -> dict:
    """validate --vllm-version all vs one validate: library (warm) and CLI (fresh process)."""
    from eagle_convert.validate.matrix import compatibility_matrix
    from eagle_convert.validate.run import validate_checkpoint

    one = compatibility_matrix(folder, target=target)  # warm-up; also the verdicts
    validate_checkpoint(folder, target=target)
    one_cpu, one_wall = _median_cpu_and_wall(lambda: validate_checkpoint(folder, target=target), repeat)
    all_cpu, all_wall = _median_cpu_and_wall(lambda: compatibility_matrix(folder, target=target), repeat)
    extra = ["--target", str(target)] if target else []

    def cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "eagle_convert.cli.app", "validate", "--json", str(folder), *extra, *args],
            check=True,
            capture_output=True,
        )

    cli_repeat = max(3, repeat // 10)
    cli_one = median_seconds(cli, cli_repeat)
    cli_all = median_seconds(lambda: cli("--vllm-version", "all"), cli_repeat)
    ratios = {
        "library_cpu": all_cpu / one_cpu,
        "library_wall": all_wall / one_wall,
        "cli_wall": cli_all / cli_one,
    }
    return {
        "releases": len(one.rows),
        "summary": one.summary(),
        "validate_library_cpu_ms": one_cpu * 1e3,
        "matrix_library_cpu_ms": all_cpu * 1e3,
        "validate_library_wall_ms": one_wall * 1e3,
        "matrix_library_wall_ms": all_wall * 1e3,
        "validate_cli_s": cli_one,
        "matrix_cli_s": cli_all,
        "ratios": ratios,
        "within_2x": {k: v <= 2.0 for k, v in ratios.items()},
    }


def _verdict_run(cmd: list[str]) -> None:
    """Run a validate CLI call; exit 0 or 1 (a verdict) pass, anything else (a usage error) raises."""
    res = subprocess.run(cmd, capture_output=True, check=False)
    if res.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr.decode()[-500:]}")


def _side_by_side(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """{name: (median CPU s, median wall s)} of `repeat` rounds, each round running every fn once in turn, so
    a busy machine's drift falls on all of them alike."""
    import statistics
    import time

    cpu: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {k: (statistics.median(cpu[k]), statistics.median(wall[k])) for k in fns}


def measure_for_all(folder: Path, target: Path | None, repeat: int) -> dict:
    """validate --for all vs validate --vllm-version all vs one validate, side by side (each round runs every
    variant once): the library warm (median CPU and wall) and the CLI in a fresh process (median wall)."""
    from eagle_convert.engines import VLLM, engine_status, every_release
    from eagle_convert.validate import compatibility_matrix, validate_checkpoint, validate_for

    others = [st for st in every_release() if st.engine != VLLM]
    sglang, trtllm = engine_status("sglang"), engine_status("trtllm")
    every = compatibility_matrix(folder, target=target, engines=others)  # warm-up; also the verdicts
    lib = _side_by_side(
        {
            "validate": lambda: validate_checkpoint(folder, target=target),
            "vllm_all": lambda: compatibility_matrix(folder, target=target),
            "for_all": lambda: compatibility_matrix(folder, target=target, engines=others),
            "for_sglang": lambda: validate_for(folder, sglang, target=target),
            "for_trtllm": lambda: validate_for(folder, trtllm, target=target),
        },
        repeat,
    )
    extra = ["--target", str(target)] if target else []

    def cli(*args: str) -> Callable[[], None]:
        cmd = [sys.executable, "-m", "eagle_convert.cli.app", "validate", "--json", str(folder), *extra, *args]
        return lambda: _verdict_run(cmd)

    cli_runs = _side_by_side(
        {"validate": cli(), "vllm_all": cli("--vllm-version", "all"), "for_all": cli("--for", "all")}, repeat
    )
    one_cpu, vllm_cpu, all_cpu = lib["validate"][0], lib["vllm_all"][0], lib["for_all"][0]
    cli_one, cli_vllm, cli_all = (cli_runs[k][1] for k in ("validate", "vllm_all", "for_all"))
    ratios = {
        "for_all_vs_vllm_all_library_cpu": all_cpu / vllm_cpu,
        "for_all_vs_validate_library_cpu": all_cpu / one_cpu,
        "for_all_vs_validate_library_wall": lib["for_all"][1] / lib["validate"][1],
        "for_all_vs_validate_cli_wall": cli_all / cli_one,
        "for_all_vs_vllm_all_cli_wall": cli_all / cli_vllm,
        "for_sglang_vs_validate_library_cpu": lib["for_sglang"][0] / one_cpu,
        "for_trtllm_vs_validate_library_cpu": lib["for_trtllm"][0] / one_cpu,
    }
    return {
        "repeat": repeat,
        "rows": [f"{r.engine} {r.release}" for r in every.rows][-3:],
        "summary": every.summary(),
        # inside one --for all (its own timings): the vLLM releases' rows vs the SGLang and TRT-LLM rows
        "matrix_release_rows_ms": every.timings.get("releases", 0.0) * 1e3,
        "matrix_engine_rows_ms": every.timings.get("engines", 0.0) * 1e3,
        **{f"{k}_library_cpu_ms": v[0] * 1e3 for k, v in lib.items()},
        **{f"{k}_library_wall_ms": v[1] * 1e3 for k, v in lib.items()},
        **{f"{k}_cli_s": v[1] for k, v in cli_runs.items()},
        "ratios": ratios,
        "within_1_2x": {k: v <= 1.2 for k, v in ratios.items()},
    }


def measure(folder: Path, repeat: int, *, deep: bool) -> dict[str, float]:
    from eagle_convert.validate.run import validate_checkpoint

    report = validate_checkpoint(folder)  # warm-up; also the verdict
    if report.errors:
        raise SystemExit(f"{folder}: synthetic draft has errors: {[f.code for f in report.errors]}")
    row = {
        "bytes": folder_bytes(folder),
        "library_s": median_seconds(lambda: validate_checkpoint(folder), repeat),
        "cli_s": median_seconds(
            lambda: subprocess.run(
                [sys.executable, "-m", "eagle_convert.cli.app", "validate", "--json", str(folder)],
                check=True,
                capture_output=True,
            ),
            max(3, repeat // 3),
        ),
        "python_startup_s": median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 3),
        "findings": sorted({f.code for f in report.findings}),
    }
    if deep:
        out = subprocess.run(
            [sys.executable, "-c", _DEEP_SNIPPET, str(folder)], check=True, capture_output=True, text=True
        ).stdout
        row |= json.loads(out.strip().splitlines()[-1])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--deep", action="store_true", help="also time validate --deep (reads every byte)")
    parser.add_argument(
        "--target",
        action="store_true",
        help="only measure validate --target against a sparse 8B-shaped target (with --deep: also "
        "validate --target --deep)",
    )
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="only measure validate --vllm-version all against one validate (library and CLI), draft alone "
        "and with a config-only target",
    )
    parser.add_argument(
        "--for-all",
        action="store_true",
        help="only measure validate --for all against validate --vllm-version all and one validate",
    )
    args = parser.parse_args(argv)
    if args.matrix or args.for_all:
        folder = args.out / "synth-8b"
        if not folder.exists():
            build_synthetic_draft(folder, with_embed=False)
        target = args.out / "llama31-8b-target-config"
        target.mkdir(parents=True, exist_ok=True)
        (target / "config.json").write_text(json.dumps(LLAMA31_8B_TARGET, indent=2) + "\n", encoding="utf-8")
        if args.for_all:  # side by side, as many rounds as asked (the check: --repeat 5)
            rows = {
                "draft": measure_for_all(folder, None, args.repeat),
                "draft_with_target": measure_for_all(folder, target, args.repeat),
            }
        else:
            rows = {
                "draft": measure_matrix(folder, None, max(args.repeat, 31)),
                "draft_with_target": measure_matrix(folder, target, max(args.repeat, 31)),
            }
        print(json.dumps(rows, indent=2))
        return 0
    if args.target:
        from benchmarks.synth_target import build_synthetic_target

        draft, target = args.out / "synth-8b-embed", args.out / "synth-8b-target"
        if not draft.exists():
            build_synthetic_draft(draft, with_embed=True)
        if not target.exists():
            build_synthetic_target(target, draft)
        print(json.dumps(measure_target(draft, target, max(1, args.repeat // 3), deep=args.deep), indent=2))
        return 0
    rows = {}
    for with_embed in (False, True):
        folder = args.out / ("synth-8b-embed" if with_embed else "synth-8b")
        if not folder.exists():
            build_synthetic_draft(folder, with_embed=with_embed)
        rows[folder.name] = measure(folder, args.repeat, deep=args.deep)
    small, large = rows["synth-8b"], rows["synth-8b-embed"]
    summary = {
        "runs": rows,
        "size_ratio": large["bytes"] / small["bytes"],
        "library_time_ratio": large["library_s"] / small["library_s"],
        "under_one_second": max(small["library_s"], large["library_s"]) < 1.0,
        "cli_minus_python_startup_s": small["cli_s"] - small["python_startup_s"],
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
