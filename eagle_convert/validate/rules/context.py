"""Everything the rule families read: the checkpoint, its description, and vLLM's reading of it.

How vLLM reads the config (both config paths, architecture and class, flags, aux ids and count) is
`eagle_convert.vllm_model.config.read_config`; this module only adds the symbols of
`schemas/tensors.json` and the on-disk -> vLLM name map the tensor rules need.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eagle_convert.draft import Checkpoint, DraftInfo, Target
from eagle_convert.io import TensorInfo
from eagle_convert.vllm_model import MAX_COUNT, Release, ServeConfig, VllmDraftConfig, positive_int, vllm_name

_T = TypeVar("_T")


@dataclass
class Context:
    """Everything rules need; `env` holds the symbols of `schemas/tensors.json`."""

    ckpt: Checkpoint
    info: DraftInfo
    view: VllmDraftConfig  # the config as vLLM reads it
    attention: str  # llama | qwen3 | mla: the class's, else what the tensors hold
    env: dict[str, Any]
    target: Target | None = None  # the target's config.json as vLLM reads it (--target)
    target_source: str | None = None
    serving_context: int | None = None  # the context the draft drafts at (--max-model-len / the serve config's)
    serving_source: str = "--max-model-len"  # where serving_context came from, for messages
    serve: ServeConfig | None = None  # --speculative-config / --max-model-len as the release reads them
    identity_required: bool = False  # check's [output] identity: lossy rejection sampling is an error
    vnames: dict[str, str | None] = field(default_factory=dict)  # on-disk name -> name after vLLM's mapping
    target_model: Any = None  # rules.target.TargetWeights: the target's weights, opened when a check needs them
    deep: bool = False  # --deep: target-weight checks read every row, not a sample
    notes: dict[str, str] = field(default_factory=dict)  # what a check read or could not do, and why
    timings: dict[str, float] = field(default_factory=dict)  # seconds per expensive check (target weights)
    # Results of pure computations, shared by the Contexts of one checkpoint (the releases of a
    # compatibility matrix), so reading and checking d2t or expanding the tensor table happens once.
    shared: dict[Hashable, Any] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any]:
        return self.ckpt.config

    @property
    def release(self) -> Release:
        """The vLLM release the verdict is for (`--vllm-version`, else the installed, else the newest)."""
        return self.view.release

    @property
    def vcfg(self) -> dict[str, Any]:
        return self.view.vcfg

    @property
    def speculators(self) -> bool:
        return self.view.speculators

    @property
    def arch(self) -> str | None:
        return self.view.architecture

    @property
    def impl(self) -> str | None:
        return self.view.draft_class.name if self.view.draft_class else None

    @property
    def flags(self) -> dict[str, bool]:
        return self.view.flags

    @property
    def aux_count(self) -> int | None:
        return self.view.aux_count

    @property
    def aux_count_source(self) -> str:
        return self.view.aux_count_source

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self.ckpt.tensors

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """`compute()`, run once per `key` across every Context sharing `shared`.

        `key` must name every input of `compute` that can differ between those Contexts (they
        share the checkpoint and the target, nothing else).
        """
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]

    def disk_name(self, vname: str) -> str | None:
        """On-disk name that vLLM maps to `vname`."""
        return next((k for k, v in self.vnames.items() if v == vname), None)


def build_context(
    ckpt: Checkpoint,
    info: DraftInfo,
    *,
    target: Target | None = None,
    target_source: str | None = None,
    serving_context: int | None = None,
    target_model: Any = None,
    deep: bool = False,
    shared: dict[Hashable, Any] | None = None,
    serve: ServeConfig | None = None,
    identity_required: bool = False,
) -> Context:
    """The Context for the release `info` was described for (`info.view`, read once by the command's
    entry); Contexts of one checkpoint may pass one `shared` memo."""
    view = info.view
    env = _symbols(view.vcfg, view.flags, view.aux_count, target)
    ctx = Context(
        ckpt,
        info,
        view,
        view.attention or info.attention,
        env,
        target,
        target_source,
        serving_context,
        target_model=target_model,
        deep=deep,
        shared={} if shared is None else shared,
        serve=serve,
        identity_required=identity_required,
    )
    if serve is not None and serve.data.get("max_model_len"):
        ctx.serving_source = "the speculative config's max_model_len"
    ctx.vnames = dict(ctx.memo("vnames", lambda: {name: vllm_name(name) for name in ckpt.tensors}))
    return ctx


def _symbols(vcfg: dict[str, Any], flags: dict[str, bool], a: int | None, target: Target | None) -> dict[str, Any]:
    h, n_heads = positive_int(vcfg.get("hidden_size")), positive_int(vcfg.get("num_attention_heads"))
    t = positive_int(vcfg["target_hidden_size"]) if "target_hidden_size" in vcfg else h
    v = positive_int(vcfg.get("vocab_size"))
    vd = positive_int(vcfg.get("draft_vocab_size")) if vcfg.get("draft_vocab_size") is not None else v
    tv = target.vocab_size if target else v
    th = target.hidden_size if target else t
    hd = positive_int(vcfg.get("head_dim")) or (h // n_heads if h and n_heads else None)
    q_lora = vcfg.get("q_lora_rank")
    return {
        "H": h,
        "T": t,
        "A": a,
        "V": v,
        "Vd": vd,
        "TV": tv or v,
        "TH": th or t,
        "L": layers if (layers := positive_int(vcfg.get("num_hidden_layers"))) is None or layers <= MAX_COUNT else None,
        "I": positive_int(vcfg.get("intermediate_size")),
        "nH": n_heads,
        "nKV": positive_int(vcfg.get("num_key_value_heads")) or n_heads,
        "hd": hd,
        "qr": positive_int(q_lora),
        "kvr": positive_int(vcfg.get("kv_lora_rank")),
        "nope": positive_int(vcfg.get("qk_nope_head_dim")),
        "rope": positive_int(vcfg.get("qk_rope_head_dim")),
        "vh": positive_int(vcfg.get("v_head_dim")),
        "use_aux": flags["use_aux"],
        "fc_norm": flags["fc_norm"],
        "norm_before_fc": flags["norm_before_fc"],
        "reduced": (vd != (tv or v)) if vd and (tv or v) else None,
        "attention_bias": bool(vcfg.get("attention_bias", False)),
        "o_bias": bool(vcfg.get("attention_bias", False) or vcfg.get("bias", False)),
        "mlp_bias": bool(vcfg.get("mlp_bias", False)),
        "has_q_lora": q_lora is not None,
        "k": None,
        "in0": None,
    }
