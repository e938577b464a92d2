"""25 real published draft configs at their real dimensions: inspect, validate and upgrade.

Each config (tests/data/realconfigs/) is built with its producer's tensor names as a sparse
checkpoint (fixtures/realconfigs.py: ~77 GB of weights stored as holes, ~10 MB on disk, built in
well under a second). What inspect must report and which errors validate must raise were worked
out by hand from the config, the target's dimensions and vLLM 0.32.0's source; the reasons are
written next to each. The full upgrade, which copies every byte, is `slow`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from fixtures.realconfigs import REAL_CONFIGS, build_all, materialize_plan, plan_for, tensors_of
from fixtures.sparse import allocated_bytes

KEYS = list(REAL_CONFIGS)

# Errors validate must report (all other configs: none). Warnings are recorded in docs/realconfigs.md.
EXPECTED_ERRORS: dict[str, set[str]] = {
    # SpecForge registers d2t/t2d whatever the vocabulary; with draft_vocab_size == vocab_size vLLM
    # builds no draft_id_to_target_id (llama_eagle3.py Eagle3LlamaForCausalLM.__init__) and d2t has
    # nowhere to load.
    "specforge-longcat-flash": {"E403"},
    # Method eagle3 prefixes the name (EAGLEConfig): Eagle3PEagleDraftModel is not registered.
    "specforge-qwen3-8b-peagle": {"E301"},
    # model_type deepseek_v3 is in SpeculativeConfig.hf_config_override's MTP list.
    "torchspec-qwen3-8b-mla": {"E302"},
    # Glm4MoeForCausalLMEagle3 is not registered, and no EAGLE-3 class has the MoE MLP's parameters.
    "torchspec-glm4-moe": {"E101", "E102", "E301"},
    # Four ids, top-level only: Eagle3LlamaForCausalLM counts num_aux_hidden_states or
    # eagle_config ids, finds neither, builds fc for 3 and the [4096, 16384] fc.weight does not fit.
    "speculators-qwen3-235b-4aux": {"E202"},
}


def _default_ids(n: int) -> tuple[int, int, int]:
    # vLLM 0.32.0 model_executor/models/interfaces.py get_eagle3_default_aux_hidden_state_layers
    return (2, n // 2, n - 3)


# SpecForge's Kimi-K2.5 [2, 30, 58] (ids not starting at 1, a DeepSeek-V3-class target): its HF backend
# trained A(3, 31, 59), its SGLang backend A(2, 30, 58) (SGLang's first-id rule), so upgrade refuses.
AMBIGUOUS_IDS = {"specforge-pr476-kimi-k25"}

# EAGLE-3 drafts without errors whose aux ids are known (configured, or the target's depth is).
UPGRADABLE = [
    k
    for k, rc in REAL_CONFIGS.items()
    if rc.expect.variant == "EAGLE-3"
    and k not in EXPECTED_ERRORS
    and k not in AMBIGUOUS_IDS
    and (rc.expect.aux_ids or rc.target.num_hidden_layers)
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    return build_all(tmp_path_factory.mktemp("realconfigs"))


def test_real_dimensions_cost_no_disk(built):
    files = [d / "model.safetensors" for d, _ in built.values()]
    apparent = sum(f.stat().st_size for f in files)
    stored = sum(allocated_bytes(f) for f in files)
    assert apparent > 70e9  # the real sizes: 0.8 GB (Qwen3-8B drafts) to 7.4 GB (GLM MoE draft)
    assert stored < 32 << 20, f"{stored} bytes stored: the weight region is not a hole"


def test_producer_tensors_match_published_sizes(built):
    """Independent facts about published files: the tensor pattern reproduces them exactly."""
    # rohseh303/rust-eagle3 models/small400/README.md: model.safetensors is 799,457,128 bytes.
    assert (built["rust-eagle3-small400"][0] / "model.safetensors").stat().st_size == 799_457_128
    # AngelSlim/Qwen3-8B_eagle3 as measured by a third-party zoo loader: fc 50,331,648 elements,
    # lm_head 131,072,000, q_proj 33,554,432, k/v 8,388,608, gate/up/down 50,331,648 each.
    shapes = {name: shape for name, _, shape in tensors_of(REAL_CONFIGS["angelslim-qwen3-8b"])}
    numel = {n: s[0] * (s[1] if len(s) > 1 else 1) for n, s in shapes.items()}
    assert numel["fc.weight"] == 50_331_648 and numel["lm_head.weight"] == 131_072_000
    assert numel["midlayer.self_attn.q_proj.weight"] == 33_554_432
    assert numel["midlayer.self_attn.k_proj.weight"] == numel["midlayer.self_attn.v_proj.weight"] == 8_388_608
    assert {numel[f"midlayer.mlp.{p}_proj.weight"] for p in ("gate", "up", "down")} == {50_331_648}


@pytest.mark.parametrize("key", KEYS)
def test_inspect_real_config(built, key):
    from eagle_convert.draft.inspect import inspect_checkpoint

    rc, draft = REAL_CONFIGS[key], built[key][0]
    info = inspect_checkpoint(draft).info
    e = rc.expect
    got = {
        "hidden": info.hidden_size,
        "target_hidden": info.target_hidden_size,
        "num_aux": info.num_aux,
        "aux_ids": tuple(info.aux_layer_ids) if info.aux_layer_ids else None,
        "vocab": info.vocab_size,
        "draft_vocab": info.draft_vocab_size,
        "variant": info.variant,
        "vllm_class": info.vllm_class,
        "layers": info.num_layers,
    }
    want = {
        "hidden": e.hidden,
        "target_hidden": e.target_hidden,
        "num_aux": e.num_aux,
        "aux_ids": e.aux_ids,
        "vocab": e.vocab,
        "draft_vocab": e.draft_vocab,
        "variant": e.variant,
        "vllm_class": e.vllm_class,
        "layers": e.layers,
    }
    assert got == want
    if e.draft_vocab < e.vocab:  # the d2t written is read back: ids in range, one per kept token
        d2t, t2d = info.vocab.d2t, info.vocab.t2d
        assert d2t["unique"] and d2t["increasing"] and 0 <= d2t["min_target_id"] <= d2t["max_target_id"] < e.vocab
        assert t2d is None or (t2d["count"] == e.draft_vocab and t2d["consistent_with_d2t"])


@pytest.mark.parametrize("key", KEYS)
def test_validate_real_config(built, key):
    from eagle_convert.validate.run import validate_checkpoint

    draft, target = built[key]
    report = validate_checkpoint(draft, target=target)
    json.dumps(report.to_dict())  # the JSON report holds plain data
    errors = {f.code for f in report.errors}
    want = EXPECTED_ERRORS.get(key, set())
    assert errors == want, (
        f"{key}: validate's errors changed (new {sorted(errors - want)}, gone {sorted(want - errors)}): if a new "
        "check is right, add it to EXPECTED_ERRORS with its reason and regenerate docs/realconfigs.md"
    )


def test_docs_list_every_finding(built):
    """docs/realconfigs.md names every code validate reports for each config today."""
    from eagle_convert.validate.run import validate_checkpoint

    doc = (Path(__file__).resolve().parent.parent / "docs" / "realconfigs.md").read_text(encoding="utf-8")
    sections = {s.split("`", 1)[0]: s for s in doc.split("### `")[1:]}
    stale = []
    for key, (draft, target) in built.items():
        codes = {
            f.code
            for f in validate_checkpoint(draft, target=target).findings
            if not (f.code == "W504" and REAL_CONFIGS[key].target.rope is None)
        }
        missing = sorted(c for c in codes if f"`{c}`" not in sections.get(key, ""))
        if missing:
            stale.append(f"{key}: {missing}")
    assert not stale, f"regenerate: python -m fixtures.realconfigs_report > docs/realconfigs.md ({stale})"


def _expected_ids(key: str) -> tuple[int, ...]:
    """The ids vLLM must read after upgrade. Every producer of these configs that writes ids only into
    eagle_config (SpecForge, TorchSpec, ModelOpt) trains id k on the output of target layer k: vLLM's k + 1."""
    rc = REAL_CONFIGS[key]
    if rc.expect.aux_ids is None:
        return _default_ids(rc.target.num_hidden_layers)
    nested_only = "eagle_aux_hidden_state_layer_ids" not in rc.config()
    return tuple(i + 1 for i in rc.expect.aux_ids) if nested_only else rc.expect.aux_ids


