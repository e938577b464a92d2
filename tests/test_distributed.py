"""Data-parallel training from a capture cache (`finetune --nproc`): two gloo processes train the
draft one process trains, and a bad `--nproc` is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.vllm_model import default_release

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pair() -> dict:
    from fixtures.trained import build_trained_pair, trained_info

    target, draft = build_trained_pair(log=lambda _m: None)
    return {"target": target, "draft": draft, "prompts": trained_info(target.parent)["heldout_prompts"][:8]}


@pytest.fixture(scope="module")
def cache(pair, tmp_path_factory) -> Path:
    from eagle_convert.cache import CaptureOptions
    from eagle_convert.cache.capture import capture_cache
    from eagle_convert.reference.target import TargetModel

    tgt = TargetModel.from_pretrained(pair["target"], device="cpu")
    out = tmp_path_factory.mktemp("ddp") / "cache"
    ref = CaptureOptions(engine="reference")
    capture_cache(
        pair["target"], pair["draft"], pair["prompts"], out, ref, reference_target=tgt, release=default_release()
    )
    return out


def _drafter(pair):
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.target import TargetModel

    tgt = TargetModel.from_pretrained(pair["target"], device="cpu")
    return load_drafter(
        pair["draft"], default_release(), target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight
    )


# Stage B's settings, shortened: every weight trains, L2-SP on (rank 0 alone adds it), windowed samples.
KWARGS = dict(
    aux_ids=[1, 3, 6], steps=4, lr=3e-4, batch_size=4, seed=0, l2sp=1e-3, max_len=24, trainable="all", log_every=1
)


def test_two_gloo_processes_train_what_one_process_trains(pair, cache: Path) -> None:
    from eagle_convert.cache.source import CachedTarget
    from eagle_convert.finetune.distributed import job_for, launch, send
    from eagle_convert.reference.train import train_draft

    source = CachedTarget(cache)
    one = _drafter(pair)
    res1 = train_draft(source, one, pair["prompts"], **KWARGS)
    two = _drafter(pair)
    with launch(2, "cpu") as ranks:
        send(ranks, job_for(cache, two, pair["prompts"], [KWARGS]))
        res2 = train_draft(source, two, pair["prompts"], parallel=ranks, cache_target=False, **KWARGS)
    # The same global batches and the same normalisation: what differs is only where the fp32 sums
    # are split (each rank sums its 2 sequences' token losses and gradients, the all-reduce adds the
    # two partial sums; one process sums all 4 at once) and each rank's padded shape (matmuls of
    # another size round differently): ~1e-7 relative per sum. The loss follows that (measured
    # 7.6e-8 relative over these 4 steps); bound 1e-5. The weights go through AdamW, whose update
    # lr * m / (sqrt(v) + 1e-8) turns the rounding of a gradient element near 1e-8 into a sizeable
    # part of lr: measured max 5.9e-7 (0.2% of lr = 3e-4) while the weights moved up to 9.3e-4;
    # bound 1e-5 (3% of lr). Without the gradient all-reduce (each rank steps on its half) the
    # weights differ by up to 1.8e-3 (measured), so the bound tells the two apart.
    assert res2.losses == pytest.approx(res1.losses, rel=1e-5)
    assert [pytest.approx(a, abs=1e-6) for a in res1.step_acc] == res2.step_acc
    moved = 0.0
    start = _drafter(pair).state_dict()
    for k, v in one.state_dict().items():
        w = two.state_dict()[k]
        assert torch.allclose(v.float(), w.float(), rtol=0, atol=1e-5), (k, float((v - w).abs().max()))
        moved = max(moved, float((v.float() - start[k].float()).abs().max()))
    assert moved > 1e-4  # the weights did train


# A rank as `_spawned` runs one: the group made, then the first optimizer (AdamW imports torch._dynamo,
# which imports the torch modules that bind the default group as a default argument), a step with an
# all-reduce, the group destroyed; then the gloo threads still alive in the process.
_RANK = """
import os, sys, tempfile, torch, torch.distributed as dist
from eagle_convert.finetune.distributed import _init_group
assert "torch._dynamo" not in sys.modules  # a fresh rank: nothing imported it before the group
_init_group("cpu", store=dist.FileStore(tempfile.mkdtemp() + "/store", 1), rank=0, world_size=1)
lin = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(lin.parameters())
lin(torch.ones(2, 4)).sum().backward()
dist.all_reduce(lin.weight.grad)
opt.step()
dist.destroy_process_group()
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(sorted(n for n in names if "gloo" in n))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread names from /proc")
def test_destroying_the_group_joins_its_gloo_threads() -> None:
    """Held past `destroy_process_group`, the group's gloo workers outlive it into interpreter
    shutdown, where one releasing tensors aborts the rank now and then (exit -6): gone at once."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", _RANK], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[]\n"


def test_a_rank_trains_on_its_part_of_each_batch() -> None:
    from eagle_convert.finetune.distributed import Ranks

    batch = [7, 3, 5, 1, 2]
    assert [Ranks(r, 2, "cpu").local(batch) for r in range(2)] == [[7, 5, 2], [3, 1]]


def _folder(path: Path, config: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_cli_nproc_above_the_batch_is_refused(tmp_path: Path) -> None:
    draft, target = _folder(tmp_path / "d", {}), _folder(tmp_path / "t", {})
    res = CliRunner().invoke(
        main, ["finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "o"), "--nproc", "9"]
    )
    assert res.exit_code == 2
    assert (
        res.stderr
        == "Error: --nproc 9: must be between 1 and 8, the sequences per batch (each process trains on its part)\n"
    )


def test_cli_nproc_zero_is_a_usage_error(tmp_path: Path) -> None:
    draft, target = _folder(tmp_path / "d", {}), _folder(tmp_path / "t", {})
    res = CliRunner().invoke(
        main, ["finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "o"), "--nproc", "0"]
    )
    assert res.exit_code == 2
    assert "Invalid value for '--nproc': 0 is not in the range x>=1." in res.stderr


def test_cli_nproc_must_match_torchrun(tmp_path: Path) -> None:
    draft, target = _folder(tmp_path / "d", {}), _folder(tmp_path / "t", {})
    res = CliRunner().invoke(
        main,
        ["finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "o"), "--nproc", "3"],
        env={"WORLD_SIZE": "2", "RANK": "0"},
    )
    assert res.exit_code == 2
    assert res.stderr == "Error: --nproc 3: torchrun started 2 processes; leave --nproc out\n"


@pytest.mark.slow
def test_cli_finetune_with_two_processes(tmp_path: Path) -> None:
    """End to end: the training sequences captured first, two gloo ranks, rank 0 selects and writes;
    the temporary capture is gone afterwards."""
    from fixtures.corpus_prompts import corpus_prompts
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in corpus_prompts(5, seed=1)))
    out = tmp_path / "out"
    args = ["finetune", str(draft), "--target", str(target), "--out", str(out), "--train-prompts", str(prompts)]
    args += ["--continuation-tokens", "8", "--steps-fc-norm", "2", "--steps-all", "2", "--nproc", "2", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "finetune-report.schema.json")
    assert data["plan"]["nproc"] == 2 and data["result"]["held_out"] == 1
    assert [len(s["losses"]) for s in data["result"]["stages"]] == [2, 2]
    assert "capturing the training sequences for data-parallel training" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "p.jsonl"]  # the capture removed
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]


@pytest.mark.slow
def test_cli_finetune_with_two_processes_from_a_cache(tmp_path: Path) -> None:
    """--capture reference then --nproc 2: the ranks read the given cache (nothing captured again)."""
    from fixtures.corpus_prompts import corpus_prompts
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in corpus_prompts(5, seed=1)))
    out = tmp_path / "out"
    args = ["finetune", str(draft), "--target", str(target), "--out", str(out), "--train-prompts", str(prompts)]
    args += ["--continuation-tokens", "8", "--steps-fc-norm", "2", "--steps-all", "1", "--nproc", "2", "--json"]
    res = CliRunner().invoke(main, [*args, "--capture", "reference", "--cache", str(tmp_path / "cache")])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["plan"]["nproc"] == 2 and data["plan"]["cache"] == str(tmp_path / "cache")
    assert "capturing the training sequences for data-parallel training" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out", "p.jsonl"]
