"""`jsonable`: results declared once, their `to_dict` and readers derived; and each converted
result's JSON pinned byte for byte (key order, rounding, omitted keys) to what its hand-written
`to_dict` wrote before the conversion (the `GOLDEN` strings were recorded from that code)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eagle_convert.jsonable import Jsonable, dump, encode, key, load

# ---------------------------------------------------------------------------------- the helper


@dataclass(frozen=True)
class _Row(Jsonable):
    depth: int
    share: float | None = field(metadata=key("sink_share", ndigits=2))
    extra: str | None = field(default=None, metadata=key(omit_none=True))
    secret: bytes = field(default=b"", metadata=key(dump=False))


@dataclass(frozen=True)
class _Table(Jsonable):
    name: str
    rows: list[_Row]
    best: _Row | None = None
    where: Path = Path("/x")
    pairs: tuple[int, ...] = ()
    notes: dict[str, float] = field(default_factory=dict)

    @property
    def size(self) -> float:
        return 1 / 3


def test_dump_writes_keys_rounding_omission_and_nesting() -> None:
    t = _Table("t", [_Row(1, 0.12345), _Row(2, None, "e", b"s")], None, Path("/d/f"), (1, 2), {"a": 0.5})
    assert json.dumps(t.to_dict()) == (
        '{"name": "t", "rows": [{"depth": 1, "sink_share": 0.12}, {"depth": 2, "sink_share": null, "extra": "e"}], '
        '"best": null, "where": "/d/f", "pairs": [1, 2], "notes": {"a": 0.5}}'
    )


def test_dump_orders_computed_keys_and_refuses_an_unknown_one() -> None:
    row = _Row(3, 0.5)
    assert list(dump(row, "total depth extra sink_share", total=7)) == ["total", "depth", "sink_share"]
    with pytest.raises(KeyError, match="_Row: no field or computed value writes the JSON key 'shares'"):
        dump(row, "depth shares")


def test_dump_writes_properties_and_rounds_a_named_key() -> None:
    """`name:N` rounds that key's floats (a property, a computed value or a field) to N digits."""
    t = _Table("t", [], pairs=(1,))
    expected = {"size": 0.33, "name": "t", "half": [0.2, 0.8], "notes": {}}  # round() is Python's: 0.25 -> 0.2
    assert dump(t, "size:2 name half:1 notes", half=[0.25, 0.75]) == expected
    with pytest.raises(KeyError, match="_Table: no field or computed value writes the JSON key 'sizes'"):
        dump(t, "sizes")


def test_encode_rounds_floats_only() -> None:
    """A bool is an int: rounding must leave True a bool (JSON `true`, not `1`)."""
    assert encode([True, 3, 1.23456, [2.5555]], 2) == [True, 3, 1.23, [2.56]]


def test_load_reads_back_what_dump_wrote() -> None:
    t = _Table("t", [_Row(1, 0.25), _Row(2, None, "e")], _Row(9, 1.0), Path("/d"), (1, 2), {"a": 0.5})
    back = load(_Table, json.loads(json.dumps(t.to_dict())))
    assert back == _Table("t", [_Row(1, 0.25), _Row(2, None, "e")], _Row(9, 1.0), "/d", (1, 2), {"a": 0.5})  # type: ignore[arg-type]
    assert _Row.from_dict({"depth": 1, "sink_share": None}) == _Row(1, None)
    with pytest.raises(KeyError, match="sink_share"):
        _Row.from_dict({"depth": 1})
    with pytest.raises(TypeError, match="expected a list, got dict"):
        _Table.from_dict({"name": "t", "rows": {}})


# ------------------------------------------------------------- converted results, pinned


