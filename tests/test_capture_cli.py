"""`capture`, `finetune --cache/--capture` and `upgrade --init calibrated --cache/--capture`: the
reference engine on the trained fixture pair (CPU, fast); the vLLM path is tests/test_capture_vllm.py.

Training and calibrating from a cache equal their online runs (the same data: the reference
capture makes exactly online finetune's sequences); a cache of another draft is refused in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschemas import check_schema

torch = pytest.importorskip("torch")

from eagle_convert.cache.options import CaptureOptions  # noqa: E402
from eagle_convert.cache.store import read_manifest  # noqa: E402
from eagle_convert.cli.app import main  # noqa: E402
from eagle_convert.vllm_model import default_release  # noqa: E402

REF = CaptureOptions(engine="reference", shard_size=2)


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict:
    from fixtures.corpus_prompts import corpus_prompts
    from fixtures.trained import build_trained_pair

    torch.set_num_threads(1)
    target, draft = build_trained_pair(log=lambda _m: None)
    root = tmp_path_factory.mktemp("capcli")
    prompts = root / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in corpus_prompts(6, seed=3)))
    return {"target": target, "draft": draft, "prompts": prompts, "root": root}


def _shas(folder: Path) -> dict[int, str]:
    return {n: e.sha256 for n, e in read_manifest(folder).shards.items()}


def test_cli_capture_end_to_end_and_resume(pair, tmp_path: Path) -> None:
    args = ["capture", "--target", str(pair["target"]), "--draft", str(pair["draft"]), "--out", str(tmp_path / "c")]
    args += ["--prompts", str(pair["prompts"]), "--continuation-tokens", "8", "--engine", "reference"]
    res = _cli(*args, "--shard-size", "4", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["captured_shards"] == [0, 1] and got["sequences"] == 6 and got["engine"] == "reference"
    assert got["tokens_per_s"] > 0 and got["bytes_per_token"] > 0
    check_schema(got, "capture-report.schema.json")
    man = read_manifest(tmp_path / "c")
    assert man.provenance["0"]["continuation"] == "target greedy (reference), 8 tokens"
    again = json.loads(_cli(*args, "--shard-size", "4", "--json").stdout)
    assert again["captured_shards"] == [] and _shas(tmp_path / "c") == {n: e.sha256 for n, e in man.shards.items()}
    res = _cli(*args, "--shard-size", "3")
    assert res.exit_code == 2
    assert res.stderr.splitlines(keepends=True)[-1] == (  # after the progress lines
        f"Error: {tmp_path / 'c'}: holds a capture of another plan (shard_size differ); "
        "use another --out, or --force to start over\n"
    )
    res = _cli(*args, "--shard-size", "3", "--force")
    assert res.exit_code == 0 and "captured now" in res.stdout and "tokens/s" in res.stdout


def test_cli_capture_refuses_ray_where_ray_is_missing(pair, tmp_path: Path, monkeypatch) -> None:
    """`--distributed-executor-backend ray` needs Ray on the driver: refused in one line before anything
    loads (Ray itself is not a dependency: the test hides it where it is installed)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    out = tmp_path / "c"
    res = _cli(
        "capture", "--target", str(pair["target"]), "--draft", str(pair["draft"]), "--out", str(out),
        "--distributed-executor-backend", "ray",
    )  # fmt: skip
    assert res.exit_code == 2 and not out.exists()
    assert res.stderr == (
        "Error: --distributed-executor-backend ray: Ray is not installed here "
        "(pip install ray and start the Ray cluster first: docs/scale.md)\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--engine", "reference", "--pipeline-parallel-size", "2"],
            "Error: --engine reference runs the target in one process; --tensor-parallel-size, "
            "--pipeline-parallel-size and --distributed-executor-backend need --engine vllm\n",
        ),
        (
            ["--engine", "reference", "--tensor-parallel-size", "2"],
            "Error: --engine reference runs the target in one process; --tensor-parallel-size, "
            "--pipeline-parallel-size and --distributed-executor-backend need --engine vllm\n",
        ),
        (
            ["--engine", "reference", "--distributed-executor-backend", "mp"],
            "Error: --engine reference runs the target in one process; --tensor-parallel-size, "
            "--pipeline-parallel-size and --distributed-executor-backend need --engine vllm\n",
        ),
    ],
)
def test_cli_capture_usage_errors(pair, tmp_path: Path, extra: list[str], message: str) -> None:
    res = _cli(
        "capture", "--target", str(pair["target"]), "--draft", str(pair["draft"]), "--out", str(tmp_path / "c"), *extra
    )
    assert res.exit_code == 2 and res.stderr == message
    assert not (tmp_path / "c").exists()


