"""The draft checkpoint as a model: open it, detect its producer layout, check its config, describe it."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
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
    from eagle_convert.draft.local import local_checkpoint, local_folder
    from eagle_convert.draft.schemas import load_schema
    from eagle_convert.draft.target import Target, load_target, text_config
else:
    __getattr__, __dir__ = attach(__name__, __file__)
