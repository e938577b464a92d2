"""What a strict load check reports per draft (`EngineReport`), and the request and answer shapes
the session's worker speaks for it (`strict_load_worker.run_check_many` runs on the other side)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from eagle_convert.errors import EngineError
from eagle_convert.jsonable import load
from eagle_convert.vllm_model import VllmFeatures


@dataclass
class EngineReport:
    """Outcome of loading one draft with vLLM's loader.

    ``loaded`` and ``unwritten`` are vLLM parameter names (``model.layers.0.mlp.down_proj.weight``,
    ``draft_id_to_target_id``). A stacked parameter with only some shards unwritten appears as
    ``model.layers.0.self_attn.qkv_proj.weight[k_proj]``. ``unwritten_keys`` are the checkpoint
    keys (canonical, on-disk names such as ``layers.0.self_attn.k_proj.weight``, ``d2t``) that
    would have filled them. ``shared_from_target`` lists parameters that vLLM takes from the target
    after loading (the draft's ``embed_tokens`` when absent; ``lm_head`` when absent with a full
    vocabulary): they are not reported as unwritten.
    """

    ok: bool
    vllm_version: str | None
    features: VllmFeatures | None
    loaded: list[str] = field(default_factory=list)
    unwritten: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    unwritten_keys: list[str] = field(default_factory=list)
    shared_from_target: list[str] = field(default_factory=list)
    stage: str | None = None  # where an error happened: config | init | load
    timings: dict[str, float] = field(default_factory=dict)
    draft: str | None = None
    # The built draft's effective settings: class, fc_norm, norm_output, norm_before_fc,
    # num_aux_hidden_states, draft_vocab_size, ... (what vLLM made of config.json).
    applied: dict = field(default_factory=dict)
    # Unwritten parameters the forward pass never reads (layers.{k>=1}.hidden_norm.weight).
    unused: list[str] = field(default_factory=list)
    # Runtime failures the built model predicts, e.g. fewer distinct aux layers than fc expects.
    problems: list[str] = field(default_factory=list)
    # unwritten name -> the checkpoint key(s) that fill it (a whole qkv_proj maps to 3 keys).
    unwritten_key_map: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _report(res: dict, features: VllmFeatures | None, seconds: float) -> EngineReport:
    """A draft's worker answer (`strict_load_worker.run_check`) as read by the fields' declaration."""
    version = res.get("vllm_version") or (features.version if features else None)
    known = {**res, "ok": bool(res.get("ok")), "vllm_version": version, "features": None, "seconds": round(seconds, 3)}
    return replace(load(EngineReport, known), features=features)


def load_request(
    drafts: list[Path], target: Path, k: int, dtype: str, max_model_len: int, speculative: dict | None = None
) -> dict:
    """The load-check request: the target, every draft and the engine settings they load with
    (`speculative`: the deployment's speculative-config keys, `serve_config.speculative_config_for`)."""
    return {
        "target": str(Path(target).resolve()),
        "drafts": [str(Path(d).resolve()) for d in drafts],
        "num_speculative_tokens": k,
        "speculative": dict(speculative or {}),
        "dtype": dtype,
        "max_model_len": max_model_len,
    }


def load_reports(res: dict, features: VllmFeatures | None, seconds: float) -> list[EngineReport]:
    """One report per draft of a load-check answer; a draft without its own timing gets its share."""
    if "results" not in res:  # the worker failed before checking anything
        raise EngineError(f"vLLM worker failed: {res.get('error')}")
    share = seconds / max(len(res["results"]), 1)
    return [_report(r, features, r.get("timings", {}).get("total_s", share)) for r in res["results"]]
