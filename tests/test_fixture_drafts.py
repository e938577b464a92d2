"""The draft fixtures are what every other test trusts, so check them against an independent description.

Shapes and on-disk names here are written by hand from vLLM 0.32.0's draft classes (`llama_eagle3.py`,
`qwen3_eagle3.py`) and the producers' spellings (`midlayer.`, NeMo's `model.` prefix, legacy `aux_norm_*`)
rather than from `fixtures.drafts`, so a wrong generator cannot pass by agreeing
with itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from fixtures.drafts import (
    EXPECTED,
    FIXTURE_MATRIX,
    LAYOUTS,
    VLLM_TINY,
    DraftSpec,
    build_draft,
    draft_state,
    main,
)

ROOT = Path(__file__).resolve().parents[1]
ST_DTYPE = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
MIDLAYER = {"safeailab", "specforge", "torchspec", "legacy-aux-norm"}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("drafts")
    for name, spec in FIXTURE_MATRIX.items():
        build_draft(root / name, spec)
    return root


def read_disk(path: Path) -> dict[str, torch.Tensor]:
    if (path / "pytorch_model.bin").exists():
        return torch.load(path / "pytorch_model.bin", weights_only=True)
    out: dict[str, torch.Tensor] = {}
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(f, "pt") as st:
            out |= {k: st.get_tensor(k) for k in st.keys()}  # noqa: SIM118 (safe_open is not a dict)
    return out


def header(path: Path) -> dict[str, tuple[list[int], str]]:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(f, "pt") as st:
            out |= {k: (st.get_slice(k).get_shape(), st.get_slice(k).get_dtype()) for k in st.keys()}  # noqa: SIM118
    return out


def canonical_shapes(spec: DraftSpec, e: dict) -> dict[str, tuple[int, ...]]:
    """What vLLM 0.32.0's draft classes build, by hand."""
    h, ht, a, v, vd, i = e["H"], e["Ht"], e["A"], e["V"], e["Vd"], spec.intermediate
    nh, hd = spec.heads, h // spec.heads
    s: dict[str, tuple[int, ...]] = {"fc.weight": (h, a * ht), "norm.weight": (h,), "lm_head.weight": (vd, h)}
    if e["has_embed"]:
        s["embed_tokens.weight"] = (v, h)
    if e["fc_norm"]:
        s |= {f"fc_norm.{k}.weight": (ht,) for k in range(a)}
    if e["norm_before_fc"]:
        s["input_norm.weight"] = (a * ht,)
    if e["has_d2t"]:
        s["d2t"] = (vd,)
    if e["has_t2d"]:
        s["t2d"] = (v,)
    for k in range(e["num_layers"]):
        p, in0 = f"layers.{k}.", (2 * h if k == 0 else h)
        s |= {p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i)}
        s |= {p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)}
        if k == 0:
            s[p + "hidden_norm.weight"] = (h,)
        a_ = p + "self_attn."
        if e["arch"] == "mla":
            m = spec.mla_dims
            names = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
            ql, kl, nope, rope, vh = (m[x] for x in names)
            s |= {
                a_ + "q_a_proj.weight": (ql, in0),
                a_ + "q_a_layernorm.weight": (ql,),
                a_ + "q_b_proj.weight": (nh * (nope + rope), ql),
                a_ + "kv_a_proj_with_mqa.weight": (kl + rope, in0),
                a_ + "kv_a_layernorm.weight": (kl,),
                a_ + "kv_b_proj.weight": (nh * (nope + vh), kl),
                a_ + "o_proj.weight": (h, nh * vh),
            }
            continue
        kv = spec.kv_heads * hd
        s |= {a_ + "q_proj.weight": (nh * hd, in0), a_ + "k_proj.weight": (kv, in0), a_ + "v_proj.weight": (kv, in0)}
        s[a_ + "o_proj.weight"] = (h, nh * hd)
        if e["arch"] == "qwen3":
            s |= {a_ + "q_norm.weight": (hd,), a_ + "k_norm.weight": (hd,)}
    return s


