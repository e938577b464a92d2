"""Engine sharing: which drafts share one vLLM engine (`vllm/sharing.py`), the guard that keeps a
swap from writing into the target's weights (`vllm/draft_swap.py`), and, in the real vLLM, that
three drafts swapped through one engine give exactly the counters of three separate engines.

Why exact equality holds in the vLLM test: a swapped engine and a fresh one run the same kernels on
the same machine over the same batches (the prefix cache is reset at the swap), so every logit is
computed bit for bit the same; any difference means the swap did not load what a fresh start loads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eagle_convert.draft.card import PROVENANCE_KEY
from eagle_convert.vllm.sharing import (
    FRESH_ENGINES_ENV,
    engine_groups,
    engine_order,
    sharing_enabled,
    swap_key,
)
from eagle_convert.vllm_model import default_release
from eagle_convert.vllm_model.features import vllm_available


def _upgrade(draft: Path, out: Path) -> Path:
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.upgrade.plan import plan_upgrade

    ckpt = open_checkpoint(draft)
    apply_upgrade(plan_upgrade(ckpt, describe(ckpt, default_release())), out)
    return out


def _rewrite(src: Path, dst: Path, **change) -> Path:
    """Copy draft `src` to `dst`; `change` maps a tensor name to a function of it (or to a tensor)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.copytree(src, dst)
    [weights] = list(dst.glob("*.safetensors"))
    with safe_open(str(weights), "pt") as fh:
        meta = fh.metadata()
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    for name, fn in change.items():
        tensors[name.replace("__", ".")] = fn(tensors.get(name.replace("__", "."))) if callable(fn) else fn
    save_file(tensors, str(weights), metadata=meta)
    return dst


def _counts(p) -> tuple:
    """A pass's spec-decode counters."""
    return (p.num_drafts, p.num_draft_tokens, p.num_accepted, p.accepted_per_pos)


def _edit_config(folder: Path, **changes) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, indent=2))
    return folder


# ----------------------------------------------------------------------------------- the key


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.drafts import VLLM_TINY, build_draft

    base = tmp_path_factory.mktemp("family")
    eagle3 = build_draft(base / "eagle3", VLLM_TINY)
    up = _upgrade(eagle3, base / "up")
    tuned = _rewrite(up, base / "tuned", fc_norm__0__weight=lambda t: t * 0.5)
    _edit_config(tuned, **{PROVENANCE_KEY: {"init": "finetuned"}})  # our provenance: read by no vLLM code
    return {"eagle3": eagle3, "up": up, "tuned": tuned, "base": base}


def test_an_upgrade_and_its_tuned_twin_share_a_key_the_original_does_not(family) -> None:
    assert swap_key(family["up"]) == swap_key(family["tuned"]) is not None
    assert swap_key(family["eagle3"]) not in (None, swap_key(family["up"]))


def test_any_config_field_vllm_reads_or_tensor_dtype_separates_engines(family) -> None:
    eps = _edit_config(shutil.copytree(family["up"], family["base"] / "eps"), rms_norm_eps=3e-6)
    assert swap_key(eps) != swap_key(family["up"])
    fp32 = _rewrite(family["up"], family["base"] / "fp32", fc_norm__1__weight=lambda t: t.float())
    assert swap_key(fp32) != swap_key(family["up"])
    assert swap_key(family["base"] / "no-such-draft") is None


def test_groups_keep_first_appearance_order_and_the_target_alone_apart(family) -> None:
    drafts = [family["up"], family["eagle3"], family["tuned"], None, family["up"]]
    assert engine_groups(drafts) == [[0, 2, 4], [1], [3]]
    assert engine_order(drafts) == [0, 2, 4, 1, 3]
    assert engine_order(drafts, share=False) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("value, enabled", [(None, True), ("", True), ("0", True), ("1", False), ("yes", False)])
def test_fresh_engines_env(monkeypatch: pytest.MonkeyPatch, value: str | None, enabled: bool) -> None:
    if value is None:
        monkeypatch.delenv(FRESH_ENGINES_ENV, raising=False)
    else:
        monkeypatch.setenv(FRESH_ENGINES_ENV, value)
    assert sharing_enabled() is enabled


# ----------------------------------------------------------------- the shared-tensor guard