def _drift() -> Any:
    pytest.importorskip("torch")  # drift's results module sits beside its recorder (torch)
    from eagle_convert.drift.crosscheck import CrossCheck, CrossCheckRow
    from eagle_convert.drift.results import AuxRow, DepthRow, DraftDrift, DriftGroup, DriftReport, Verdict

    rows = [
        DepthRow(1, 4, 0.5, 0.25, 0.25, 1.5, 8, 6, {"sink": [[0.5, 0.5]], "context": [[0.25]], "own": [[0.25]]}),
        DepthRow(2, 0, None, None, None, None, 0, 0),
    ]
    group = DriftGroup(None, None, 2, rows, [AuxRow(0, 1, 2.5, 1.0), AuxRow(1, None, None, None)])
    cross = CrossCheck(
        "d", "/p", "vllm 0.34.0 float32", 0.05, [CrossCheckRow(1, 3, 1.5, 1.51, 0.0066, 0.01)], 2, 1, 3, 4, 5, 1.25
    )
    verdict = Verdict("stable", "stable over depths 1-2", 0.5, 0.5, 1, 1.0, 1)
    drafts = [
        DraftDrift("d", "/p", "EAGLE-3.1", True, False, [group], group, verdict, 2.5, cross),
        DraftDrift("e", "/q", None, False, False, [], group, verdict, 1.0),
    ]
    return DriftReport("/t", "reference", {"depth": 2, "buckets": [0]}, drafts, 3.5)


def _push() -> Any:
    from eagle_convert.push import PushPlan, PushResult

    files = {"config.json": 512, "model.safetensors": 4096, "README.md": 900}
    plan = PushPlan(
        Path("/d"),
        "org/name",
        "main",
        True,
        None,
        "Upload draft",
        files,
        True,
        "https://hf.co",
        False,
        [("E104", "tensor without flag")],
        2,
        b"card",
        True,
    )
    result = PushResult(
        "org/name", "dev", "a" * 40, "https://hf.co/c", None, files, False, "https://hf.co", ["E104"], 1, True
    )
    return _Both(plan, result)


def _diff() -> Any:
    from eagle_convert.diff import CheckpointDiff, ConfigDiff, TensorChange

    config = ConfigDiff({"norm_output": True}, {"old": 1}, {"eagle_config.x": (1, [2, 3])})
    changes = [TensorChange("fc.weight", "fc.weight", ("F32", "BF16"), ([4, 8], [4, 8]), 0.125, 3)]
    rows = [{"name": "fc_norm.0.weight", "dtype": "F32", "shape": [8]}]
    return CheckpointDiff("a", "b", rows, [], [("midlayer.x", "layers.0.x")], changes, 7, config, False)


def _finetune() -> Any:
    from eagle_convert.cache.options import CaptureOptions
    from eagle_convert.finetune.options import Stage
    from eagle_convert.finetune.plan import FinetunePlan, FinetuneResult, StageResult
    from eagle_convert.measure.prompts import Prompt
    from eagle_convert.vllm_model import default_release

    stages = [Stage("fc_norm", 60, 1e-3), Stage("all", 60, 1e-4, 1e-3)]
    prompts = [Prompt("p1", "code", "def f():"), Prompt("p2", "chat", None, ({"role": "user", "content": "hi"},))]
    plans = [
        FinetunePlan(
            Path("/d"),
            Path("/t"),
            Path("/o"),
            {"a": 1},
            "EAGLE-3.1",
            [1, 2, 3],
            "BF16",
            False,
            stages,
            prompts,
            "builtin",
            None,
            "none",
            96,
            3,
            0,
            False,
            default_release(),
            cache=cache,
            capture=capture,
            nproc=2,
        )
        for cache, capture in [(None, None), (Path("/c"), None), (Path("/c"), CaptureOptions(engine="reference"))]
    ]
    stage = StageResult("all", 2, 1e-4, 0.0, ["fc.weight"], [1.55555, 1.2], 3.14159, eal=[(1, 1.254321), (2, 1.5)])
    result = FinetuneResult(
        Path("/o"),
        [stage],
        [0.333333] * 3,
        [0.666666] * 3,
        1.666666,
        1.2,
        10,
        500,
        1.23456,
        5.55555,
        held_out=2,
        eal_before=0.4666666,
        best={"stage": "all", "step": 2, "eal": 1.5},
    )
    return _Both(*plans, result)


@dataclass
class _Both:
    """Several results pinned together: their dicts in a list."""

    items: tuple[Any, ...]

    def __init__(self, *items: Any) -> None:
        self.items = items

    def to_dict(self) -> list[Any]:  # type: ignore[override]
        return [i.to_dict() for i in self.items]