def test_cli_capture_resolves_its_folders_as_every_command_does(pair, tmp_path: Path) -> None:
    """`draft.local_checkpoint`: a missing target, and a target given as the draft, are one line, exit 1."""
    out = tmp_path / "c"
    ref = ("--engine", "reference")  # vLLM's extra is checked before the folders: the reference engine needs none
    res = _cli("capture", "--target", str(tmp_path / "nope"), "--draft", str(pair["draft"]), "--out", str(out), *ref)
    assert res.exit_code == 1
    assert (
        res.stderr == f"Error: target {tmp_path / 'nope'}: no such folder (capture needs a local checkpoint folder)\n"
    )
    res = _cli("capture", "--target", str(pair["target"]), "--draft", str(pair["target"]), "--out", str(out), *ref)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"Error: {pair['target']}: this looks like the target model, a full causal LM")
    assert not out.exists()


def test_cli_capture_without_vllm_names_the_extra(pair, tmp_path: Path, monkeypatch) -> None:
    import eagle_convert.extras as extras

    monkeypatch.setattr(extras, "module_available", lambda name: name != "vllm")
    res = _cli("capture", "--target", str(pair["target"]), "--draft", str(pair["draft"]), "--out", str(tmp_path / "c"))
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: capture --engine vllm needs vllm, which is not installed: pip install")


def _finetune_opts():
    from eagle_convert.finetune.options import FinetuneOptions

    return FinetuneOptions(
        prompts=None, continuation_tokens=8, steps_fc_norm=3, steps_all=3, lr_fc_norm=1e-3, lr_all=1e-4
    )


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_finetune_from_the_cache_equals_online_finetune(pair, tmp_path: Path) -> None:
    """Online: the target generates, then its features are computed batched (right-padded); the
    cache holds the same sequences (the reference capture runs online finetune's generate) with
    features computed one sequence at a time. fp32 matmuls of other shapes round differently
    (~1e-6 relative), so the loss curves and weights agree to 1e-4, not bit for bit."""
    from eagle_convert.finetune.capture import capture_training_data
    from eagle_convert.finetune.plan import plan_finetune
    from eagle_convert.finetune.run import run_finetune
    from eagle_convert.measure.prompts import load_prompts

    items = load_prompts(pair["prompts"])
    online = run_finetune(
        plan_finetune(pair["draft"], pair["target"], tmp_path / "online", _finetune_opts(), prompts=items)
    )
    res = capture_training_data(pair["draft"], pair["target"], tmp_path / "c", _finetune_opts(), REF, prompts=items)
    assert res.captured == [0, 1, 2]
    plan = plan_finetune(pair["draft"], pair["target"], tmp_path / "cached", _finetune_opts(), cache=tmp_path / "c")
    assert plan.prompts_label == f"cache {tmp_path / 'c'}"
    cached = run_finetune(plan)
    assert cached.sequences == online.sequences and cached.tokens == online.tokens and cached.generate_seconds == 0
    for a, b in zip(online.stages, cached.stages):
        assert a.losses == pytest.approx(b.losses, rel=1e-4, abs=1e-5), a.name
        assert [e for _, e in a.eal] == pytest.approx([e for _, e in b.eal], abs=1e-4)
    assert online.best == cached.best  # the same step kept
    # The drafts are written in bf16 (the input's dtype): a ~1e-6 difference flips a value lying at a
    # rounding boundary by one bf16 ulp (2^-7 relative to the larger), so: within 2^-6, and rarely.
    w_on, w_ca = _weights(tmp_path / "online"), _weights(tmp_path / "cached")
    flipped = sum(int((w_on[k] != w_ca[k]).sum()) for k in w_on)
    total = sum(v.numel() for v in w_on.values())
    worst = max(float((w_on[k].float() - w_ca[k].float()).abs().max()) for k in w_on)
    print(f"finetune --cache vs online: {flipped} of {total} written weights differ, max |diff| {worst:.2e}")
    assert flipped <= total // 1000
    for k, v in w_on.items():
        assert torch.allclose(v.float(), w_ca[k].float(), rtol=2**-6, atol=1e-4), k


