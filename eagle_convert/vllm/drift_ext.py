"""Read the hidden state vLLM's EAGLE-3 proposer feeds back, by draft depth, out of a running engine.

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

A forward hook on the (unwrapped) draft model, not a change to it: the engine computes what it
always computes. ``propose`` and ``set_inputs_first_pass`` are wrapped on the proposer instance
only to know where a round starts and which rows were sampled.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DriftExtension", "EXTENSION"]

EXTENSION = "eagle_convert.vllm.drift_ext.DriftExtension"


def _proposer_and_model(runner) -> tuple[Any, Any]:
    drafter = getattr(runner, "drafter", None)
    model = getattr(drafter, "model", None)
    if drafter is None or model is None:
        raise RuntimeError("this vLLM runner has no EAGLE proposer with a draft model (drafter.model)")
    unwrap = getattr(model, "unwrap", None)
    return drafter, unwrap() if callable(unwrap) else model


class DriftExtension:
    """Methods vLLM mixes into its worker class (``self`` is the worker)."""

    model_runner: Any  # the worker's, once vLLM has mixed this class in
    _ec_drift: dict[str, Any]

    def eagle_convert_drift_arm(self) -> dict:
        """Hook the draft model and the proposer for the next requests; forget earlier rounds."""
        self.eagle_convert_drift_disarm()
        drafter, model = _proposer_and_model(self.model_runner)
        st: dict[str, Any] = {"rounds": [], "cur": None, "rows": None, "calls": 0, "restore": []}
        propose, first_pass = drafter.propose, drafter.set_inputs_first_pass

        def wrapped_propose(*args, **kwargs):
            st["cur"], st["rows"], st["calls"] = None, None, 0
            try:
                return propose(*args, **kwargs)
            finally:
                if st["cur"] is not None:
                    st["rounds"].append(st["cur"])
                st["cur"] = None

        def wrapped_first_pass(*args, **kwargs):
            out = first_pass(*args, **kwargs)
            st["rows"] = out[1]  # (num_tokens, token_indices_to_sample, common_attn_metadata)
            return out

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
        drafter.propose, drafter.set_inputs_first_pass = wrapped_propose, wrapped_first_pass
        st["restore"] = [handle, drafter]
        self._ec_drift = st
        return {"armed": True, "model": type(model).__name__}

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
            handle, drafter = st["restore"]
            handle.remove()
            for name in ("propose", "set_inputs_first_pass"):
                drafter.__dict__.pop(name, None)  # the class's methods again
            st["restore"] = []
        self._ec_drift = {"rounds": [], "restore": []}
        return {"disarmed": True}
