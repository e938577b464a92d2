"""EAGLE-3 to EAGLE-3.1: a pure plan, the config writer, and the streamed apply."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.upgrade.apply import Progress, UpgradeResult, apply_upgrade
    from eagle_convert.upgrade.linkplan import LinkPlan
    from eagle_convert.upgrade.norminit import FLOAT_DTYPES, NormInit
    from eagle_convert.upgrade.options import UpgradeOptions
    from eagle_convert.upgrade.plan import LAYOUTS, UpgradePlan, plan_upgrade
    from eagle_convert.upgrade.run import Calibrate, UpgradeRun, plan_upgrade_draft, upgrade_draft
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "Progress": "eagle_convert.upgrade.apply",
            "UpgradeResult": "eagle_convert.upgrade.apply",
            "apply_upgrade": "eagle_convert.upgrade.apply",
            "LinkPlan": "eagle_convert.upgrade.linkplan",
            "FLOAT_DTYPES": "eagle_convert.upgrade.norminit",
            "NormInit": "eagle_convert.upgrade.norminit",
            "UpgradeOptions": "eagle_convert.upgrade.options",
            "LAYOUTS": "eagle_convert.upgrade.plan",
            "UpgradePlan": "eagle_convert.upgrade.plan",
            "plan_upgrade": "eagle_convert.upgrade.plan",
            "Calibrate": "eagle_convert.upgrade.run",
            "UpgradeRun": "eagle_convert.upgrade.run",
            "plan_upgrade_draft": "eagle_convert.upgrade.run",
            "upgrade_draft": "eagle_convert.upgrade.run",
        },
    )

__all__ = [
    "apply_upgrade",
    "Calibrate",
    "FLOAT_DTYPES",
    "LAYOUTS",
    "LinkPlan",
    "NormInit",
    "plan_upgrade",
    "plan_upgrade_draft",
    "Progress",
    "upgrade_draft",
    "UpgradePlan",
    "UpgradeOptions",
    "UpgradeResult",
    "UpgradeRun",
]
