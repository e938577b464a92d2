"""`finetune`: refusals (fast, no training) and, on the trained fixture, that a short fine-tune of
the EAGLE-3.1 upgrade recovers the acceptance the upgrade lost (reference engine, real data)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.vllm_model import default_release

try:
    from tests.jsonschemas import check_schema
except ImportError:  # tests/ itself on sys.path
    from jsonschemas import check_schema


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            h.update(f.relative_to(folder).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _folder(path: Path, config: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


# ------------------------------------------------------------------------------ refusals


def test_cli_existing_output_is_refused(tmp_path: Path, built_fixtures) -> None:
    draft, target = built_fixtures("vllm-tiny"), _folder(tmp_path / "t", {})  # a draft: the resolver opens it
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    res = _cli("finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "out"))
    assert res.exit_code == 1
    assert res.stderr == f"Error: {tmp_path / 'out'}: output already exists (pass --force to replace it)\n"
    assert (tmp_path / "out" / "keep.txt").read_text() == "x"


def test_cli_missing_target(tmp_path: Path, built_fixtures) -> None:
    draft = built_fixtures("vllm-tiny")  # a draft: the resolver opens it before the target
    res = _cli("finetune", str(draft), "--target", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: target {tmp_path / 'nope'}: no such folder (finetune needs a local checkpoint folder)\n"
    )


@pytest.mark.parametrize("where", ["inside", "same"])
def test_cli_output_inside_input(tmp_path: Path, where: str, built_fixtures) -> None:
    draft = Path(shutil.copytree(built_fixtures("vllm-tiny"), tmp_path / "d"))  # a draft: the resolver opens it
    target = _folder(tmp_path / "t", {})
    out = draft / "sub" if where == "inside" else draft
    res = _cli("finetune", str(draft), "--target", str(target), "--out", str(out), "--force")
    assert res.exit_code == 1
    assert res.stderr == (
        f"Error: {out}: output is the input draft {draft} or inside it (choose an output folder outside the input)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps-fc-norm", "0", "--steps-all", "0"], "every stage has 0 steps: nothing to train"),
        (["--lr-all", "0"], "stage all: steps must be >= 0, lr > 0 and l2sp >= 0"),
        (["--max-len", "4"], "--max-len must be at least 5 (TTT depth + 2)"),
    ],
)
def test_cli_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    draft, target = _folder(tmp_path / "d", {}), _folder(tmp_path / "t", {})
    res = _cli("finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "o"), *args)
    assert res.exit_code == 2
    assert res.stderr == f"Error: {message}\n"


def test_continuation_tokens_has_one_bound_in_cli_and_library(tmp_path: Path) -> None:
    """`FinetuneOptions.continuation_tokens` (min 1) is click's range in finetune and report alike;
    the library refuses the same value for a Python caller."""
    from eagle_convert.errors import UsageError
    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.plan import plan_finetune

    draft, target = _folder(tmp_path / "d", {}), _folder(tmp_path / "t", {})
    for command in (["finetune", str(draft)],):
        res = _cli(*command, "--target", str(target), "--out", str(tmp_path / "o"), "--continuation-tokens", "0")
        assert (res.exit_code, res.stderr.splitlines()[-1]) == (
            2,
            "Error: Invalid value for '--continuation-tokens': 0 is not in the range x>=1.",
        )
    with pytest.raises(UsageError, match="^`continuation_tokens` must be at least 1$"):
        plan_finetune(draft, target, tmp_path / "o", FinetuneOptions(continuation_tokens=0))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "hidden_size",
            128,
            "target hidden size 128 != the draft's target_hidden_size 256: this draft was not trained for this target",
        ),
        (
            "vocab_size",
            32000,
            "target vocab_size 32000 != the draft's vocab_size 4096: this draft was not trained for this target",
        ),
    ],
)
def test_cli_mismatched_target(built_fixtures, tmp_path: Path, field: str, value: int, message: str) -> None:
    draft = built_fixtures("vllm-tiny-eagle31")
    tcfg = {"hidden_size": 256, "vocab_size": 4096, "num_hidden_layers": 8, field: value}
    target = _folder(tmp_path / "t", tcfg)
    res = _cli("finetune", str(draft), "--target", str(target), "--out", str(tmp_path / "o"))
    assert res.exit_code == 1
    assert res.stderr == f"Error: {message}\n"
    assert not (tmp_path / "o").exists()


def test_mla_draft_is_planned(built_fixtures, tmp_path: Path) -> None:
    """MLA drafts fine-tune (reference/mla.py); a config the reference cannot build is still refused."""
    from eagle_convert.finetune.plan import FinetuneRefusedError, plan_finetune

    draft = built_fixtures("kimi-mla-eagle31")
    cfg = json.loads((draft / "config.json").read_text())
    target = _folder(
        tmp_path / "t", {"hidden_size": cfg["hidden_size"], "vocab_size": cfg["vocab_size"], "num_hidden_layers": 8}
    )
    plan = plan_finetune(draft, target, tmp_path / "o")
    assert plan.variant == "EAGLE-3.1" and not (tmp_path / "o").exists()
    bad = _folder(tmp_path / "gelu", {**cfg, "hidden_act": "gelu"})
    for f in ("model.safetensors",):
        (bad / f).write_bytes((draft / f).read_bytes())
    with pytest.raises(FinetuneRefusedError, match="cannot be fine-tuned: the reference engine cannot build it"):
        plan_finetune(bad, target, tmp_path / "o2")


# ------------------------------------------------------------------ the trained fixture


def _corpus_prompts(n: int):
    """Training prompts disjoint from the built-in set the acceptance is measured on."""
    from eagle_convert.measure.prompts import Prompt
    from fixtures.corpus_prompts import corpus_prompts

    return [Prompt(f"c{i}", "custom", text=t) for i, t in enumerate(corpus_prompts(n, seed=1))]


@pytest.mark.slow
def test_finetune_recovers_acceptance_of_the_upgrade(tmp_path: Path) -> None:
    import torch

    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe
    from eagle_convert.draft.inspect import inspect_checkpoint
    from eagle_convert.finetune.options import FinetuneOptions
    from eagle_convert.finetune.run import finetune_draft
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.measure.prompts import builtin_prompts
    from eagle_convert.measure.smoke import run_smoke
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.upgrade.plan import PROVENANCE_KEY, plan_upgrade
    from eagle_convert.validate.run import validate_checkpoint
    from fixtures.trained import build_trained_pair

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        target, draft = build_trained_pair(log=lambda _msg: None)
        up = tmp_path / "eagle31"
        ckpt = open_checkpoint(draft)
        apply_upgrade(plan_upgrade(ckpt, describe(ckpt, default_release(), read_vocab=False)), up)
        before = _tree_hash(up)
        out = tmp_path / "eagle31-ft"
        res = finetune_draft(
            up,
            target,
            out,
            FinetuneOptions(continuation_tokens=48, steps_fc_norm=40, lr_fc_norm=1e-3, steps_all=40, lr_all=1e-4),
            prompts=_corpus_prompts(48),
        )
        assert _tree_hash(up) == before  # the input never changes
        assert [s.name for s in res.stages] == ["fc_norm", "all"]
        # Measured sums 0.95 -> 2.18-2.20 (training seeds 0, 1, 2): +1.2 against a bound of +0.3.
        assert sum(res.step_acc_after) > sum(res.step_acc_before) + 0.3

        held_out = [
            p for c in ("coding", "chat", "reasoning") for p in [q for q in builtin_prompts() if q.category == c][:2]
        ]
        rep = run_smoke(
            target, [draft, up, out], MeasureOptions(engine="reference", max_new_tokens=32), prompts=held_out
        )
    finally:
        torch.set_num_threads(threads)
    al_orig, al_up, al_ft = (d.total.acceptance_length for d in rep.drafts)
    print(f"AL original {al_orig:.3f}, upgraded {al_up:.3f}, fine-tuned {al_ft:.3f}; fine-tune {res.seconds:.1f}s")
    # Training runs through fp32 kernels that round differently on another CPU, so the fine-tuned
    # draft differs a little by host. Measured with training seeds 0, 1, 2 (a larger perturbation
    # than rounding) and two versions of the trainer: AL original 2.98, upgraded 1.30, fine-tuned
    # 2.95-3.08, i.e. 99-103% of the original (107% on an earlier build of the fixture). The bounds
    # sit 1.1 AL and 9-13% below those values.
    assert al_ft > al_up + 0.5
    assert al_ft >= 0.9 * al_orig

    report = validate_checkpoint(out, target=target)
    assert not report.errors, [f.code for f in report.errors]
    assert inspect_checkpoint(str(out)).to_dict()["variant"] == "EAGLE-3.1"
    cfg = json.loads((out / "config.json").read_text())
    src = json.loads((up / "config.json").read_text())
    assert {k: v for k, v in cfg.items() if k != PROVENANCE_KEY} == {
        k: v for k, v in src.items() if k != PROVENANCE_KEY
    }
    prov = cfg[PROVENANCE_KEY]
    assert prov["operation"] == "finetune (TTT)"
    assert prov["previous"]["operation"].startswith("upgrade")
    assert [s["steps"] for s in prov["stages"]] == [40, 40]
    assert "fc_norm.0.weight" in prov["stages"][0]["trainable"]
    # The written weights are the best held-out EAL among the input and every step, not the last step's.
    sel = prov["selection"]
    assert sel["held_out_sequences"] == res.held_out == 9 and sel["kept"] == res.best
    best_eal = max([res.eal_before] + [e for st in res.stages for _, e in st.eal])
    assert abs(res.best["eal"] - best_eal) < 1e-4 and res.best["eal"] > res.eal_before
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    assert "**finetune (TTT)**" in card.text and "**upgrade EAGLE-3 -> EAGLE-3.1**" in card.text
    from eagle_convert.validate.matrix import serving_summary

    assert f"**vLLM releases**: {serving_summary(out)}." in card.text  # the matrix of the written draft


@pytest.mark.slow
def test_cli_json_and_force(tmp_path: Path) -> None:
    """The command end to end on a tiny run: JSON shape, --force replaces, input untouched."""
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p.text}) + "\n" for p in _corpus_prompts(3)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    before = _tree_hash(draft)
    res = _cli(
        "finetune",
        str(draft),
        "--target",
        str(target),
        "--out",
        str(out),
        "--train-prompts",
        str(prompts),
        "--continuation-tokens",
        "8",
        "--steps-fc-norm",
        "2",
        "--steps-all",
        "1",
        "--force",
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "finetune-report.schema.json")
    assert data["plan"]["variant"] == "EAGLE-3" and data["plan"]["num_prompts"] == 3
    assert [s["name"] for s in data["result"]["stages"]] == ["fc_norm", "all"]
    assert len(data["result"]["step_acc_after"]) == 3
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    assert data["plan"]["max_len"] == 128 and data["result"]["held_out"] == 1  # 3 prompts: the last is held out
    assert data["result"]["best"]["stage"] in ("start", "fc_norm", "all")
    assert [e[0] for e in data["result"]["stages"][0]["eal"]] == [1, 2]  # scored every step
    assert _tree_hash(draft) == before
    assert "finetune: stage fc_norm" in res.stderr
    # One scale for people: the progress gives the held-out AL (1 + EAL); EAL stays in the JSON.
    first = 1 + data["result"]["eal_before"]
    assert f"finetune: held-out AL of the input {first:.3f} (1 sequences)" in res.stderr
    assert "EAL" not in res.stderr


def test_people_read_acceptance_length_json_keeps_eal(tmp_path: Path) -> None:
    """The result table and the kept line show AL = 1 + EAL; `to_dict` keeps the EAL it records."""
    from types import SimpleNamespace

    from rich.console import Console

    from eagle_convert.cli.render.finetune import render_result
    from eagle_convert.finetune.plan import FinetuneResult, StageResult

    stage = StageResult("all", 2, 1e-4, 0.0, ["fc.weight"], [1.5, 1.2], 3.0, eal=[(1, 1.25), (2, 1.5)])
    result = FinetuneResult(
        tmp_path,
        [stage],
        [0.3] * 3,
        [0.6] * 3,
        1.6,
        1.2,
        10,
        500,
        1.0,
        5.0,
        held_out=2,
        eal_before=0.467,
        best={"stage": "all", "step": 2, "eal": 1.5},
    )
    console = Console(record=True, width=200)
    render_result(console, SimpleNamespace(target="t", draft="d"), result)  # type: ignore[arg-type]
    text = console.export_text()
    assert "held-out AL first → last (max)" in text and "2.250 → 2.500 (2.500)" in text
    assert "stage all step 2: held-out AL 1.467 → 2.500" in text
    assert "EAL" not in text
    assert result.to_dict()["eal_before"] == 0.467 and result.to_dict()["stages"][0]["eal"] == [[1, 1.25], [2, 1.5]]