def test_cli_finetune_capture_then_cache(pair, tmp_path: Path) -> None:
    """`finetune --capture reference` captures into OUT.cache and trains; `--cache` on that cache
    trains again without capturing, to the same weights (the same features, read back)."""
    common = ["--target", str(pair["target"]), "--train-prompts", str(pair["prompts"]), "--continuation-tokens", "8"]
    common += ["--steps-fc-norm", "2", "--steps-all", "2"]
    res = _cli(
        "finetune", str(pair["draft"]), "--out", str(tmp_path / "a"), *common, "--capture", "reference", "--json"
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["plan"]["cache"] == str(tmp_path / "a.cache")
    assert read_manifest(tmp_path / "a.cache").complete()
    common.remove("--train-prompts")
    common.remove(str(pair["prompts"]))
    res = _cli(
        "finetune", str(pair["draft"]), "--out", str(tmp_path / "b"), *common, "--cache", str(tmp_path / "a.cache")
    )
    assert res.exit_code == 0, res.output
    w_a, w_b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(w_a[k], w_b[k]) for k in w_a)


def test_capture_then_finetune_cache_on_a_speculators_upgrade(pair, tmp_path: Path) -> None:
    """A speculators config keeps draft_vocab_size at its top level (not in transformer_layer_config):
    capture reads the draft as every command does, so it stores logits on the 1,024-token draft
    vocabulary (not the target's 4,096), the same rows as for the vLLM-layout draft, and
    `finetune --cache` trains from the cache it just made (it refused it before: issue 32)."""
    from safetensors import safe_open

    from eagle_convert.cache.capture import draft_features_spec
    from eagle_convert.vllm_model import installed_status

    spec = tmp_path / "spec"
    res = _cli(
        "upgrade", str(pair["draft"]), "--out", str(spec), "--layout", "speculators", "--target", str(pair["target"])
    )
    assert res.exit_code == 0, res.output
    config = json.loads((spec / "config.json").read_text())
    assert config["draft_vocab_size"] == 1024 and "draft_vocab_size" not in config["transformer_layer_config"]
    release = installed_status().rules
    assert draft_features_spec(spec, 8, release) == draft_features_spec(pair["draft"], 8, release)
    cache = tmp_path / "c"
    args = ["capture", "--target", str(pair["target"]), "--draft", str(spec), "--out", str(cache)]
    res = _cli(*args, "--prompts", str(pair["prompts"]), "--continuation-tokens", "8", "--engine", "reference")
    assert res.exit_code == 0, res.output
    man = read_manifest(cache)
    with safe_open(str(cache / man.shards[0].file), framework="pt") as h:
        assert h.get_slice("s0.logits").get_shape()[-1] == 1024
    res = _cli(
        "finetune", str(spec), "--target", str(pair["target"]), "--out", str(tmp_path / "ft"), "--cache", str(cache),
        "--steps-fc-norm", "2", "--steps-all", "2",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ft" / "model.safetensors").is_file()


def test_a_reduced_vocabulary_without_d2t_is_refused_in_one_line(pair, tmp_path: Path) -> None:
    """Logits on the draft vocabulary need its target ids: without d2t, capture stops before the target loads."""
    import shutil

    from safetensors.torch import save_file

    from eagle_convert.cache.capture import draft_features_spec
    from eagle_convert.errors import UsageError
    from eagle_convert.vllm_model import installed_status

    bad = tmp_path / "no-d2t"
    shutil.copytree(pair["draft"], bad)
    weights = {k: v for k, v in _weights(pair["draft"]).items() if k != "d2t"}
    save_file(weights, str(bad / "model.safetensors"))
    with pytest.raises(UsageError) as err:
        draft_features_spec(bad, 8, installed_status().rules)
    assert str(err.value) == (
        f"{bad}: draft_vocab_size 1024 < vocab_size 4096 but no d2t of 1024 entries; "
        "eagle-convert validate names what is wrong"
    )


def test_cli_finetune_refuses_a_cache_of_other_aux_ids(pair, tmp_path: Path) -> None:
    from eagle_convert.cache.capture import capture_cache

    capture_cache(pair["target"], pair["draft"], [[1, 2, 3, 4, 5, 6]], tmp_path / "c", REF, release=default_release())
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    man["plan"]["aux_ids"] = [2, 4, 5]
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    res = _cli(
        "finetune", str(pair["draft"]), "--target", str(pair["target"]), "--out", str(tmp_path / "o"),
        "--cache", str(tmp_path / "c"),
    )  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr == (
        f"Error: {tmp_path / 'c' / 'manifest.json'}: aux_ids [2, 4, 5] differ from the draft's aux layer ids "
        f"[1, 3, 6]; capture for it (eagle-convert capture --target {pair['target'].resolve()} "
        f"--draft {pair['draft'].resolve()} "
        "--out NEW_CACHE)\n"
    )
    res = _cli(
        "finetune", str(pair["draft"]), "--target", str(pair["target"]), "--out", str(tmp_path / "o"),
        "--cache", str(tmp_path / "nope"),
    )  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr == (
        f"Error: {tmp_path / 'nope'}: not a capture cache (no manifest.json); create it with eagle-convert capture\n"
    )
    res = _cli(
        "finetune", str(pair["draft"]), "--target", str(pair["target"]), "--out", str(tmp_path / "o"),
        "--cache", str(tmp_path / "c"), "--train-prompts", str(pair["prompts"]),
    )  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr == "Error: --train-prompts with --cache: the cache holds the training data; drop one of them\n"


def test_calibrated_from_the_cache_equals_online_calibration(pair, tmp_path: Path) -> None:
    """The cache of the calibration prompts alone (no continuation) holds the aux states the online
    calibration computes (the same fp32 forward, one sequence at a time): equal values, agreement."""
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.finetune.calibrate import calibrate_fc_norm
    from eagle_convert.measure.prompts import load_prompts

    items = load_prompts(pair["prompts"])
    ckpt = open_checkpoint(pair["draft"])
    online = calibrate_fc_norm(
        ckpt, pair["target"], aux_ids=[1, 3, 6], prompts=items, device="cpu", release=default_release()
    )
    cached = calibrate_fc_norm(
        ckpt,
        pair["target"],
        aux_ids=[1, 3, 6],
        prompts=items,
        cache=tmp_path / "c",
        capture=REF,
        release=default_release(),
    )
    print("calibrated values online", online.values, "cache", cached.values)
    assert cached.values == pytest.approx(online.values, rel=1e-6)
    assert cached.tokens == online.tokens and cached.positions == online.positions
    assert cached.agreement == pytest.approx(online.agreement, abs=1e-9)
    assert cached.agreement_identity == pytest.approx(online.agreement_identity, abs=1e-9)


def test_cli_upgrade_calibrated_capture_then_cache(pair, tmp_path: Path) -> None:
    base = ["upgrade", str(pair["draft"])]
    opts = ["--target", str(pair["target"]), "--init", "calibrated", "--calibration-prompts", str(pair["prompts"])]
    res = _cli(*base, "--out", str(tmp_path / "a"), *opts, "--capture", "reference", "--json")
    assert res.exit_code == 0, res.output
    assert read_manifest(tmp_path / "a.cache").complete()
    res = _cli(*base, "--out", str(tmp_path / "b"), *opts, "--cache", str(tmp_path / "a.cache"), "--json")
    assert res.exit_code == 0, res.output
    w_a, w_b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(w_a[k], w_b[k]) for k in w_a if k.startswith("fc_norm"))
    res = _cli(*base, "--out", str(tmp_path / "c"), "--cache", str(tmp_path / "a.cache"))
    assert res.exit_code == 2 and res.stderr == "Error: --cache and --capture are for --init calibrated\n"


