"""Read the hidden state vLLM's EAGLE-3 drafter feeds back, by draft depth, out of a running engine.

Loaded into vLLM's workers as ``worker_extension_cls`` (vLLM 0.32.0 `v1/worker/worker_base.py`,
`WorkerWrapperBase.init_worker`) and driven with ``LLM.collective_rpc``: ``arm`` hooks the draft
model, one request is generated, ``take`` returns what the hooks saw and unhooks.

What is fed back (vLLM 0.32.0): `model_executor/models/llama_eagle3.py`, `LlamaModel.forward`,
returns ``(hidden_states, aux_output)`` after ``self.norm(hidden_states, residual)``, with
``aux_output = hidden_states if self.norm_output else hidden_prenorm``: the post-norm state with
``norm_output``, else the pre-norm residual sum. `v1/spec_decode/llm_base_proposer.py`,
`SpecDecodeBaseProposer.propose`, keeps that second output: after the first pass (over every
verified position) it takes ``hidden_states[token_indices_to_sample]`` (one row per request, the
indices `set_inputs_first_pass` returns) and copies it into ``self.hidden_states`` as the next
step's input; each of the k-1 single-token steps then returns the next one in rows
``[:batch_size]``. So the state fed back at depth d is the second output of the d-th draft-model
call of a ``propose``, at the sampled rows (call 1) or rows ``[:batch_size]`` (calls 2..k); depth
k's is computed and then dropped, exactly as the reference drafter computes it
(`reference/drafter.py`, `EagleDrafter.forward`). The hook keeps its per-token RMS in fp32 and the
rope position drafted from (the sampled row's position, call 1), which names the round.

Model Runner V2 (`v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py`,
``TargetDependentARSpeculator``; the only runner from vLLM 0.34.0) feeds back the same state:
``propose`` fills ``last_token_indices`` (`prepare_prefill_inputs`), ``_prefill(num_reqs, ...)`` runs
the draft model once over every position (``_run_model``) and copies the second output at
``last_token_indices[:num_reqs]`` into ``self.hidden_states[:num_reqs]``; every later step
(`_decode` in 0.34.0, `_generate_draft` in 0.32.0) runs it on rows ``[:num_reqs]`` and
`update_draft_inputs` copies those rows back, except after the last step. So the hook is the same;
only where a round starts (``propose``, whose dummy runs pass ``dummy_run=True``) and which rows
were sampled (``last_token_indices`` when ``_prefill`` starts) are read from the speculator.

A forward hook on the (unwrapped) draft model, not a change to it: the engine computes what it
always computes (with ``enforce_eager``, so no CUDA graph replays past the hook). ``propose`` and
the first-pass method are wrapped on the drafter instance only to know where a round starts and
which rows were sampled.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.vllm.runners import draft_owner

EXTENSION = "eagle_convert.vllm.drift_ext.DriftExtension"
# The drafter methods wrapped per runner: V1's EagleProposer, V2's speculator.
_WRAPPED = {"v1": ("propose", "set_inputs_first_pass"), "v2": ("propose", "_prefill")}


def _first_pass(kind: str, owner: Any, original: Any, st: dict[str, Any]) -> Any:
    """``original`` (the first-pass method) wrapped to record the sampled rows in ``st["rows"]``."""
    if kind == "v1":

        def v1_first_pass(*args, **kwargs):
            out = original(*args, **kwargs)
            if st["active"]:
                st["rows"] = out[1]  # (num_tokens, token_indices_to_sample, common_attn_metadata)
            return out

        return v1_first_pass

    def v2_prefill(num_reqs, *args, **kwargs):
        if st["active"]:
            st["rows"] = owner.last_token_indices[:num_reqs].clone()
        return original(num_reqs, *args, **kwargs)

    return v2_prefill


class DriftExtension:
    """Methods vLLM mixes into its worker class (``self`` is the worker)."""

    model_runner: Any  # the worker's, once vLLM has mixed this class in
    _ec_drift: dict[str, Any]

    def eagle_convert_drift_arm(self) -> dict:
        """Hook the draft model and the drafter for the next requests; forget earlier rounds."""
        self.eagle_convert_drift_disarm()
        kind, drafter, model = draft_owner(self.model_runner)
        st: dict[str, Any] = {"rounds": [], "cur": None, "rows": None, "calls": 0, "active": False, "restore": []}
        propose_name, first_name = _WRAPPED[kind]
        propose = getattr(drafter, propose_name)
        first_pass = _first_pass(kind, drafter, getattr(drafter, first_name), st)

        def wrapped_propose(*args, **kwargs):
            st["cur"], st["rows"], st["calls"] = None, None, 0
            st["active"] = not kwargs.get("dummy_run", False)  # V2 runs propose in its dummy runs too
            try:
                return propose(*args, **kwargs)
            finally:
                if st["cur"] is not None:
                    st["rounds"].append(st["cur"])
                st["cur"], st["rows"], st["active"] = None, None, False

        def hook(_m, args, kwargs, out):
            if st["rows"] is None or not isinstance(out, tuple):  # a dummy run, or not an EAGLE-3 model
                return
            fed = out[1]
            st["calls"] += 1
            rows = st["rows"]
            if st["calls"] == 1:
                pos = kwargs.get("positions", args[1] if len(args) > 1 else None)
                sel = fed[rows]
                at = [] if pos is None or pos.dim() != 1 else pos[rows].tolist()
                st["cur"] = {"positions": at, "rms": []}
            else:
                sel = fed[: len(rows)]
            if st["cur"] is not None:
                st["cur"]["rms"].append(sel.float().pow(2).mean(-1).sqrt().tolist())

        handle = model.register_forward_hook(hook, with_kwargs=True)
        setattr(drafter, propose_name, wrapped_propose)
        setattr(drafter, first_name, first_pass)
        st["restore"] = [handle, drafter, (propose_name, first_name)]
        self._ec_drift = st
        return {"armed": True, "model": type(model).__name__, "runner": kind}

    def eagle_convert_drift_take(self) -> dict:
        """Every round seen since ``arm``: the positions drafted from and, per depth, the fed-back RMS
        of each request of the batch (``rms[depth - 1][row]``); unhooks."""
        st = getattr(self, "_ec_drift", None)
        if st is None:
            return {"ok": False, "rounds": []}
        rounds = st["rounds"]
        self.eagle_convert_drift_disarm()
        return {"ok": True, "rounds": rounds}

    def eagle_convert_drift_disarm(self) -> dict:
        st = getattr(self, "_ec_drift", None)
        if st is not None and st["restore"]:
            handle, drafter, names = st["restore"]
            handle.remove()
            for name in names:
                drafter.__dict__.pop(name, None)  # the class's methods again
            st["restore"] = []
        self._ec_drift = {"rounds": [], "restore": []}
        return {"disarmed": True}
