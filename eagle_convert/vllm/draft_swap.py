"""Swap the draft of a running vLLM engine in place, through vLLM's own weight-reload API.

Loaded into vLLM's workers as ``worker_extension_cls`` (vLLM 0.32.0 `v1/worker/worker_base.py`,
`WorkerWrapperBase.init_worker`, adds it as a base of the worker class) and called with
``LLM.collective_rpc("eagle_convert_swap_draft", args=(path,))``.

Why the reload API and not ``model.load_weights``: after loading, vLLM processes weights per layer
(on CPU, `model_executor/layers/utils.py` `dispatch_cpu_unquantized_gemm` packs each linear weight
into a oneDNN or sgl handle and may empty ``layer.weight``). Writing new values into the parameters
would leave the packed copies stale, and the engine would draft with the old weights, silently.
`model_executor/model_loader/reload/inplace.py` `reload_weights` puts every layer back into
checkpoint format, loads, re-runs that processing, and copies the result into the original
storage, so nothing that holds a reference (packed handles, graphs) goes stale.

Refused (``SwapRefused``; the caller then starts a fresh engine) where a swap could not equal a
fresh load: no draft model on this runner, tensor or pipeline parallelism, parallel drafting
(its mask tensor is derived at load time), or a tensor the running draft shares with the target
(vLLM shares ``embed_tokens``/``lm_head`` when the first draft's copy equals the target's:
`v1/spec_decode/llm_base_proposer.py` `_maybe_share_embeddings`, `_maybe_share_lm_head`) that
differs in the new draft, since loading it would overwrite the target's own weights (Model Runner V2,
the only runner from vLLM 0.34.0: `v1/worker/gpu/spec_decode/eagle/utils.py` `maybe_share_target_embed`,
`share_target_lm_head`, which share by module, so the same parameter-identity test finds them).
Which drafts may be swapped at all (same config, same tensors) is decided by the caller:
`vllm/sharing.py`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from eagle_convert.vllm.runners import draft_owner

EXTENSION = "eagle_convert.vllm.draft_swap.DraftSwapExtension"
SWAP_METHOD = "eagle_convert_swap_draft"
_SHARED_KINDS = ("embed_tokens", "lm_head")


class SwapRefused(Exception):
    """This engine cannot take the new draft in place; start a fresh one."""


class DraftSwapExtension:
    """Methods vLLM mixes into its worker class (``self`` is the worker)."""

    def eagle_convert_swap_draft(self, path: str) -> dict:
        try:
            return swap_draft(self, path)
        except SwapRefused as exc:
            return {"swapped": False, "refused": str(exc)}


def _draft_model(runner):
    """The drafter's module: ``get_draft_model`` where the runner has it (V2; V1 from vLLM 0.32), else
    ``drafter.model`` / ``speculator.model`` (`runners.draft_owner`); None when it has no draft model."""
    get = getattr(runner, "get_draft_model", None)
    if not callable(get):
        try:
            return draft_owner(runner)[2]
        except RuntimeError:
            return None
    model = get()
    unwrap = getattr(model, "unwrap", None)
    return unwrap() if callable(unwrap) else model


def _shared_params(draft, target) -> dict[str, Any]:
    """Draft parameter name -> parameter, for parameters that are the target's own objects."""
    target_ids = {id(p) for p in target.parameters()}
    return {n: p for n, p in draft.named_parameters(remove_duplicate=False) if id(p) in target_ids}


def _kind(name: str) -> str | None:
    return next((k for k in _SHARED_KINDS if k in name), None)


def _check_shared(folder: Path, shared: dict[str, Any]) -> set[str]:
    """Checkpoint names that would load into a shared parameter; refused unless equal to it."""
    import torch
    from safetensors import safe_open

    by_kind = {k: p for n, p in shared.items() if (k := _kind(n))}
    if not by_kind:
        return set()
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SwapRefused(f"the running draft shares {', '.join(sorted(by_kind))} with the target")
    skip: set[str] = set()
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            for name in h.keys():
                kind = _kind(name)
                if kind not in by_kind:
                    continue
                param = by_kind[kind]
                new = h.get_tensor(name)
                same = new.shape == param.shape and torch.equal(new.to(param.dtype), param.detach().cpu())
                if not same:
                    raise SwapRefused(
                        f"{f.name}: {name} differs from the target's {kind}, which the running draft shares"
                    )
                skip.add(name)
    return skip


def swap_draft(worker, path: str) -> dict:
    """Reload the running draft's weights from ``path`` in place. Returns what was done."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.reload.inplace import reload_weights
    from vllm.model_executor.model_loader.utils import get_draft_load_config

    vc = worker.vllm_config
    pc = vc.parallel_config
    if pc.tensor_parallel_size > 1 or pc.pipeline_parallel_size > 1:
        raise SwapRefused("tensor or pipeline parallel engine")
    spec = vc.speculative_config
    if spec is None or getattr(spec, "parallel_drafting", False):
        raise SwapRefused("no speculative config, or parallel drafting")
    runner = worker.model_runner
    model = _draft_model(runner)
    if model is None:
        raise SwapRefused(f"{type(runner).__name__} has no draft model")
    skip = _check_shared(Path(path), _shared_params(model, runner.get_model()))

    model_config = copy.copy(spec.draft_model_config)
    model_config.model = path
    model_config.revision = None
    loader = get_model_loader(get_draft_load_config(vc))
    names: list[str] = []

    def weights():
        for name, tensor in loader.get_all_weights(model_config, model):
            if name in skip:
                continue  # equal to the shared target tensor (checked above): leave the target alone
            names.append(name)
            yield name, tensor

    with set_current_vllm_config(vc):
        reload_weights(vc, model, weights_iterator=weights(), weights_path=None, is_checkpoint_format=True)
    return {"swapped": True, "tensors": len(names), "skipped_shared": sorted(skip)}