GOLDEN: dict[str, str] = {
    "diff": '{"a": "a", "b": "b", "same": false, "compared_data": false, "added": [{"name": "fc_norm.0.weight", "dtype": "F32", "shape": [8]}], "removed": [], "renamed": [{"a": "midlayer.x", "b": "layers.0.x"}], "changed": [{"a": "fc.weight", "b": "fc.weight", "dtype": ["F32", "BF16"], "shape": [[4, 8], [4, 8]], "max_abs_diff": 0.125, "differing_elements": 3}], "identical": 7, "config": {"added": {"norm_output": true}, "removed": {"old": 1}, "changed": {"eagle_config.x": {"a": 1, "b": [2, 3]}}}}',
    "drift": '{"report_version": 1, "target": "/t", "engine": "reference", "settings": {"depth": 2, "buckets": [0]}, "drafts": [{"label": "d", "path": "/p", "variant": "EAGLE-3.1", "fc_norm": true, "norm_output": false, "verdict": {"status": "stable", "text": "stable over depths 1-2", "sink_first": 0.5, "sink_min": 0.5, "sink_min_depth": 1, "rms_growth": 1.0, "rms_growth_depth": 1, "thresholds": {"sink_fall": 0.5, "sink_min": 0.1, "rms_growth": 2.0}}, "overall": {"chat_template": null, "bucket": null, "prompts": 2, "depths": [{"depth": 1, "passes": 4, "sink_share": 0.5, "context_share": 0.25, "own_share": 0.25, "fed_rms": 1.5, "reached": 8, "accepted": 6, "conditional_acceptance": 0.75, "per_head": {"sink": [[0.5, 0.5]], "context": [[0.25]], "own": [[0.25]]}}, {"depth": 2, "passes": 0, "sink_share": null, "context_share": null, "own_share": null, "fed_rms": null, "reached": 0, "accepted": 0, "conditional_acceptance": null, "per_head": {}}], "aux": [{"chunk": 0, "layer_id": 1, "rms": 2.5, "fc_input_rms": 1.0}, {"chunk": 1, "layer_id": null, "rms": null, "fc_input_rms": null}]}, "groups": [{"chat_template": null, "bucket": null, "prompts": 2, "depths": [{"depth": 1, "passes": 4, "sink_share": 0.5, "context_share": 0.25, "own_share": 0.25, "fed_rms": 1.5, "reached": 8, "accepted": 6, "conditional_acceptance": 0.75, "per_head": {"sink": [[0.5, 0.5]], "context": [[0.25]], "own": [[0.25]]}}, {"depth": 2, "passes": 0, "sink_share": null, "context_share": null, "own_share": null, "fed_rms": null, "reached": 0, "accepted": 0, "conditional_acceptance": null, "per_head": {}}], "aux": [{"chunk": 0, "layer_id": 1, "rms": 2.5, "fc_input_rms": 1.0}, {"chunk": 1, "layer_id": null, "rms": null, "fc_input_rms": null}]}], "seconds": 2.5, "cross_check": {"label": "d", "path": "/p", "engine": "vllm 0.34.0 float32", "tolerance": 0.05, "agrees": true, "prompts": 2, "identical_prompts": 1, "matched_rounds": 3, "reference_rounds": 4, "vllm_rounds": 5, "rows": [{"depth": 1, "rounds": 3, "reference_rms": 1.5, "vllm_rms": 1.51, "rel_diff": 0.0066, "max_round_rel_diff": 0.01}], "seconds": 1.25}}, {"label": "e", "path": "/q", "variant": null, "fc_norm": false, "norm_output": false, "verdict": {"status": "stable", "text": "stable over depths 1-2", "sink_first": 0.5, "sink_min": 0.5, "sink_min_depth": 1, "rms_growth": 1.0, "rms_growth_depth": 1, "thresholds": {"sink_fall": 0.5, "sink_min": 0.1, "rms_growth": 2.0}}, "overall": {"chat_template": null, "bucket": null, "prompts": 2, "depths": [{"depth": 1, "passes": 4, "sink_share": 0.5, "context_share": 0.25, "own_share": 0.25, "fed_rms": 1.5, "reached": 8, "accepted": 6, "conditional_acceptance": 0.75, "per_head": {"sink": [[0.5, 0.5]], "context": [[0.25]], "own": [[0.25]]}}, {"depth": 2, "passes": 0, "sink_share": null, "context_share": null, "own_share": null, "fed_rms": null, "reached": 0, "accepted": 0, "conditional_acceptance": null, "per_head": {}}], "aux": [{"chunk": 0, "layer_id": 1, "rms": 2.5, "fc_input_rms": 1.0}, {"chunk": 1, "layer_id": null, "rms": null, "fc_input_rms": null}]}, "groups": [], "seconds": 1.0, "cross_check": null}], "seconds": 3.5}',
    "finetune": '[{"draft": "/d", "target": "/t", "out": "/o", "variant": "EAGLE-3.1", "aux_layer_ids": [1, 2, 3], "dtype": "BF16", "stages": [{"name": "fc_norm", "steps": 60, "lr": 0.001, "l2sp": 0.0}, {"name": "all", "steps": 60, "lr": 0.0001, "l2sp": 0.001}], "prompts": "builtin", "num_prompts": 2, "chat_template": "none", "continuation_tokens": 96, "ttt_steps": 3, "batch_size": 8, "seed": 0, "max_len": 128, "eval_every": 1, "nproc": 2, "hold_out_every": 5}, {"draft": "/d", "target": "/t", "out": "/o", "variant": "EAGLE-3.1", "aux_layer_ids": [1, 2, 3], "dtype": "BF16", "stages": [{"name": "fc_norm", "steps": 60, "lr": 0.001, "l2sp": 0.0}, {"name": "all", "steps": 60, "lr": 0.0001, "l2sp": 0.001}], "prompts": "builtin", "num_prompts": 2, "chat_template": "none", "continuation_tokens": 96, "ttt_steps": 3, "batch_size": 8, "seed": 0, "max_len": 128, "eval_every": 1, "nproc": 2, "hold_out_every": 5, "cache": "/c"}, {"draft": "/d", "target": "/t", "out": "/o", "variant": "EAGLE-3.1", "aux_layer_ids": [1, 2, 3], "dtype": "BF16", "stages": [{"name": "fc_norm", "steps": 60, "lr": 0.001, "l2sp": 0.0}, {"name": "all", "steps": 60, "lr": 0.0001, "l2sp": 0.001}], "prompts": "builtin", "num_prompts": 2, "chat_template": "none", "continuation_tokens": 96, "ttt_steps": 3, "batch_size": 8, "seed": 0, "max_len": 128, "eval_every": 1, "nproc": 2, "hold_out_every": 5, "cache": "/c", "capture": {"engine": "reference", "dtype": "auto", "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "distributed_executor_backend": null, "shard_size": 64, "max_model_len": null}}, {"out": "/o", "seconds": 5.56, "generate_seconds": 1.23, "sequences": 10, "tokens": 500, "loss_before": 1.6667, "loss_after": 1.2, "step_acc_before": [0.3333, 0.3333, 0.3333], "step_acc_after": [0.6667, 0.6667, 0.6667], "held_out": 2, "eal_before": 0.4667, "best": {"stage": "all", "step": 2, "eal": 1.5}, "stages": [{"name": "all", "steps": 2, "lr": 0.0001, "l2sp": 0.0, "trainable": ["fc.weight"], "losses": [1.5555, 1.2], "seconds": 3.14, "eal": [[1, 1.2543], [2, 1.5]], "best_step": null}]}]',
    "push": '[{"dry_run": true, "repo_id": "org/name", "revision": "main", "create_pr": true, "private": null, "commit_message": "Upload draft", "files": {"config.json": 512, "model.safetensors": 4096, "README.md": 900}, "total_bytes": 5508, "card_retargeted": true, "card_generated": true, "endpoint": "https://hf.co", "validation_errors": ["E104"], "validation_warnings": 2, "would_push": false}, {"repo_id": "org/name", "revision": "dev", "commit_oid": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "commit_url": "https://hf.co/c", "pr_url": null, "files": {"config.json": 512, "model.safetensors": 4096, "README.md": 900}, "total_bytes": 5508, "card_retargeted": false, "card_generated": true, "endpoint": "https://hf.co", "validation_errors": ["E104"], "validation_warnings": 1}]',
    "upgrade-vllm": '[{"source": "vllm-eagle3", "source_layout": "vllm", "storage": "single", "layout": "vllm", "config_format": "native", "attention": "llama", "num_aux": 3, "target_hidden_size": 64, "norm_dtype": "BF16", "norm_output": true, "aux_layer_ids": {"ids": [2, 4, 5], "origin": "config", "detail": "config eagle_aux_hidden_state_layer_ids"}, "renames": {}, "additions": [{"name": "fc_norm.0.weight", "dtype": "BF16", "shape": [64], "init": "ones"}, {"name": "fc_norm.1.weight", "dtype": "BF16", "shape": [64], "init": "ones"}, {"name": "fc_norm.2.weight", "dtype": "BF16", "shape": [64], "init": "ones"}], "config_diff": {"added": {"_eagle_convert": {"tool": "eagle-convert", "version": "0.1.0", "operation": "upgrade EAGLE-3 -> EAGLE-3.1", "source": "vllm-eagle3", "source_layout": "vllm", "source_storage": "single", "output_layout": "vllm", "added_tensors": ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"], "added_init": "ones", "renamed_tensors": 0, "aux_layer_ids_from": "config eagle_aux_hidden_state_layer_ids", "config_changes": ["fc_norm", "norm_output"]}}, "removed": {}, "changed": {"fc_norm": {"a": false, "b": true}, "norm_output": {"a": false, "b": true}}}, "config_after": {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256, "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 2048, "rope_theta": 10000.0, "tie_word_embeddings": false, "draft_vocab_size": 128, "target_hidden_size": 64, "torch_dtype": "bfloat16", "eagle_aux_hidden_state_layer_ids": [2, 4, 5], "norm_before_residual": false, "fc_norm": true, "norm_output": true, "norm_before_fc": false, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "use_aux_hidden_state": true}, "_eagle_convert": {"tool": "eagle-convert", "version": "0.1.0", "operation": "upgrade EAGLE-3 -> EAGLE-3.1", "source": "vllm-eagle3", "source_layout": "vllm", "source_storage": "single", "output_layout": "vllm", "added_tensors": ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"], "added_init": "ones", "renamed_tensors": 0, "aux_layer_ids_from": "config eagle_aux_hidden_state_layer_ids", "config_changes": ["fc_norm", "norm_output"]}}, "files": [{"filename": "model.safetensors", "bytes": 200144, "tensors": 18}], "output_files": {"model.safetensors": 200144, "config.json": 1303, "README.md": 2161}, "total_bytes": 203608, "warnings": [], "not_carried": [], "for": []}, {"methods": ["reflink", "hardlink", "copy"], "linked": [{"filename": "model.safetensors", "source": "model.safetensors", "bytes": 134224, "tensors": 15}], "new_shard": {"filename": "fc_norm.safetensors", "bytes": 648, "tensors": ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"]}, "output_files": {"model.safetensors": 134224, "fc_norm.safetensors": 648, "model.safetensors.index.json": 998, "config.json": 1422, "README.md": 2161}, "linked_bytes": 134224, "new_bytes": 5229, "config_after": {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256, "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 2048, "rope_theta": 10000.0, "tie_word_embeddings": false, "draft_vocab_size": 128, "target_hidden_size": 64, "torch_dtype": "bfloat16", "eagle_aux_hidden_state_layer_ids": [2, 4, 5], "norm_before_residual": false, "fc_norm": true, "norm_output": true, "norm_before_fc": false, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "use_aux_hidden_state": true}, "_eagle_convert": {"tool": "eagle-convert", "version": "0.1.0", "operation": "upgrade EAGLE-3 -> EAGLE-3.1", "source": "vllm-eagle3", "source_layout": "vllm", "source_storage": "single", "output_layout": "vllm", "added_tensors": ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"], "added_init": "ones", "renamed_tensors": 0, "aux_layer_ids_from": "config eagle_aux_hidden_state_layer_ids", "config_changes": ["fc_norm", "norm_output"], "weight_files": {"linked": ["model.safetensors"], "new": "fc_norm.safetensors"}}}}]',
    "validate-specforge": '{"schema_version": 1, "source": "specforge-eagle3", "ok": true, "errors": 0, "warnings": 2, "infos": 0, "layout": "specforge", "variant": "EAGLE-3", "vllm_architecture": "LlamaForCausalLMEagle3", "vllm_class": "Eagle3LlamaForCausalLM", "target": null, "checks": ["files", "keys", "shapes", "config", "vocab", "producer"], "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.34.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.34.0\'s Model Runner V2, the only runner (Model Runner V1 was removed in 0.34.0), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}], "deep": null, "engine": null, "vllm": null, "serve": null, "fingerprints": null, "for": null, "serve_commands": [{"engine": "vllm", "release": "0.34.0", "command": "vllm serve TARGET --speculative-config \'{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}\'", "argv": ["vllm", "serve", "TARGET", "--speculative-config", "{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}"], "flags": {"--speculative-config": "{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}"}, "fields": {"method": "eagle3", "model": "specforge-eagle3", "num_speculative_tokens": 3}, "config_file": null, "config_text": null, "notes": []}], "serve_config": null, "seconds": 1.235, "timings": {"static": 0.012}, "notes": {}}',
    "matrix-specforge": '[{"schema_version": 1, "source": "specforge-eagle3", "ok": true, "default": "default", "target": null, "layout": "specforge", "variant": "EAGLE-3", "summary": "vLLM 0.34.0 serves it differently (W323); 0.22.0-0.33.0 serve it differently (W323, W603); 0.21.0 serves it as trained; SGLang 0.5.23 serves it as trained", "as_trained": ["0.21.0"], "engines": [{"engine": "sglang", "release": "0.5.23", "verdict": "served as trained", "codes": []}], "matrix": [{"engine": "vllm", "release": "0.21.0", "verdict": "served as trained", "codes": [], "why": "", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 2, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.21.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W320", "slug": "aux-ids-missing", "level": "warning", "message": "no eagle_aux_hidden_state_layer_ids: vLLM taps (2, N//2, N-3) (SpecForge trains on exactly these when it writes no ids, so it is served as trained)", "fix": "Write eagle_aux_hidden_state_layer_ids top-level (vLLM convention). For SGLang write in eagle_config the ids it needs, not a copy (it adds 1: each id - 1 for Llama/Qwen targets; validate --for sglang names them).", "tensor": null, "field": "eagle_aux_hidden_state_layer_ids", "impact": "hygiene"}]}, {"engine": "vllm", "release": "0.22.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.22.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.22.0\'s Model Runner V2, the GPU default for only unquantized dense Qwen3ForCausalLM targets, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.22.1", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.22.1 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.22.1\'s Model Runner V2, the GPU default for only unquantized dense Qwen3ForCausalLM targets, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.23.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.23.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.23.0\'s Model Runner V2, the GPU default for only unquantized dense Qwen3ForCausalLM targets, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.24.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.24.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.24.0\'s Model Runner V2, the GPU default for a list of target architectures (Qwen3, Llama, DeepseekV2, Qwen2Moe, GraniteMoe, ...), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.25.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.25.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.25.0\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.25.1", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.25.1 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.25.1\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.26.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.26.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.26.0\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.27.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.27.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.27.0\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.27.1", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.27.1 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.27.1\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.28.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.28.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.28.0\'s Model Runner V2, the GPU default for every non-MoE, non-hybrid target and a list of MoE architectures, never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.29.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.29.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.29.0\'s Model Runner V2, the GPU default for every target (with Triton and no unsupported feature), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.30.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.30.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.30.0\'s Model Runner V2, the GPU default for every target (with Triton and no unsupported feature), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.31.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.31.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.31.0\'s Model Runner V2, the GPU default for every target (with Triton and no unsupported feature), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.32.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.32.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.32.0\'s Model Runner V2, the GPU default for every target (with Triton and no unsupported feature), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.33.0", "verdict": "served differently", "codes": ["W323", "W603"], "why": "W323 aux-ids-v2-runner, W603 aux-id-convention", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 3, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.33.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.33.0\'s Model Runner V2, the GPU default for every target (with Triton and no unsupported feature), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}, {"code": "W603", "slug": "aux-id-convention", "level": "warning", "message": "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] are SpecForge\'s ids, trained on A(2, 4, 5) (sgl-project/SpecForge @ a6b6b023); vLLM taps A(1, 3, 4) on the V1 runner (CPU, and where V2 falls back to V1); V2 reads no eagle_config ids", "fix": "Write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (vLLM\'s convention).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "vllm", "release": "0.34.0", "verdict": "served differently", "codes": ["W323"], "why": "W323 aux-ids-v2-runner", "vllm_class": "Eagle3LlamaForCausalLM", "errors": 0, "warnings": 2, "infos": 0, "findings": [{"code": "W307", "slug": "implicit-norm-before-residual", "level": "warning", "message": "norm_before_residual is not written; vLLM assumes false (plain config path), and the other path assumes the opposite; SpecForge trains with false, so vLLM 0.34.0 serves it as trained", "fix": "Write norm_before_residual with the value the draft was trained with.", "tensor": null, "field": "norm_before_residual", "impact": "hygiene"}, {"code": "W323", "slug": "aux-ids-v2-runner", "level": "warning", "message": "aux ids only in eagle_config.eagle_aux_hidden_state_layer_ids: vLLM 0.34.0\'s Model Runner V2, the only runner (Model Runner V1 was removed in 0.34.0), never reads them, so it taps (2, N//2, N-3) of an N-layer target instead of [1, 3, 4] (SpecForge trained them on A(2, 4, 5))", "fix": "Also write eagle_aux_hidden_state_layer_ids: [2, 4, 5] at the top level (SpecForge\'s [1, 3, 4]).", "tensor": null, "field": "eagle_config.eagle_aux_hidden_state_layer_ids", "impact": "computes-differently"}]}, {"engine": "sglang", "release": "0.5.23", "verdict": "served as trained", "codes": [], "why": "", "vllm_class": null, "errors": 0, "warnings": 0, "infos": 0, "findings": []}], "serve_commands": [{"engine": "vllm", "release": "0.32.0", "command": "vllm serve TARGET --speculative-config \'{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}\'", "argv": ["vllm", "serve", "TARGET", "--speculative-config", "{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}"], "flags": {"--speculative-config": "{\\"method\\": \\"eagle3\\", \\"model\\": \\"specforge-eagle3\\", \\"num_speculative_tokens\\": 3}"}, "fields": {"method": "eagle3", "model": "specforge-eagle3", "num_speculative_tokens": 3}, "config_file": null, "config_text": null, "notes": []}, {"engine": "sglang", "release": "0.5.23", "command": "python -m sglang.launch_server --model-path TARGET --speculative-algorithm EAGLE3 --speculative-draft-model-path specforge-eagle3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4", "argv": ["python", "-m", "sglang.launch_server", "--model-path", "TARGET", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specforge-eagle3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"], "flags": {"--model-path": "TARGET", "--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "specforge-eagle3", "--speculative-num-steps": 3, "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 4}, "fields": {}, "config_file": null, "config_text": null, "notes": []}], "seconds": 2.346, "timings": {"rules": 0.046}}]',
}

