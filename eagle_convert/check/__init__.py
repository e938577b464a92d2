"""`eagle-convert check`: the pre-deployment gate (policy, stages, CI outputs)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.check.changed import draft_folders
    from eagle_convert.check.checks import STAGES, TITLES, format_value
    from eagle_convert.check.junit import to_junit
    from eagle_convert.check.options import CheckOptions
    from eagle_convert.check.policy import Policy, load_policy
    from eagle_convert.check.run import CheckReport, run_check
    from eagle_convert.check.serve import ServeTarget
    from eagle_convert.check.summary import write_summary
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "draft_folders": "eagle_convert.check.changed",
            "STAGES": "eagle_convert.check.checks",
            "TITLES": "eagle_convert.check.checks",
            "format_value": "eagle_convert.check.checks",
            "to_junit": "eagle_convert.check.junit",
            "CheckOptions": "eagle_convert.check.options",
            "Policy": "eagle_convert.check.policy",
            "load_policy": "eagle_convert.check.policy",
            "CheckReport": "eagle_convert.check.run",
            "run_check": "eagle_convert.check.run",
            "ServeTarget": "eagle_convert.check.serve",
            "write_summary": "eagle_convert.check.summary",
        },
    )

__all__ = [
    "CheckOptions",
    "CheckReport",
    "draft_folders",
    "format_value",
    "load_policy",
    "Policy",
    "run_check",
    "ServeTarget",
    "STAGES",
    "TITLES",
    "to_junit",
    "write_summary",
]