def test_a_tensor_shared_with_the_target_is_skipped_when_equal_and_refused_when_not(tmp_path: Path) -> None:
    """vLLM shares the target's embedding with a draft whose copy is equal; loading a different one
    through the swap would overwrite the target's own embedding, so the swap is refused."""
    import torch
    from safetensors.torch import save_file

    from eagle_convert.vllm.draft_swap import SwapRefused, _check_shared

    embed = torch.randn(16, 4).to(torch.bfloat16)
    shared = {"model.embed_tokens.weight": embed}
    same, other = tmp_path / "same", tmp_path / "other"
    for folder, value in ((same, embed.float()), (other, embed.float() + 1)):
        folder.mkdir()
        save_file({"embed_tokens.weight": value, "fc.weight": torch.ones(4, 8)}, str(folder / "model.safetensors"))
    assert _check_shared(same, shared) == {"embed_tokens.weight"}  # equal after the cast to bf16
    with pytest.raises(SwapRefused) as err:
        _check_shared(other, shared)
    assert (
        str(err.value)
        == "model.safetensors: embed_tokens.weight differs from the target's embed_tokens, which the running draft shares"
    )
    assert _check_shared(other, {}) == set()  # nothing shared: nothing to guard
    (other / "model.safetensors").unlink()
    with pytest.raises(SwapRefused, match=r"^the running draft shares embed_tokens with the target$"):
        _check_shared(other, shared)


# ------------------------------------------------------------------------------ real vLLM


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_three_drafts_one_engine_start_equal_three_separate_runs(
    tmp_path: Path, vllm_session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade of the trained draft and two same-structure twins (fc_norm scaled like calibrated
    ones), each carrying the target's embedding so that vLLM shares it: one engine start and two swaps
    give the counters and tokens of fresh engines. A fourth twin whose embedding differs is refused
    (the swap would overwrite the target's) and gets a fresh engine. Four engine builds: the first
    twin's engine, which the others swap into, is itself a fresh start, so only the two swapped-in
    twins are run again without sharing."""
    from safetensors import safe_open

    from eagle_convert.measure import prepare_smoke_prompts
    from eagle_convert.measure.prompts import builtin_prompts, select_prompts
    from eagle_convert.measure.vllm_measure import measure_vllm
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _m: None)
    with safe_open(str(target / "model.safetensors"), "pt") as fh:
        embed = fh.get_tensor("model.embed_tokens.weight")
    up = _rewrite(_upgrade(draft, tmp_path / "u"), tmp_path / "up", embed_tokens__weight=embed)
    twins = [up] + [
        _rewrite(up, tmp_path / f"x{s}", **{f"fc_norm__{i}__weight": lambda t, s=s: t * s for i in range(3)})
        for s in (0.09, 0.11)
    ]
    odd = _rewrite(twins[1], tmp_path / "odd", embed_tokens__weight=lambda t: t + 0.5)
    pset = prepare_smoke_prompts(
        target, select_prompts(builtin_prompts(), ("chat", "coding"), limit=2), k=3, max_new_tokens=24
    )
    said: list[str] = []

    def run(drafts: list[Path], share: bool):  # in the test run's one worker
        monkeypatch.setattr(vllm_session, "share", share)
        m = measure_vllm(
            target,
            drafts,
            pset,
            k=3,
            max_new_tokens=24,
            temperature=0.0,
            seed=0,
            tensor_parallel_size=1,
            say=said.append,
            session=vllm_session,
        )
        return [d.main for d in m.drafts], m.engine_starts, m.draft_swaps

    shared_runs, starts, swaps = run([*twins, odd], share=True)
    assert (starts, swaps) == (2, 2)  # twins: one start + two swaps; odd: refused, a fresh start
    assert [ln.split(": ", 1)[1].split(" (")[0] for ln in said if ln.startswith("  ")] == [
        "engine started",
        "swapped into the running engine",
        "swapped into the running engine",
        "engine started",
    ]
    assert said[-1].endswith(
        "swap refused: model.safetensors: embed_tokens.weight differs from the target's embed_tokens,"
        " which the running draft shares)"
    )
    workers = vllm_session.worker_starts
    vllm_session.release()  # stops the engine; the worker stays up for the next run (tests/conftest.py)
    assert vllm_session.running and vllm_session.worker_starts == workers
    fresh, starts, swaps = run(twins[1:], share=False)
    assert (starts, swaps) == (2, 0)
    fresh_runs = [shared_runs[0], *fresh]
    counters = [_counts(p) for p in fresh_runs]
    assert len(set(map(str, counters))) == 3, counters  # the twins draft differently: a no-op swap would show
    for a, b in zip(shared_runs[1:3], fresh):
        assert _counts(a) == _counts(b) and a.outputs == b.outputs and a.per_request == b.per_request
    assert min(p.num_accepted for p in fresh_runs) > 0
