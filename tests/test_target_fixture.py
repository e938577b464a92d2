"""The tiny Llama target fixture: deterministic, loadable by transformers (and by vLLM: every
vLLM spec-decode test loads it as the target, e.g. test_smoke.py::test_vllm_controls)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.target import CHAT_TEMPLATE, TOKENIZER_VOCAB_SIZE, build_target

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return build_target(tmp_path_factory.mktemp("target") / "llama", num_layers=4)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_files_and_config(target: Path):
    names = {p.name for p in target.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    cfg = json.loads((target / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["vocab_size"] == 4096 and cfg["hidden_size"] == 256
    assert cfg["num_hidden_layers"] == 4 and cfg["tie_word_embeddings"] is False


def test_deterministic_and_cached(target: Path, tmp_path: Path):
    again = build_target(tmp_path / "again", num_layers=4)
    assert _digest(again) == _digest(target)
    mtime = (again / "model.safetensors").stat().st_mtime_ns
    assert build_target(again, num_layers=4) == again  # same args: reused
    assert (again / "model.safetensors").stat().st_mtime_ns == mtime
    other = build_target(again, num_layers=4, seed=1)  # other args: rebuilt
    assert _digest(other)["model.safetensors"] != _digest(target)["model.safetensors"]
    assert _digest(other)["tokenizer.json"] == _digest(target)["tokenizer.json"]


def test_transformers_loads_tokenizes_and_generates(target: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target)
    assert len(tok) == TOKENIZER_VOCAB_SIZE
    assert tok.bos_token == "<|begin_of_text|>" and tok.eos_token == "<|eot_id|>"
    text = "The quick brown fox jumps over the lazy dog."
    assert tok.decode(tok(text).input_ids) == text
    chat = tok.apply_chat_template([{"role": "user", "content": "Hello"}], add_generation_prompt=True, tokenize=False)
    assert chat == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert tok.chat_template == CHAT_TEMPLATE

    model = AutoModelForCausalLM.from_pretrained(target)
    assert model.dtype == torch.bfloat16
    ids = torch.tensor([tok(text).input_ids])
    out = model.generate(ids, max_new_tokens=8, do_sample=False, eos_token_id=None)
    assert out.shape == (1, ids.shape[1] + 8)


def test_zero_lm_head_emits_token_zero(tmp_path: Path):
    import torch
    from transformers import AutoModelForCausalLM

    path = build_target(tmp_path / "zero", num_layers=2, zero_lm_head=True)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert not model.lm_head.weight.any()
    out = model.generate(torch.tensor([[10, 11, 12]]), max_new_tokens=4, do_sample=False, eos_token_id=None)
    assert out[0, 3:].tolist() == [0, 0, 0, 0]


def test_cli(tmp_path: Path):
    out = tmp_path / "cli"
    r = subprocess.run(
        [sys.executable, "-m", "fixtures.target", str(out), "--layers", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 2
