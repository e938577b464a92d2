"""The draft checkpoint as a model: open it, detect its producer layout, check its config, describe it."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.draft.card import (
        CARD_FILE,
        PROVENANCE_KEY,
        folder_card,
        hub_repo_id,
        model_card,
        recorded_target,
        retarget_card,
        weights_dtype,
        write_model_card,
    )
    from eagle_convert.draft.card_acceptance import acceptance_from_smoke
    from eagle_convert.draft.card_sweep import k_sweep_lines
    from eagle_convert.draft.checkpoint import (
        CONFIG_FNAME,
        Checkpoint,
        CheckpointRef,
        load_from_source,
        open_checkpoint,
    )
    from eagle_convert.draft.fcnorm import FcNormState, fc_norm_state
    from eagle_convert.draft.info import Classified, DraftInfo, classify, describe
    from eagle_convert.draft.inspect import InspectReport, inspect_checkpoint
    from eagle_convert.draft.kind import ensure_draft
    from eagle_convert.draft.layout import canonical_map, canonical_name
    from eagle_convert.draft.local import local_checkpoint
    from eagle_convert.draft.schemas import load_schema
    from eagle_convert.draft.target import Target, load_target, text_config
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "CARD_FILE": "eagle_convert.draft.card",
            "PROVENANCE_KEY": "eagle_convert.draft.card",
            "acceptance_from_smoke": "eagle_convert.draft.card_acceptance",
            "k_sweep_lines": "eagle_convert.draft.card_sweep",
            "hub_repo_id": "eagle_convert.draft.card",
            "model_card": "eagle_convert.draft.card",
            "recorded_target": "eagle_convert.draft.card",
            "folder_card": "eagle_convert.draft.card",
            "retarget_card": "eagle_convert.draft.card",
            "weights_dtype": "eagle_convert.draft.card",
            "write_model_card": "eagle_convert.draft.card",
            "CONFIG_FNAME": "eagle_convert.draft.checkpoint",
            "Checkpoint": "eagle_convert.draft.checkpoint",
            "CheckpointRef": "eagle_convert.draft.checkpoint",
            "load_from_source": "eagle_convert.draft.checkpoint",
            "open_checkpoint": "eagle_convert.draft.checkpoint",
            "Classified": "eagle_convert.draft.info",
            "DraftInfo": "eagle_convert.draft.info",
            "classify": "eagle_convert.draft.info",
            "describe": "eagle_convert.draft.info",
            "ensure_draft": "eagle_convert.draft.kind",
            "local_checkpoint": "eagle_convert.draft.local",
            "canonical_map": "eagle_convert.draft.layout",
            "canonical_name": "eagle_convert.draft.layout",
            "FcNormState": "eagle_convert.draft.fcnorm",
            "fc_norm_state": "eagle_convert.draft.fcnorm",
            "InspectReport": "eagle_convert.draft.inspect",
            "inspect_checkpoint": "eagle_convert.draft.inspect",
            "load_schema": "eagle_convert.draft.schemas",
            "text_config": "eagle_convert.draft.target",
            "Target": "eagle_convert.draft.target",
            "load_target": "eagle_convert.draft.target",
        },
    )

__all__ = [
    "acceptance_from_smoke",
    "k_sweep_lines",
    "canonical_map",
    "canonical_name",
    "CARD_FILE",
    "Checkpoint",
    "CheckpointRef",
    "Classified",
    "classify",
    "CONFIG_FNAME",
    "describe",
    "DraftInfo",
    "ensure_draft",
    "local_checkpoint",
    "FcNormState",
    "fc_norm_state",
    "folder_card",
    "hub_repo_id",
    "inspect_checkpoint",
    "InspectReport",
    "load_from_source",
    "load_schema",
    "load_target",
    "text_config",
    "model_card",
    "open_checkpoint",
    "PROVENANCE_KEY",
    "recorded_target",
    "retarget_card",
    "Target",
    "weights_dtype",
    "write_model_card",
]
