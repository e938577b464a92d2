"""`eagle-convert check`: the pre-deployment gate (policy, stages, CI outputs)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.check.changed import draft_folders
    from eagle_convert.check.checks import STAGES, TITLES, format_value
    from eagle_convert.check.junit import to_junit
    from eagle_convert.check.options import CheckOptions
    from eagle_convert.check.policy import Policy, load_policy
    from eagle_convert.check.run import CheckReport, run_check
    from eagle_convert.check.summary import write_summary
else:
    __getattr__, __dir__ = attach(__name__, __file__)
