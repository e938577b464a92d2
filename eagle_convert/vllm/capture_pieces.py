"""One prefill's capture, put together from the pieces the ranks of a pipeline-parallel engine hold.

Under pipeline parallelism each rank owns a slice of the decoder layers (vLLM 0.32.0
`model_executor/models/utils.py`, `make_layers` / `distributed/utils.py`, `get_pp_indices`; the other
layers are ``PPMissingLayer``): the first rank sees aux id 0 (the embedding), a rank holding layers
``start..end-1`` sees aux ids ``start+1..end``, and only the last rank has the final norm and so the
logits. Each rank answers ``eagle_convert_capture_take`` with its piece (`capture_ext.py`); the
driver merges them here, by aux id, into the tensors one rank writes at ``pipeline_parallel_size``
1. Tensors travel as plain bytes: vLLM's engine-core channel returns an untyped ``collective_rpc``
result as msgpack, whose tensors come back as lists unless pickling is allowed
(`v1/serial_utils.py`, `MsgpackEncoder.enc_hook`, ``UtilityResult``).
"""

from __future__ import annotations

from typing import Any


def pack_tensor(t: Any) -> dict[str, Any]:
    """A CPU tensor as ``{"dtype", "shape", "data"}`` (msgpack-safe: str, list, bytes)."""
    import torch

    t = t.detach().contiguous().cpu()
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "data": t.view(torch.uint8).numpy().tobytes() if t.numel() else b"",
    }


def unpack_tensor(d: dict[str, Any]) -> Any:
    """The tensor `pack_tensor` packed (a copy that owns its memory)."""
    import torch

    dtype = getattr(torch, d["dtype"])
    raw = bytes(d["data"])
    if not raw:
        return torch.empty(d["shape"], dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(d["shape"]).clone()


def merge_pieces(pieces: list[dict[str, Any]], aux_ids: list[int], n: int) -> dict[str, Any]:
    """Merge every rank's piece of one prefill into ``{"aux", "argmax", "logits"}``.

    A piece is ``{"rank": int, "aux": {str(aux id): packed}, "logits": packed | None, "argmax":
    packed | None}`` (`pack_tensor`); ranks that hold nothing send empty ``aux`` and no logits.
    ``aux`` is the states at ``aux_ids``, in that order, concatenated on the last dim (the layout
    of one rank's capture).

    Args:
        pieces: one answer per rank, in any order.
        aux_ids: the ids the shard stores, in order.
        n: the prompt's length: every tensor must have one row per position.

    Returns:
        The merged tensors, on CPU.

    Raises:
        RuntimeError: an aux id no rank or two ranks sent, logits from no rank or from two, or a
        piece with another number of positions than ``n``.
    """
    import torch

    held: dict[int, list[int]] = {}
    for p in pieces:
        for k in p.get("aux") or {}:
            held.setdefault(int(k), []).append(int(p["rank"]))
    missing = [i for i in aux_ids if i not in held]
    twice = {i: r for i, r in held.items() if len(r) > 1}
    if missing or twice:
        raise RuntimeError(f"aux ids no rank captured: {missing}; captured by more than one rank: {twice}")
    with_logits = [p for p in pieces if p.get("logits") is not None]
    if len(with_logits) != 1:
        raise RuntimeError(f"expected the logits from one rank (the last), got them from {len(with_logits)}")
    by_id = {int(k): unpack_tensor(v) for p in pieces for k, v in (p.get("aux") or {}).items()}
    last = with_logits[0]
    out = {"argmax": unpack_tensor(last["argmax"]), "logits": unpack_tensor(last["logits"])}
    rows = {f"aux {i}": int(by_id[i].shape[0]) for i in aux_ids} | {k: int(t.shape[0]) for k, t in out.items()}
    if any(r != n for r in rows.values()):
        raise RuntimeError(f"captured positions per tensor {rows} for a {n}-token prompt (was it prefilled whole?)")
    out["aux"] = torch.cat([by_id[i] for i in aux_ids], dim=-1).contiguous()
    return out


def cpu_thread_bind(world_size: int, cpus: list[int]) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for ``world_size`` CPU workers on one NUMA node: the allowed
    ``cpus`` split into that many contiguous groups (``"0|1"`` for two on two cores).

    vLLM 0.32.0's automatic binding gives each local worker a NUMA node of its own and asserts
    "Not enough allowed NUMA nodes to bind threads of N local CPUWorkers" when there are fewer
    (`utils/ompmultiprocessing.py`, `OMPProcessManager._get_autobind_cpu_ids`).

    Raises:
        ValueError: fewer CPUs than workers.
    """
    cpus = sorted(cpus)
    if world_size < 1 or len(cpus) < world_size:
        raise ValueError(f"{world_size} CPU workers need at least {world_size} CPUs, {len(cpus)} allowed")
    per, extra = divmod(len(cpus), world_size)
    groups, at = [], 0
    for r in range(world_size):
        k = per + (r < extra)
        groups.append(",".join(str(c) for c in cpus[at : at + k]))
        at += k
    return "|".join(groups)
