"""Issue-10 checks: each published producer bug's twin (the same draft with the bug fixed) passes
that check (fixtures/producer_bugs.py). That the bug itself is found, with its level, slug, message
and fix, is test_validate_codes.py::test_code: its CASES include every bad twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_convert.validate.run import validate_checkpoint
from fixtures.producer_bugs import TWINS, BugCase


def _validate(case: BugCase, tmp_path: Path):
    draft = case.draft(tmp_path / "draft")
    kwargs = dict(case.kwargs)
    if case.target is not None:
        kwargs["target"] = case.target(tmp_path / "target", draft)
    return validate_checkpoint(draft, **kwargs)


@pytest.mark.parametrize("code", sorted(TWINS))
def test_fixed_twin_passes(code: str, tmp_path: Path) -> None:
    report = _validate(TWINS[code][1], tmp_path)
    assert code not in report.codes(), [f"{f.code}: {f.message}" for f in report.findings]
    assert not report.errors or code == "E409", [f"{f.code}: {f.message}" for f in report.errors]  # E409's twin: E401