def disk_name(layout: str, key: str) -> str:
    """How each producer spells a canonical name on disk, by hand."""
    if layout in MIDLAYER and key.startswith("layers.0."):
        key = "midlayer." + key.removeprefix("layers.0.")
    if layout == "legacy-aux-norm" and key.startswith("fc_norm."):
        key = "aux_norm_" + ("low", "mid", "high")[int(key.split(".")[1])] + ".weight"
    if layout == "nemo" and key not in {"lm_head.weight", "d2t", "t2d"}:
        key = "model." + key
    return key


@pytest.mark.parametrize("name", FIXTURE_MATRIX)
def test_files_keys_shapes_dtypes(built: Path, name: str) -> None:
    spec, e = FIXTURE_MATRIX[name], EXPECTED[name]
    path = built / name
    assert sorted(p.name for p in path.iterdir()) == sorted(e["files"])
    want = {disk_name(e["layout"], k): v for k, v in canonical_shapes(spec, e).items()}
    if e["storage"] == "bin":
        got = {k: (list(t.shape), t.dtype) for k, t in read_disk(path).items()}
        torch_dt = getattr(torch, e["dtype"])
        assert got == {k: (list(s), {"d2t": torch.int64, "t2d": torch.bool}.get(k, torch_dt)) for k, s in want.items()}
        return
    got_h = header(path)
    assert got_h == {k: (list(s), {"d2t": "I64", "t2d": "BOOL"}.get(k, ST_DTYPE[e["dtype"]])) for k, s in want.items()}
    for f in path.glob("*.safetensors"):
        with safe_open(f, "pt") as st:
            meta = st.metadata()
        expected_meta = {"format": "pt"} | ({"torchspec_version": "0.3.0"} if e["layout"] == "torchspec" else {})
        assert meta == expected_meta