def test_report_finetune_stage_takes_the_capture_path(pair, tmp_path: Path) -> None:
    """report --capture: its fine-tune stage captures into the cache and trains from it, and its
    commands.sh line reproduces that (`finetune ... --capture ENGINE --cache CACHE`)."""
    from eagle_convert.report.stages import finetune_stage

    lines: list[str] = []
    data = _finetune_opts()
    result, cmd = finetune_stage(
        pair["draft"],
        pair["target"],
        tmp_path / "ft",
        replace(data, prompts=str(pair["prompts"])),
        lines.append,
        capture="reference",
        cache=tmp_path / "finetune-capture",
    )
    assert result["plan"]["cache"] == str(tmp_path / "finetune-capture")
    assert read_manifest(tmp_path / "finetune-capture").complete()
    assert cmd.endswith(f"--capture reference --cache {tmp_path / 'finetune-capture'}")
    assert any("captured" in line for line in lines)


def test_cli_capture_interrupted_after_a_shard_resumes_to_the_same_cache(pair, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C right after the first shard is published: exit 130 and a line saying what was kept;
    the same command again captures the rest, and the cache equals an uninterrupted one."""
    import eagle_convert.cache.capture as capture_mod

    args = ["capture", "--target", str(pair["target"]), "--draft", str(pair["draft"])]
    args += ["--prompts", str(pair["prompts"]), "--continuation-tokens", "8", "--engine", "reference"]
    args += ["--shard-size", "2"]
    assert _cli(*args, "--out", str(tmp_path / "whole")).exit_code == 0
    publish = capture_mod._publish

    def cut(tmp: Path, final: Path) -> None:
        publish(tmp, final)
        if final.name == "shard-00000.safetensors":
            raise KeyboardInterrupt

    monkeypatch.setattr(capture_mod, "_publish", cut)
    res = _cli(*args, "--out", str(tmp_path / "cut"))
    assert res.exit_code == 130
    # the manifest is saved after each shard: the one published just before the interrupt is redone
    assert res.stderr.splitlines()[-1] == (
        f"Error: interrupted (SIGINT); 0 whole shards kept in {tmp_path / 'cut'}: run the same capture again to resume"
    )
    monkeypatch.setattr(capture_mod, "_publish", publish)
    import eagle_convert.finetune.capture as data_mod

    def no_generation(*_a, **_k):
        raise AssertionError("a resumed capture must reuse its sequences.json")

    monkeypatch.setattr(data_mod, "greedy_continuations", no_generation)
    res = _cli(*args, "--out", str(tmp_path / "cut"), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["captured_shards"] == [0, 1, 2]
    assert _shas(tmp_path / "cut") == _shas(tmp_path / "whole")
    for name in ("shard-00000.safetensors", "shard-00001.safetensors", "shard-00002.safetensors"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_cli_finetune_plan_names_the_cache(pair, tmp_path: Path) -> None:
    from eagle_convert.cache.capture import capture_cache

    capture_cache(
        pair["target"], pair["draft"], [[1, 2, 3, 4, 5, 6, 7, 8]], tmp_path / "c", REF, release=default_release()
    )
    res = _cli(
        "finetune", str(pair["draft"]), "--target", str(pair["target"]), "--out", str(tmp_path / "o"),
        "--cache", str(tmp_path / "c"), "--steps-fc-norm", "1", "--steps-all", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "the sequences of the capture cache" in " ".join(res.stdout.split())


_PROGRESS_LINE = re.compile(r"^(?P<label>[^:]+(?:: [a-z][^:]*)?): \d+/\d+ (?P<unit>prompts|shards|steps)\b")


def _progress_labels(stderr: str) -> dict[str, str]:
    """label -> unit of every progress line (`target continuations: 3/6 prompts (1s, ...)`)."""
    return {m["label"]: m["unit"] for line in stderr.splitlines() if (m := _PROGRESS_LINE.match(line))}


def test_the_same_step_shows_the_same_label_in_every_command(pair, tmp_path: Path, monkeypatch) -> None:
    """Issue 33: `capture`, `finetune --capture` and `upgrade --init calibrated --capture` run the same
    steps (the target's continuations, the capture's shards) and show them under one label each; they
    were `capture: target continuations` in one command and `finetune capture: target continuations`
    in another (eagle_convert/progress.py STEPS is now the one table)."""
    import eagle_convert.cli.progress as progress

    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)  # a line per tick: the tiny runs take seconds
    target, draft, prompts = str(pair["target"]), str(pair["draft"]), str(pair["prompts"])
    res = _cli(
        "capture", "--target", target, "--draft", draft, "--out", str(tmp_path / "c"), "--prompts", prompts,
        "--continuation-tokens", "8", "--engine", "reference", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    capture = _progress_labels(res.stderr)
    res = _cli(
        "finetune", draft, "--target", target, "--out", str(tmp_path / "f"), "--train-prompts", prompts,
        "--continuation-tokens", "8", "--steps-fc-norm", "1", "--steps-all", "1", "--capture", "reference", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    finetune = _progress_labels(res.stderr)
    res = _cli(
        "upgrade", draft, "--out", str(tmp_path / "u"), "--target", target, "--init", "calibrated",
        "--calibration-prompts", prompts, "--capture", "reference", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    upgrade = _progress_labels(res.stderr)
    assert capture == {"target continuations": "prompts", "capture": "shards"}
    assert finetune == {**capture, "finetune fc_norm": "steps", "finetune all": "steps"}
    # Calibration data are the prompts alone (no continuations); the calibration's own two steps follow.
    assert upgrade == {
        "capture": "shards",
        "calibrate: aux hidden states": "prompts",
        "calibrate: agreement": "prompts",
    }
