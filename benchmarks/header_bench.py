"""Benchmark: static commands on a draft whose header holds 200,000 tiny tensors, against a baseline.

A crafted (or broken) header with a huge tensor count makes every per-tensor step of the static
path show: reading the header, `describe` (layout rules, canonical names), validate's rules (the
keys rule above all) and upgrade's plan and preflight, which validate the planned output. The
benchmark builds a small synthetic draft (`benchmarks.synth`, 1/32 of an 8B draft) plus `--tensors`
extra 4-byte F32 tensors (`layers.0.extra.{i}.weight`: names vLLM has no parameter for, so
`validate` reports one E102 each and `upgrade` refuses), then runs, each as its own process:

    upgrade DRAFT --out OUT --force      refused (exit 1): plan, the card's check, the preflight
    validate --json DRAFT                every finding, listed
    inspect --json DRAFT

with this tree and with `--baseline` (a git revision, exported with `git archive` into a temporary
folder and run from there), in rounds whose order alternates, so a shared machine's load drifting
between rounds cancels. The table shows each side's median and the ratio baseline / now. Every
command's exit code, stdout and stderr must be byte-identical on both sides (same verdicts, same
output): a difference is reported and exits 1. A plain upgrade of the synthetic draft without the
extra tensors is compared too (the written files' bytes, model card included).

    python -m benchmarks.header_bench [--tensors 200000] [--baseline 5239e53] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.synth import build_synthetic_draft, scaled_dims
from benchmarks.timing import print_result

REPO = Path(__file__).resolve().parents[1]
# The tree before the per-tensor work of issue 33 (layout rules' facts computed once, the keys rule's
# E102 text once per check, one Path per weight file in upgrade's plan, the CLI's GC threshold).
DEFAULT_BASELINE = "5239e53"
COMMANDS: dict[str, list[str]] = {
    "upgrade (refused)": ["upgrade", "{draft}", "--out", "{out}", "--force", "--no-fsync"],
    "validate --json": ["validate", "--json", "{draft}"],
    "inspect --json": ["inspect", "--json", "{draft}"],
}


def add_tiny_tensors(folder: Path, count: int) -> None:
    """Append `count` 4-byte F32 tensors to `folder`'s model.safetensors (header and data)."""
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = bytearray(raw[8 + n :])
    for i in range(count):
        header[f"layers.0.extra.{i}.weight"] = {
            "dtype": "F32",
            "shape": [1],
            "data_offsets": [len(data), len(data) + 4],
        }
        data += b"\0\0\0\0"
    body = json.dumps(header, separators=(",", ":")).encode()
    body += b" " * (-len(body) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + bytes(data))


def export_tree(revision: str, into: Path) -> Path:
    """`revision`'s eagle_convert/ and schemas/ under `into` (what `python -m eagle_convert` needs)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "eagle_convert", "schemas"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(tree: Path, args: list[str]) -> tuple[float, tuple[int, bytes, bytes]]:
    """(seconds, (exit code, stdout, stderr)) of `python -m eagle_convert ARGS` run from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "eagle_convert", *args], cwd=tree, env=env, capture_output=True)
    return time.perf_counter() - start, (done.returncode, done.stdout, done.stderr)


_TIMING_KEYS = ("seconds", "timings")  # what a --json report measures about its own run


def comparable(outcome: tuple[int, bytes, bytes]) -> tuple[int, Any, bytes]:
    """The outcome with a JSON report's own timings dropped (they differ on every run)."""
    code, stdout, stderr = outcome
    try:
        doc = json.loads(stdout)
    except ValueError:
        return code, stdout, stderr
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in _TIMING_KEYS}
    return code, doc, stderr


def folder_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def bench(work: Path, tensors: int, baseline: str, rounds: int) -> dict[str, Any]:
    trees = {"baseline": export_tree(baseline, work / "baseline"), "now": REPO}
    plain = build_synthetic_draft(work / "plain", **scaled_dims(1 / 32), with_embed=False)
    draft = work / "draft"
    shutil.copytree(plain, draft)
    add_tiny_tensors(draft, tensors)
    mismatches: list[str] = []

    outputs: dict[str, dict[str, str]] = {}
    out = work / "out"  # one output path for both sides: messages and the model card name it
    for side, tree in trees.items():  # a plain upgrade: the same files, byte for byte
        _, (code, _, err) = run(tree, ["upgrade", str(plain), "--out", str(out), "--force", "--no-fsync"])
        if code != 0:
            raise SystemExit(f"{side}: upgrade of the plain draft failed: {err.decode(errors='replace')}")
        outputs[side] = folder_digest(out)
        shutil.rmtree(out)
    if outputs["baseline"] != outputs["now"]:
        mismatches.append("plain upgrade: the written files differ")

    times: dict[str, dict[str, list[float]]] = {name: {"baseline": [], "now": []} for name in COMMANDS}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name, template in COMMANDS.items():
            seen: dict[str, tuple[int, bytes, bytes]] = {}
            for side in order:
                args = [a.format(draft=draft, out=out) for a in template]
                seconds, seen[side] = run(trees[side], args)
                times[name][side].append(seconds)
            if comparable(seen["baseline"]) != comparable(seen["now"]) and r == 0:
                mismatches.append(f"{name}: exit code, stdout or stderr differ")
    rows = []
    for name, sides in times.items():
        base, now = statistics.median(sides["baseline"]), statistics.median(sides["now"])
        rows.append({"command": name, "baseline_s": base, "now_s": now, "speedup": base / now})
    return {"tensors": tensors, "baseline": baseline, "rounds": rounds, "rows": rows, "mismatches": mismatches}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['tensors']:,} extra tensors, median of {result['rounds']} rounds, baseline {result['baseline']}",
        f"{'command':<20} {'baseline s':>11} {'now s':>8} {'baseline / now':>15}",
    ]
    for row in result["rows"]:
        lines.append(f"{row['command']:<20} {row['baseline_s']:>11.2f} {row['now_s']:>8.2f} {row['speedup']:>14.2f}x")
    lines += [f"MISMATCH: {m}" for m in result["mismatches"]] or ["outputs identical on both sides"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=200_000)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="header-bench-") as tmp:
        result = bench(Path(tmp), args.tensors, args.baseline, args.rounds)
    print(render(result))
    if args.json is not None:
        print_result(result, args.json)
    return 1 if result["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