BUILDERS = {"drift": _drift, "push": _push, "diff": _diff, "finetune": _finetune}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_json_is_unchanged_by_the_conversion(name: str) -> None:
    assert json.dumps(BUILDERS[name]().to_dict()) == GOLDEN[name]


def _validate(draft: str) -> Any:
    from dataclasses import replace

    from eagle_convert.validate import validate_checkpoint

    report = validate_checkpoint(draft, vllm_version="0.34.0")
    return replace(report, seconds=1.23456, timings={"static": 0.0123456}, vllm=None)  # vllm: names the installed one


def _upgrade(draft: str) -> Any:
    from eagle_convert.upgrade import plan_upgrade_draft
    from eagle_convert.upgrade.linkplan import plan_link

    plan = plan_upgrade_draft(draft, "out")
    return _Both(plan, plan_link(plan))


def _matrix(draft: str) -> Any:
    from dataclasses import replace

    from eagle_convert.engines import engine_status
    from eagle_convert.validate import compatibility_matrix
    from eagle_convert.vllm_model import installed_status

    m = compatibility_matrix(draft, default=installed_status(), engines=[engine_status("sglang", "0.5.23")])
    m = replace(m, seconds=2.34567, timings={"rules": 0.0456789})
    return _Both(replace(m, default=_Installed()))