@pytest.mark.parametrize("key", UPGRADABLE)
def test_upgrade_plan_passes_validate(built, key, tmp_path):
    """The planned EAGLE-3.1 draft (config, headers, new norms, d2t/t2d; weights as holes) validates."""
    from eagle_convert.draft.inspect import inspect_checkpoint
    from eagle_convert.validate.run import validate_checkpoint

    draft, target = built[key]
    plan = plan_for(key, draft, target)
    assert plan.aux.ids == _expected_ids(key)
    out = materialize_plan(plan, tmp_path / "out")
    report = validate_checkpoint(out, target=target)
    assert not report.errors, [f"{f.code}: {f.message}" for f in report.errors]
    info = inspect_checkpoint(out).info
    assert (info.variant, info.num_aux, tuple(info.aux_layer_ids)) == (
        "EAGLE-3.1",
        REAL_CONFIGS[key].expect.num_aux,
        _expected_ids(key),
    )


def test_upgrade_refusals(built):
    """What upgrade must not do: re-upgrade a 3.1 draft, add fc_norm beside input_norm, guess ids."""
    from eagle_convert.errors import UpgradeRefusedError, UsageError

    with pytest.raises(UpgradeRefusedError, match="already EAGLE-3.1"):
        plan_for("specforge-qwen3-30b-a3b-3.1", *built["specforge-qwen3-30b-a3b-3.1"])
    with pytest.raises(UpgradeRefusedError, match="norm_before_fc"):
        plan_for("speculators-qwen3-235b-4aux", *built["speculators-qwen3-235b-4aux"])
    # Phi-4's depth is not recorded and the config names no ids: the user must pass them.
    with pytest.raises(UsageError, match="no aux layer ids"):
        plan_for("specforge-phi4", *built["specforge-phi4"])
    # SpecForge's two capture paths trained [2, 30, 58] on different layers for this DeepSeek-V3-class target
    with pytest.raises(UpgradeRefusedError, match=r"\[2, 30, 58\] differently by capture path: its HF backend"):
        plan_for("specforge-pr476-kimi-k25", *built["specforge-pr476-kimi-k25"])


