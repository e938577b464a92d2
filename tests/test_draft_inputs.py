"""smoke and finetune read drafts through the reader every command uses: the same tensors stored
sharded (with and without index), as a `.bin` or in NeMo's layout (`model.` names in
model/consolidated/) give the same drafter and the same counters as the single-file draft.

The bytes are identical, so every comparison here is exact (no tolerance): the same weights run
through the same kernels on the same machine in one process. The tiny random draft accepts almost
nothing, so its smoke counters alone would prove little: the drafter's state dict and finetune's
losses and written bytes carry the fast check, and the slow test compares smoke counters on the
trained fixture (AL ~3.8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from eagle_convert.vllm_model import default_release
from fixtures.storage import STORAGES, restore

K = 3


def _restored(draft: Path, base: Path) -> dict[str, Path]:
    return {"single": draft, **{s: restore(draft, base / s, s) for s in STORAGES}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("inputs")
    target = build_target(base / "target")
    return target, _restored(build_draft(base / "draft", VLLM_TINY), base)


def _counters(draft) -> tuple:
    t = draft.total
    per_request = [
        (
            r.prompt_id,
            r.counts.num_drafts,
            r.counts.num_accepted,
            tuple(r.counts.accepted_per_pos),
            r.counts.generated_tokens,
        )
        for r in draft.requests
    ]
    return t.num_drafts, t.num_draft_tokens, t.num_accepted, tuple(t.accepted_per_pos), per_request


def test_every_storage_loads_the_same_drafter(tiny) -> None:
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.reference.data import load_drafter

    _, drafts = tiny
    assert open_checkpoint(drafts["nemo"]).prefix == "model/consolidated"
    assert open_checkpoint(drafts["bin"]).storage == "bin"
    assert open_checkpoint(drafts["sharded-no-index"]).storage == "sharded"
    cfg = json.loads((drafts["single"] / "config.json").read_text())
    emb = torch.randn(cfg["vocab_size"], cfg["hidden_size"])  # the draft has no embed_tokens of its own
    want = load_drafter(drafts["single"], default_release(), target_embed=emb, device="cpu").state_dict()
    for name, path in drafts.items():
        sd = load_drafter(path, default_release(), target_embed=emb, device="cpu").state_dict()
        assert sd.keys() == want.keys(), name
        assert all(torch.equal(sd[k], want[k]) for k in sd), name


def test_smoke_counts_the_same_for_every_storage(tiny) -> None:
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.prompts import Prompt
    from eagle_convert.measure.smoke import run_smoke

    target, drafts = tiny
    prompts = [
        Prompt("c1", "coding", text="def main(argv=None):"),
        Prompt("q1", "chat", messages=({"role": "user", "content": "The quick brown fox"},)),
    ]
    rep = run_smoke(
        target, list(drafts.values()), MeasureOptions(engine="reference", k=K, max_new_tokens=12), prompts=prompts
    )
    single, *others = rep.drafts
    assert single.total.generated_tokens == 24
    for name, d in zip(list(drafts)[1:], others, strict=True):
        assert _counters(d) == _counters(single), name
        assert d.variant == single.variant == "EAGLE-3", name


def test_finetune_trains_the_same_for_every_storage(tiny, tmp_path: Path) -> None:
    """plan + run on each storage: the same plan, the same accuracies, a byte-identical output."""
    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.plan import plan_finetune
    from eagle_convert.finetune.run import run_finetune
    from eagle_convert.measure.prompts import Prompt

    target, drafts = tiny
    prompts = [
        Prompt("p0", "custom", text="The quick brown fox jumps over the lazy dog."),
        Prompt("p1", "custom", text="def add(a, b):\n    return a + b"),
    ]
    results = {}
    for name in ("single", "sharded", "bin", "nemo"):
        plan = plan_finetune(
            drafts[name],
            target,
            tmp_path / name,
            FinetuneOptions(continuation_tokens=8, steps_fc_norm=2, lr_fc_norm=1e-3, steps_all=1, lr_all=1e-4, l2sp=0),
            prompts=prompts,
            batch_size=2,
        )
        res = run_finetune(plan)
        assert (tmp_path / name / "README.md").is_file()  # the card names the folder and source: not compared
        written = {
            p.name: p.read_bytes()
            if p.name != "config.json"
            else {k: v for k, v in json.loads(p.read_text()).items() if k != "_eagle_convert"}
            for p in (tmp_path / name).iterdir()
            if p.name != "README.md"
        }
        results[name] = (
            plan.aux_ids,
            plan.dtype,
            plan.variant,
            res.step_acc_before,
            res.step_acc_after,
            res.loss_before,
            res.loss_after,
            [s.losses for s in res.stages],
            written,
        )
    for name, got in results.items():
        assert got == results["single"], name


@pytest.mark.slow
def test_trained_pair_smoke_and_finetune_accept_every_storage(tmp_path: Path) -> None:
    """On the trained fixture (AL ~3.8, so every position's counter means something): the same
    acceptance counters in smoke and the same teacher-forced accuracies in finetune."""
    from click.testing import CliRunner

    from eagle_convert.cli.app import main
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    drafts = _restored(draft, tmp_path)
    args = [*map(str, drafts.values()), "--target", str(target)]
    res = CliRunner().invoke(
        main,
        [
            "smoke",
            *args,
            "--engine",
            "reference",
            "--limit",
            "1",
            "--category",
            "coding",
            "--category",
            "chat",
            "--max-new-tokens",
            "24",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)["drafts"]
    assert runs[0]["total"]["acceptance_length"] >= 2.0
    keys = ("num_drafts", "num_draft_tokens", "num_accepted", "accepted_per_pos")
    for name, r in zip(drafts, runs, strict=True):
        assert [r["total"][k] for k in keys] == [runs[0]["total"][k] for k in keys], name
        assert [[q[k] for k in ("id", *keys)] for q in r["requests"]] == [
            [q[k] for k in ("id", *keys)] for q in runs[0]["requests"]
        ], name

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "Write a short poem about the sea."}) + "\n")
    accs = {}
    for name in ("single", "sharded", "bin", "nemo"):
        out = tmp_path / f"ft-{name}"
        res = CliRunner().invoke(
            main,
            [
                "finetune",
                str(drafts[name]),
                "--target",
                str(target),
                "--out",
                str(out),
                "--train-prompts",
                str(prompts),
                "--continuation-tokens",
                "8",
                "--steps-fc-norm",
                "1",
                "--steps-all",
                "1",
                "--json",
            ],
        )
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)["result"]
        accs[name] = (data["step_acc_before"], data["step_acc_after"], data["loss_before"])
        assert (out / "model.safetensors").read_bytes() == (tmp_path / "ft-single" / "model.safetensors").read_bytes()
    assert all(a == accs["single"] for a in accs.values()), accs