@pytest.mark.parametrize("name", [n for n, s in FIXTURE_MATRIX.items() if s.storage == "sharded"])
def test_sharded_index_consistent(built: Path, name: str) -> None:
    path = built / name
    index = json.loads((path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2 and all((path / s).is_file() for s in shards)
    assert sorted(p.name for p in path.glob("*.safetensors")) == shards
    total = 0
    for shard in shards:
        with safe_open(path / shard, "pt") as st:
            keys = set(st.keys())
            total += sum(st.get_tensor(k).nbytes for k in keys)
        assert keys == {k for k, f in index["weight_map"].items() if f == shard}
    assert index["metadata"]["total_size"] == total


def test_bytes_are_deterministic(built: Path, tmp_path: Path) -> None:
    for name, spec in FIXTURE_MATRIX.items():
        again = build_draft(tmp_path / name, spec)
        for f in (built / name).iterdir():
            assert (again / f.name).read_bytes() == f.read_bytes(), f"{name}/{f.name}"


def test_bytes_are_deterministic_across_processes(built: Path, tmp_path: Path) -> None:
    names = ["torchspec-eagle31", "safeailab-eagle3", "nemo-eagle31-sharded"]  # metadata, .bin, shards
    cmd = [sys.executable, "-m", "fixtures.drafts", str(tmp_path)] + [a for n in names for a in ("--name", n)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    for name in names:
        for f in (built / name).iterdir():
            assert (tmp_path / name / f.name).read_bytes() == f.read_bytes(), f"{name}/{f.name}"


@pytest.mark.parametrize("name", [n for n, e in EXPECTED.items() if e["has_d2t"]])
def test_vocab_mapping_invariants(built: Path, name: str) -> None:
    e, state = EXPECTED[name], read_disk(built / name)
    d2t = state["d2t"]
    assert d2t.dtype == torch.int64 and d2t.shape == (e["Vd"],)
    target = torch.arange(e["Vd"]) + d2t
    assert target.min() >= 0 and target.max() < e["V"]
    assert bool((target[1:] > target[:-1]).all()), "strictly increasing, hence unique"
    assert target[:8].tolist() == list(range(8)), "special ids map to themselves"
    if e["has_t2d"]:
        t2d = state["t2d"]
        assert t2d.dtype == torch.bool and int(t2d.sum()) == e["Vd"] and bool(t2d[target].all())
    else:
        assert "t2d" not in state


@pytest.mark.parametrize("name", FIXTURE_MATRIX)
def test_disk_canonicalises_to_draft_state(built: Path, name: str) -> None:
    spec = FIXTURE_MATRIX[name]
    layout = LAYOUTS[spec.layout]
    disk = read_disk(built / name)
    canonical = draft_state(spec)
    assert {layout.to_canonical(k) for k in disk} == set(canonical)
    for k, t in disk.items():
        assert torch.equal(t, canonical[layout.to_canonical(k)]), k
        assert layout.to_disk(layout.to_canonical(k)) == k
    norms = [k for k in canonical if k.endswith("norm.weight") or ".fc_norm." in k or k.startswith("fc_norm.")]
    assert norms and all(not bool((canonical[k] == 1).all()) for k in norms), "norms carry noise"


def test_eagle3_and_eagle31_share_common_tensors() -> None:
    old, new = draft_state(FIXTURE_MATRIX["vllm-eagle3"]), draft_state(FIXTURE_MATRIX["vllm-eagle31"])
    assert set(new) - set(old) == {"fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"}
    assert all(torch.equal(old[k], new[k]) for k in old)
    assert not torch.equal(draft_state(replace(FIXTURE_MATRIX["vllm-eagle3"], seed=1))["fc.weight"], old["fc.weight"])


@pytest.mark.parametrize("name", FIXTURE_MATRIX)
def test_config_matches_expected(built: Path, name: str) -> None:
    e, cfg = EXPECTED[name], json.loads((built / name / "config.json").read_text())
    layout = e["layout"]
    flags = {k: e[k] for k in ("fc_norm", "norm_output", "norm_before_fc")}
    if layout == "speculators":
        inner = cfg["transformer_layer_config"]
        assert "model_type" not in cfg and cfg["speculators_model_type"] == "eagle3"
        assert cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 3
        assert cfg["speculators_config"]["verifier"]["name_or_path"]
        assert inner["model_type"] == ("qwen3" if e["arch"] == "qwen3" else "llama")
        assert cfg["norm_before_residual"] is True and inner["norm_before_residual"] is True
        assert all(cfg[k] == v and inner[k] == v for k, v in flags.items())
        assert (cfg["draft_vocab_size"], cfg["target_hidden_size"], inner["vocab_size"]) == (e["Vd"], e["Ht"], e["V"])
        assert inner.get("num_aux_hidden_states", 3) == e["A"]
    else:
        inner = cfg
        assert cfg["draft_vocab_size"] == e["Vd"] and cfg["vocab_size"] == e["V"]
        assert cfg.get("target_hidden_size", cfg["hidden_size"]) == e["Ht"]
        assert cfg["torch_dtype"] == e["dtype"]
        if layout == "legacy-aux-norm":
            assert cfg.get("use_aux_norm", False) == e["fc_norm"] and "fc_norm" not in cfg
        elif layout == "modelopt":
            assert cfg["eagle_config"].get("norm_before_fc", False) == e["norm_before_fc"]
        else:
            assert all(cfg.get(k, False) == v for k, v in flags.items())
    assert (inner["hidden_size"], inner["num_hidden_layers"], inner["hidden_act"]) == (e["H"], e["num_layers"], "silu")
    assert inner["tie_word_embeddings"] is False and inner["rms_norm_eps"] == FIXTURE_MATRIX[name].rms_norm_eps
    key = "eagle_aux_hidden_state_layer_ids"
    ids = {"top": cfg.get(key), "eagle_config": cfg.get("eagle_config", {}).get(key)}
    assert {k for k, v in ids.items() if v is not None} == set(e["aux_ids_in"])
    assert all(ids[k] == e["aux_ids"] for k in e["aux_ids_in"])
    arch = {
        "safeailab": "LlamaForCausalLM",
        "nemo": "LlamaEagle3DraftModel",
        "speculators": "Eagle3Speculator",
        "kimi-mla": "Eagle3DeepseekV2ForCausalLM",
    }.get(layout, "Eagle3Qwen3ForCausalLM" if e["arch"] == "qwen3" else "LlamaForCausalLMEagle3")
    assert cfg["architectures"] == [arch]
    if layout == "vllm":
        assert cfg["norm_before_residual"] is False and cfg.get("num_aux_hidden_states", 3) == e["A"]
    if layout == "kimi-mla":
        assert cfg["model_type"] == "kimi_k2" and {"q_lora_rank", "kv_lora_rank", "v_head_dim"} <= set(cfg)
    if layout == "torchspec":
        assert cfg["_torchspec_version"] == "0.3.0"


def test_matrix_covers_the_brief() -> None:
    specs = FIXTURE_MATRIX.values()
    assert {s.layout for s in specs} == set(LAYOUTS)
    for layout, row in LAYOUTS.items():
        assert {s.variant for s in specs if s.layout == layout} >= {"eagle3", "eagle31"} & row.variants
    assert {s.storage for s in specs} == {"single", "sharded", "bin"}
    assert {s.dtype for s in specs} == {"bf16", "fp16", "fp32"}
    assert {s.vocab for s in specs} == {"reduced", "full"} and {s.arch for s in specs} == {"llama", "qwen3", "mla"}
    assert {s.num_aux for s in specs} >= {3, 4}
    assert any(e["H"] != e["Ht"] and e["has_embed"] for e in EXPECTED.values())


def test_aux_id_defaults() -> None:
    assert DraftSpec().resolved_aux_ids == (2, 4, 5)
    four = DraftSpec(num_aux=4).resolved_aux_ids
    assert len(set(four)) == 4 and all(0 < i < 8 for i in four)
    assert EXPECTED["safeailab-eagle3"]["aux_ids"] is None and EXPECTED["specforge-eagle3"]["aux_ids"] == [1, 3, 4]


def test_vllm_tiny_pairs_with_tiny_target() -> None:
    s = VLLM_TINY
    dims = (s.layout, s.hidden, s.ht, s.vocab_size, s.target_layers, s.heads, s.kv_heads)
    assert dims == ("vllm", 256, 256, 4096, 8, 4, 2)
    assert s.vd == 1024 and s.resolved_aux_ids == (2, 4, 5)


@pytest.mark.parametrize(
    "spec",
    [
        DraftSpec(layout="modelopt", variant="eagle31"),
        DraftSpec(layout="safeailab", arch="qwen3"),
        DraftSpec(layout="kimi-mla"),  # MLA layout needs arch="mla"
        DraftSpec(layout="modelopt", with_embed=True),
        DraftSpec(layout="legacy-aux-norm", variant="eagle31", num_aux=4),
        DraftSpec(draft_vocab_size=256),
        DraftSpec(aux_ids=(1, 2)),
        DraftSpec(layout="nope"),
    ],
)
def test_bad_specs_are_rejected(tmp_path: Path, spec: DraftSpec) -> None:
    with pytest.raises(ValueError, match="bad DraftSpec"):
        build_draft(tmp_path, spec)


def test_non_strict_builds_combinations_no_producer_writes(tmp_path: Path) -> None:
    build_draft(tmp_path, DraftSpec(layout="safeailab", variant="eagle31"), strict=False)
    assert any(k.startswith("fc_norm.") for k in header(tmp_path))


def test_cli_builds_named_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "one"), "--name", "vllm-eagle3"]) == 0  # one name: OUT_DIR is the draft
    assert (tmp_path / "one" / "config.json").is_file()
    assert main([str(tmp_path / "two"), "--name", "vllm-eagle3", "--name", "nemo-eagle3"]) == 0
    assert {p.name for p in (tmp_path / "two").iterdir()} == {"vllm-eagle3", "nemo-eagle3"}
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path), "--name", "no-such-fixture"])
    assert exc.value.code == 2
