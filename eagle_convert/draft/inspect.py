"""`inspect`: a stable, JSON-serialisable report of what a checkpoint is.

The JSON shape is documented in `schemas/inspect-report.schema.json`; bump `SCHEMA_VERSION` on
any incompatible change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_convert.draft.checkpoint import Checkpoint, CheckpointRef, open_checkpoint
from eagle_convert.draft.fcnorm import FcNormState, fc_norm_state
from eagle_convert.draft.info import DraftInfo, describe
from eagle_convert.jsonable import dump
from eagle_convert.vllm_model import VllmVersionStatus, installed_status

SCHEMA_VERSION = 2  # 2: `vllm` names the release the verdict is for (was: the tested range)


@dataclass
class InspectReport:
    """The `inspect` report: the source, its description and every tensor (`to_dict()` is `inspect --json`)."""

    source: str
    is_hub: bool
    has_config: bool
    info: DraftInfo
    checkpoint: Checkpoint
    # The vLLM release the rules (vllm_architecture, aux ids, flags) are read for, and why that one.
    vllm: VllmVersionStatus
    # The fc_norm values (identity = exactly 1.0, untrained) and what the records claim; None without
    # fc_norm tensors or when values are not read (hub refs).
    fc_norm: FcNormState | None = None

    def tensor_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "name": t.name,
                "canonical": self.info.canonical[t.name],
                "dtype": t.dtype,
                "shape": list(t.shape),
                "bytes": t.nbytes,
                "file": t.file,
            }
            for t in self.checkpoint.tensors.values()
        ]

    def to_dict(self, *, tensors: bool = True) -> dict[str, Any]:
        head = dump(self, "source is_hub has_config")
        data = {"schema_version": SCHEMA_VERSION, **head, **self.info.to_dict(), **dump(self, "vllm fc_norm")}
        if tensors:
            data["tensors"] = self.tensor_rows()
        return data


def inspect_checkpoint(
    ref: str | CheckpointRef, *, read_vocab: bool | None = None, vllm_version: str | None = None
) -> InspectReport:
    """Open and describe a checkpoint; hub refs read config and headers only (no tensor data).

    Args:
        ref: a folder, a `.safetensors`/`.bin` file or a hub repo.
        read_vocab: read the d2t/t2d and fc_norm values (default: for local checkpoints only).
        vllm_version: the release whose reading the vLLM fields follow (default: the installed
            vLLM, else the newest known).

    Returns:
        What `inspect --json` prints: the description and every tensor.

    Raises:
        EagleConvertError: an unreadable checkpoint; UsageError for an unknown `vllm_version`.
    """
    status = installed_status(vllm_version)
    if not isinstance(ref, CheckpointRef):
        ref = CheckpointRef.parse(ref)
    ckpt = open_checkpoint(ref)
    read_values = not ref.is_hub if read_vocab is None else read_vocab
    info = describe(ckpt, status.rules, read_vocab=read_values)
    fc_norm = fc_norm_state(ckpt) if read_values else None
    return InspectReport(ckpt.description, ref.is_hub, ckpt.has_config, info, ckpt, vllm=status, fc_norm=fc_norm)
