"""Embedding / lm_head sharing per engine (`validate --for sglang|trtllm`), and W604 under every engine.

vLLM keeps a shipped embed_tokens / lm_head unless bit-identical to the target's; SGLang 0.5.23 replaces
the embedding with the target's at equal widths and takes lm_head from the target without
draft_vocab_size (or from the embedding when tied); TensorRT-LLM builds no draft embedding at equal
widths and uses a shipped lm_head. Each test shows one engine's answer and a neighbour's different one.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.engines import engine_status
from eagle_convert.validate import validate_checkpoint, validate_for
from eagle_convert.validate.findings import Finding
from fixtures.drafts import FIXTURE_MATRIX, DraftSpec
from fixtures.edits import edit_draft
from fixtures.target_weights import build_target_for

SG, TRT = "SGLang 0.5.23", "TensorRT-LLM main@00679c6"
SG_LM_HEAD = (
    "models/llama_eagle3.py LlamaForCausalLMEagle3.__init__ (L300-314: tie_word_embeddings makes lm_head "
    "embed_tokens; no draft_vocab_size sets load_lm_head_from_target) and speculative/eagle_worker_v2.py "
    "EagleDraftWorker.init_lm_head (L356-360: set_embed_and_head with the target's head); "
    "models/kimi_k25_eagle3.py (L350-360, the same)"
)


def _found(draft: Path, engine: str, target: Path | None = None) -> list[Finding]:
    return validate_for(draft, engine_status(engine), target=target).findings


def _codes(draft: Path, engine: str, target: Path | None = None) -> set[str]:
    return {f.code for f in _found(draft, engine, target)}


def _one(draft: Path, engine: str, code: str, target: Path | None = None) -> Finding:
    hits = [f for f in _found(draft, engine, target) if f.code == code]
    assert len(hits) == 1, [f"{f.code}: {f.message}" for f in _found(draft, engine, target)]
    return hits[0]


def _embed_draft(tmp_path: Path) -> Path:
    return edit_draft(tmp_path / "d", DraftSpec(with_embed=True))


def test_trained_embedding_is_replaced_by_sglang_and_trtllm(tmp_path: Path) -> None:
    """A draft embedding trained away from the target's (I507): vLLM drafts with it, both engines with the target's."""
    draft = _embed_draft(tmp_path)
    drifted = build_target_for(tmp_path / "t", draft, embed=lambda e: e + 0.01 * torch.ones_like(e))
    assert "I507" in validate_checkpoint(draft, target=drifted).codes()
    sg = _one(draft, "sglang", "W338", drifted)
    assert (sg.level, sg.impact, sg.tensor) == ("warning", "computes-differently", "embed_tokens.weight")
    assert sg.message == (
        "the draft ships its own embed_tokens, close to the target's but not identical (I507), and vLLM drafts "
        f"with it; {SG} replaces it with the target's whenever the widths match (speculative/eagle_worker_v2.py "
        "EagleDraftWorker.init_lm_head (L336-363: set_embed with the target's embedding for every EAGLE-3 draft) "
        "and models/llama.py LlamaForCausalLM.set_embed (L910: skipped only when target_hidden_size differs from "
        "hidden_size); models/kimi_k25_eagle3.py Eagle3DeepseekV2ForCausalLM.set_embed (L404, the same)): it "
        "drafts with another embedding than the one trained"
    )
    trt = _one(draft, "trtllm", "W338", drifted)
    assert trt.message.startswith(
        f"the draft ships its own embed_tokens, close to the target's but not identical (I507), and vLLM drafts with it; {TRT} replaces it"
    )
    # the same draft against a target whose embedding is bit-identical: every engine drafts with the same one
    same = build_target_for(tmp_path / "same", draft)
    assert "W338" not in _codes(draft, "sglang", same) | _codes(draft, "trtllm", same)


def test_embedding_of_another_width_must_be_shipped(tmp_path: Path) -> None:
    """target_hidden_size != hidden_size: every engine keeps the draft's own embedding (E106 when none)."""
    draft = edit_draft(tmp_path / "d", config=lambda c: c.update(target_hidden_size=96))
    for engine, label in (("sglang", SG), ("trtllm", TRT)):
        hit = _one(draft, engine, "E106")
        assert hit.field == "target_hidden_size" and hit.impact == "loads-other-weights"
        assert hit.message.startswith(
            f"target_hidden_size 96 differs from hidden_size 64: {label} keeps the draft's own embed_tokens ("
        )
        assert hit.message.endswith("which this draft does not ship: it drafts from an embedding that is never loaded")
    with_embed = edit_draft(tmp_path / "e", FIXTURE_MATRIX["vllm-eagle3-ht-embed"])
    assert "E106" not in _codes(with_embed, "sglang") | _codes(with_embed, "trtllm")


