"""validate against a target: when vocabulary and width disagree together, the errors say the draft
was built for a different target (issue 33: `make demo`'s first draft against its trained target
gave E106/E501/E502 with no word of why); one mismatch alone stays a field to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

OTHER = "this draft was built for a different target"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.drafts import FIXTURE_MATRIX, VLLM_TINY, build_draft
    from fixtures.target import build_target

    base = tmp_path_factory.mktemp("other-target")
    return {
        "target": build_target(base / "target"),  # H 256, V 4096, 8 layers
        "wide_vocab_target": build_target(base / "target-v8192", vocab_size=8192),
        "tiny": build_draft(base / "tiny", VLLM_TINY),  # built for `target`
        "specforge": build_draft(base / "specforge", FIXTURE_MATRIX["specforge-eagle3"]),  # H 64, V 256
    }


def _errors(draft: Path, target: Path) -> dict[str, str]:
    from eagle_convert.validate import validate_checkpoint

    rep = validate_checkpoint(draft, target=target, vllm_version="0.32.0")
    return {f.code: f.message for f in rep.findings if f.level == "error"}


def test_draft_of_another_target_is_named_so(pair: dict[str, Path]) -> None:
    errors = _errors(pair["specforge"], pair["target"])
    assert {"E501", "E502"} <= set(errors)
    for code in ("E501", "E502"):  # codes unchanged; each message ends with the diagnosis
        assert errors[code].endswith(f"; with its vocabulary and hidden width all differing, {OTHER}"), errors[code]
    assert errors["E501"].startswith("vocab_size is 256 but the target (")


def test_one_mismatch_is_not_another_target(pair: dict[str, Path]) -> None:
    assert _errors(pair["tiny"], pair["target"]) == {}
    errors = _errors(pair["tiny"], pair["wide_vocab_target"])
    assert set(errors) == {"E501"} and OTHER not in errors["E501"]