# The real copy at real size for one draft per attention kind and storage shape (Llama 8B, Qwen3 8B,
# an MLA draft): every byte copied and verified. Every other upgradable config is covered by
# test_upgrade_plan_passes_validate (the same plan, weights as holes): copying all 54 GB of them
# took 210 s and as much disk, which CI should not pay for byte ranges it copies the same way.
REAL_SIZE = ["specforge-llama3-8b", "specforge-qwen3-8b", "torchspec-kimi-k25-mla"]


@pytest.mark.slow
def test_upgrade_real_size(built, tmp_path):
    """Representative upgradable drafts, every byte copied and verified, validate; outputs removed one by one."""
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.validate.run import validate_checkpoint

    assert set(REAL_SIZE) <= set(UPGRADABLE)
    largest = max((built[k][0] / "model.safetensors").stat().st_size for k in REAL_SIZE)
    free = shutil.disk_usage(tmp_path).free
    if free < 2 * largest:
        pytest.skip(f"{free / 1e9:.1f} GB free under {tmp_path}; the largest upgraded draft needs {largest / 1e9:.1f}")
    times = {}
    for key in REAL_SIZE:
        draft, target = built[key]
        out = tmp_path / key
        t0 = time.perf_counter()
        result = apply_upgrade(plan_for(key, draft, target), out, verify=True)
        times[key] = (round(time.perf_counter() - t0, 1), round(result.total_bytes / 1e9, 2))
        report = validate_checkpoint(out, target=target)
        assert not report.errors, [f"{f.code}: {f.message}" for f in report.errors]
        shutil.rmtree(out)
    print("upgrade wall s, GB:", times)


def test_matrix_section_of_the_docs_is_fresh(built):
    """docs/realconfigs.md's compatibility matrix is what `validate --vllm-version all` says today."""
    from fixtures.realconfigs_matrix import DOC, committed_section, matrix_markdown

    assert committed_section(DOC.read_text(encoding="utf-8")) == matrix_markdown(built), (
        "stale: regenerate with python -m fixtures.realconfigs_matrix --write"
    )


def test_matrix_rows_equal_validate_per_release(built):
    """What the matrix shares between releases (the opened draft and target, `Context.memo`) must not
    change a verdict: every row equals `validate --target --vllm-version X` run alone."""
    from eagle_convert.validate.matrix import compatibility_matrix
    from eagle_convert.validate.run import validate_checkpoint
    from eagle_convert.vllm_model import installed_status

    for key, (draft, target) in built.items():
        matrix = compatibility_matrix(draft, target=target, default=installed_status())
        for row in matrix.rows:
            alone = validate_checkpoint(draft, target=target, vllm_version=row.release)
            assert row.report.findings_dicts() == alone.findings_dicts(), (key, row.release)