class _Installed:
    """The matrix's default release stands in: its JSON names the installed vLLM (not this test's)."""

    release = "0.34.0"

    def to_dict(self) -> str:
        return "default"


ON_FIXTURES = {
    "matrix-specforge": ("specforge-eagle3", _matrix),
    "validate-specforge": ("specforge-eagle3", _validate),
    "upgrade-vllm": ("vllm-eagle3", _upgrade),
}


@pytest.mark.parametrize("name", sorted(ON_FIXTURES))
def test_json_of_a_real_draft_is_unchanged_by_the_conversion(name: str, built_fixtures, monkeypatch) -> None:
    """On a fixture draft named by a relative path (the JSON names it, and sizes depend on it)."""
    draft, build = ON_FIXTURES[name]
    monkeypatch.chdir(built_fixtures(draft).parent)
    assert json.dumps(build(draft).to_dict()) == GOLDEN[name]


def test_drift_report_reads_back_equal() -> None:
    from eagle_convert.drift import read_drift_report

    report = _drift()
    assert read_drift_report(json.loads(json.dumps(report.to_dict()))) == report


# Where each pinned result's objects are described: (result, path in its JSON, schema, pointer in the schema).
SCHEMA_OBJECTS = [
    ("drift", "", "drift-report", ""),
    ("drift", "drafts/0", "drift-report", "properties/drafts/items"),
    ("drift", "drafts/0/verdict", "drift-report", "$defs/verdict"),
    ("drift", "drafts/0/overall", "drift-report", "$defs/group"),
    ("drift", "drafts/0/overall/depths/0", "drift-report", "$defs/depth"),
    ("drift", "drafts/0/overall/aux/0", "drift-report", "$defs/aux"),
    ("drift", "drafts/0/cross_check", "drift-report", "$defs/cross_check"),
    ("drift", "drafts/0/cross_check/rows/0", "drift-report", "$defs/cross_check/properties/rows/items"),
    ("push", "0", "push-report", "oneOf/0"),
    ("push", "1", "push-report", "oneOf/1"),
    ("diff", "", "diff-report", ""),
    ("diff", "config", "diff-report", "$defs/configDiff"),
    ("diff", "changed/0", "diff-report", "properties/changed/items"),
    ("finetune", "0", "finetune-report", "properties/plan"),
    ("finetune", "2", "finetune-report", "properties/plan"),
    ("finetune", "3", "finetune-report", "properties/result"),
    ("finetune", "3/stages/0", "finetune-report", "properties/result/properties/stages/items"),
    ("validate-specforge", "", "validate-report", ""),
    ("matrix-specforge", "0", "validate-matrix", ""),
    ("matrix-specforge", "0/engines/0", "validate-matrix", "properties/engines/items"),
    ("matrix-specforge", "0/matrix/0", "validate-matrix", "properties/matrix/items"),
    ("upgrade-vllm", "0", "upgrade-report", "properties/plan"),
    ("upgrade-vllm", "0/additions/0", "upgrade-report", "properties/plan/properties/additions/items"),
    ("upgrade-vllm", "1", "upgrade-report", "properties/link"),
]


def _at(node: Any, path: str) -> Any:
    for part in filter(None, path.split("/")):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


@pytest.mark.parametrize(("name", "path", "schema", "pointer"), SCHEMA_OBJECTS)
def test_every_key_a_declaration_writes_is_in_its_schema(name: str, path: str, schema: str, pointer: str) -> None:
    """The schemas allow new fields (no additionalProperties: false), so validating an output never
    notices a key the schema does not describe; this does: every key written is a property, and
    every required property is written."""
    from eagle_convert.draft import load_schema

    obj, spec = _at(json.loads(GOLDEN[name]), path), _at(load_schema(f"{schema}.schema.json"), pointer)
    assert sorted(set(obj) - set(spec["properties"])) == []
    assert sorted(set(spec.get("required", ())) - set(obj)) == []
