"""The tiny Llama target fixture: deterministic, loadable by transformers and by vLLM."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
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
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, tokenize=False
    )
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
    out = model.generate(torch.tensor([[10, 11, 12]]), max_new_tokens=4, do_sample=False,
                         eos_token_id=None)
    assert out[0, 3:].tolist() == [0, 0, 0, 0]


def test_cli(tmp_path: Path):
    out = tmp_path / "cli"
    r = subprocess.run(
        [sys.executable, "-m", "fixtures.target", str(out), "--layers", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 2


_VLLM_SCRIPT = r"""
import json, sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], enforce_eager=True, max_model_len=512, dtype="bfloat16", seed=0,
          max_num_seqs=4)
chat = llm.chat([{"role": "user", "content": "Hello"}],
                SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
out = llm.generate(["The quick brown fox"],
                   SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
print("RESULT " + json.dumps({"chat_prompt": chat[0].prompt_token_ids,
                              "chat": list(chat[0].outputs[0].token_ids),
                              "gen": list(out[0].outputs[0].token_ids)}))
"""


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_vllm_loads_target(target: Path):
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    r = subprocess.run([sys.executable, "-c", _VLLM_SCRIPT, str(target)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-4000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["chat_prompt"][0] == 0  # bos from the chat template
    assert len(res["chat"]) == 4 and len(res["gen"]) == 4
