"""EAGLE-3 to EAGLE-3.1: a pure plan, the config writer, and the streamed apply."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.upgrade.apply import Progress, UpgradeResult, apply_upgrade
    from eagle_convert.upgrade.linkplan import LinkPlan
    from eagle_convert.upgrade.norminit import FLOAT_DTYPES, NormInit
    from eagle_convert.upgrade.options import UpgradeOptions
    from eagle_convert.upgrade.plan import LAYOUTS, UpgradePlan, plan_upgrade
    from eagle_convert.upgrade.run import Calibrate, UpgradeRun, plan_upgrade_draft, upgrade_draft
else:
    __getattr__, __dir__ = attach(__name__, __file__)
