"""check-policy.schema.json's `vllm_features` enum is a hand copy of VllmFeatures' flags: kept equal here."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

from eagle_convert.vllm_model.features import VllmFeatures

ROOT = Path(__file__).resolve().parents[1]
# Detected but not a feature a policy may require: a lenient loader (load_weights checks nothing)
# is a weakness the engine load check covers, not something a deployment should insist on.
NOT_REQUIRABLE = {"loader_is_lenient"}


def _flags() -> set[str]:
    hints = typing.get_type_hints(VllmFeatures)
    return {f.name for f in dataclasses.fields(VllmFeatures) if hints[f.name] is bool}


def test_policy_vllm_features_enum_is_the_feature_flags() -> None:
    schema = json.loads((ROOT / "schemas" / "check-policy.schema.json").read_text())
    enum = schema["properties"]["features"]["properties"]["vllm_features"]["items"]["enum"]
    assert len(enum) == len(set(enum))
    assert set(enum) == _flags() - NOT_REQUIRABLE


def test_the_exclusion_names_a_real_flag() -> None:
    """Renaming loader_is_lenient must not leave the exclusion silently excluding nothing."""
    assert NOT_REQUIRABLE <= _flags()
