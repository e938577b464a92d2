"""How an engine other than vLLM reads an EAGLE-3 / 3.1 draft: one release's rules as data.

vLLM's rules live in `vllm_model/` (every release 0.21.0 ... 0.34.0). SGLang and TensorRT-LLM read the
same tensors and disagree on the rest (where the aux ids are read and what an id means, which norm
flags are read where, which architecture names build a draft, the speculators config): each
`EngineRules` holds what one release does, and `cites` names the file and function each fact was
read from. The release modules (`sglang.py`, `trtllm.py`) fill them; `reading.py` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# How an engine turns an id list into the target hidden states it taps. A(k) is the residual stream
# after k target layers (vLLM's meaning of id k: model_executor/models/llama.py _maybe_add_hidden_state).
# "plus-one": id k taps A(k + 1) (SGLang's capture at the input of layer k + 1; TRT-LLM's output of layer k).
# "first-id": A(k + 1) only when ids[0] == 1, else A(k) (SGLang deepseek_v2 / glm4_moe_lite targets).
# "max-id": A(k) when max(ids) == N, else A(k + 1) (SGLang gpt_oss targets).
Offset = Literal["plus-one", "first-id", "max-id"]

# Where an engine's draft lm_head comes from. "shipped": the draft's own lm_head.weight when the draft
# ships one, else the target's (TensorRT-LLM, and vLLM apart from its bit-identical test).
# "draft-vocab-size": tie_word_embeddings makes lm_head the embedding; otherwise the target's lm_head
# when config.json has no draft_vocab_size (a shipped lm_head.weight is replaced), else the draft's own,
# which must be shipped (SGLang).
LmHeadRule = Literal["shipped", "draft-vocab-size"]


@dataclass(frozen=True)
class EngineRules:
    """One engine release: where it reads each flag and id, and what it does with the rest."""

    engine: str  # "sglang", "trtllm"
    release: str  # "0.5.23", "main@00679c6"
    title: str  # "SGLang", "TensorRT-LLM"
    # aux ids: the config path the draft's ids are read from (None: never from the draft) ...
    aux_ids_path: str | None
    # ... or the serving-config key that sets them (TRT-LLM's eagle3_layers_to_capture)
    aux_ids_serving_key: str | None
    offset: Offset  # for a target class not in `offsets`
    offsets: dict[str, Offset]  # target architecture (class name) -> its own offset rule
    sorts_ids: bool  # the engine sorts the ids before it concatenates the states (fc input order)
    default_ids: str  # the default ids as the engine writes them (every engine taps A(2), A(N//2), A(N-3))
    fc_norm_keys: tuple[str, ...]  # top-level keys any of which switches fc_norm on
    norm_output_paths: tuple[str, ...]  # paths any of which switches norm_output on
    norm_before_fc_paths: tuple[str, ...]  # first path present decides (eagle_config first)
    norm_before_fc_mla: bool  # whether the MLA draft class reads norm_before_fc at all
    fc_norm_excludes_norm_before_fc: bool  # both on: only fc_norm is applied
    norm_before_residual: bool  # whether the first layer's residual can be the post-norm state
    architectures: frozenset[str]  # names that build an EAGLE-3 draft (empty: the name is ignored)
    mla_architecture: str | None  # the one name that builds the MLA draft (None: chosen by kv_lora_rank)
    fallback: str | None  # the class any other name builds (None: the name is ignored)
    reads_speculators: bool  # reads a speculators-format config (speculators_config, transformer_layer_config)
    d2t_needs_draft_vocab_size: bool  # d2t is built only when draft_vocab_size is written and differs
    window_flag: str | None  # the server flag that sets a draft sliding window (the config's is ignored)
    window_mla: bool  # whether the MLA draft honours that flag
    # embedding / lm_head sharing: True when the engine replaces the draft's embed_tokens with the target's
    # whenever target_hidden_size (if written) equals hidden_size, whatever the draft ships (vLLM keeps a
    # shipped one unless bit-identical); with differing widths every engine keeps the draft's own
    embed_from_target: bool
    lm_head_from: LmHeadRule
    cites: dict[str, str] = field(default_factory=dict)  # rule -> file and function (and commit)

    @property
    def label(self) -> str:
        """ "SGLang 0.5.23", "TensorRT-LLM main@00679c6": how every message names the engine and release."""
        return f"{self.title} {self.release}"

    def cite(self, key: str) -> str:
        """The citation of rule `key` (file and function), or "" where none is recorded."""
        return self.cites.get(key, "")