def test_tied_draft_lm_head_is_never_loaded_by_sglang(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", config=lambda c: c.update(tie_word_embeddings=True))
    hit = _one(draft, "sglang", "E339")
    assert (hit.level, hit.impact, hit.field) == ("error", "computes-differently", "tie_word_embeddings")
    assert hit.message == (
        f"tie_word_embeddings is true: {SG} uses embed_tokens (the target's) as lm_head ({SG_LM_HEAD}) and never "
        "loads the draft's lm_head.weight, which vLLM drafts with"
    )
    assert hit.fix == f"Write tie_word_embeddings: false for {SG}."
    assert "E339" not in _codes(draft, "trtllm")  # TensorRT-LLM loads a shipped lm_head


def test_no_draft_vocab_size_takes_the_target_head_in_sglang(tmp_path: Path) -> None:
    reduced = edit_draft(tmp_path / "r", config=lambda c: c.pop("draft_vocab_size"))
    hit = _one(reduced, "sglang", "E339")
    assert hit.message == (
        f"config.json has no draft_vocab_size: {SG} takes the target's lm_head over all 256 tokens ({SG_LM_HEAD}) "
        "instead of the draft's 128-row lm_head.weight, so d2t maps other logits than the draft was trained on"
    )
    assert hit.fix == "Write draft_vocab_size: 128 into config.json."
    assert "E339" not in _codes(reduced, "trtllm") and "E411" in _codes(reduced, "trtllm")
    full = edit_draft(
        tmp_path / "f", FIXTURE_MATRIX["vllm-eagle3-full"], config=lambda c: c.pop("draft_vocab_size", None)
    )
    warn = _one(full, "sglang", "W338")
    assert warn.message == (
        f"config.json has no draft_vocab_size: {SG} replaces the draft's lm_head.weight, which vLLM drafts with, "
        f"by the target's ({SG_LM_HEAD}); unless it is a copy of the target's, the draft's logits differ"
    )
    assert warn.fix == f"Write draft_vocab_size: 256 into config.json for {SG}."
    assert "W338" not in _codes(full, "trtllm")


def _drop_lm_head(state: dict[str, torch.Tensor]) -> None:
    del state["lm_head.weight"]


def test_missing_lm_head_per_engine(tmp_path: Path) -> None:
    """No lm_head: SGLang leaves its own unloaded once draft_vocab_size is written; TensorRT-LLM takes the
    target's, which is wrong only for a reduced vocabulary."""
    reduced = edit_draft(tmp_path / "r", tensors=_drop_lm_head)
    for engine in ("sglang", "trtllm"):
        assert _one(reduced, engine, "E402").impact == "loads-other-weights"
    assert _one(reduced, "trtllm", "E402").message.startswith(
        f"the draft ships no lm_head: {TRT} takes the target's (_torch/models/modeling_speculative.py @ 00679c66c3e3 "
        "Eagle3ForCausalLM.load_weights"
    )
    full = edit_draft(
        tmp_path / "f",
        FIXTURE_MATRIX["vllm-eagle3-full"],
        tensors=_drop_lm_head,
        config=lambda c: c.update(draft_vocab_size=256),
    )
    hit = _one(full, "sglang", "E402")
    assert hit.message == (
        f"draft_vocab_size is written, so {SG} builds the draft's own lm_head ({SG_LM_HEAD}), but this draft ships "
        "none: its lm_head is never loaded"
    )
    assert (
        hit.fix == "Ship lm_head.weight [draft_vocab_size, hidden_size], or drop draft_vocab_size to take the target's."
    )
    assert "E402" not in _codes(full, "trtllm")


def test_w604_shows_for_every_engine(tmp_path: Path) -> None:
    """fc_norm exactly ones is a property of the tensors: the same W604 on vLLM, SGLang and TensorRT-LLM."""

    def ones(state: dict[str, torch.Tensor]) -> None:
        for i in range(3):
            state[f"fc_norm.{i}.weight"] = torch.ones_like(state[f"fc_norm.{i}.weight"])

    draft = edit_draft(tmp_path / "d", FIXTURE_MATRIX["vllm-eagle31"], tensors=ones)
    [ref] = [f for f in validate_checkpoint(draft).findings if f.code == "W604"]
    for engine in ("sglang", "trtllm"):
        assert _one(draft, engine, "W604") == ref
    trained = edit_draft(tmp_path / "t", FIXTURE_MATRIX["vllm-eagle31"])
    assert "W604" not in _codes(trained, "sglang")


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    def tied(c: dict) -> None:  # eagle_config holds SGLang's ids for the same layers: only the tie differs
        c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 3, 4]
        c["tie_word_embeddings"] = True

    draft = edit_draft(tmp_path / "d", config=tied)
    res = CliRunner().invoke(main, ["validate", str(draft), "--for", "sglang", "--json"])
    assert res.exit_code == 1, res.output
    hits = json.loads(res.stdout)["findings"]
    assert [h["code"] for h in hits] == ["E339"]
    assert [h["message"] for h in hits] == [
        f"tie_word_embeddings is true: {SG} uses embed_tokens (the target's) as lm_head ({SG_LM_HEAD}) and never "
        "loads the draft's lm_head.weight, which vLLM drafts with"
    ]
    ok = CliRunner().invoke(main, ["validate", str(draft), "--for", "trtllm", "--json"])
    assert ok.exit_code == 0, ok.output  # only W334 (the capture layers belong in its serving YAML)
    assert [f["code"] for f in json.loads(ok.stdout)["findings"]] == ["W334"]
