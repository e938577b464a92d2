"""`smoke`: acceptance length of EAGLE-3 drafts against a target (`run_smoke`, the command's one
library call), and its plots."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.smoke.plot import (
        PLOT_MODULES,
        bucket_label,
        plot_grouped_al,
        plot_positions,
        plot_smoke,
        require_plot,
        save_png,
    )
    from eagle_convert.smoke.run import resolve_serve_config, run_smoke
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "PLOT_MODULES": "eagle_convert.smoke.plot",
            "bucket_label": "eagle_convert.smoke.plot",
            "plot_grouped_al": "eagle_convert.smoke.plot",
            "plot_positions": "eagle_convert.smoke.plot",
            "plot_smoke": "eagle_convert.smoke.plot",
            "require_plot": "eagle_convert.smoke.plot",
            "save_png": "eagle_convert.smoke.plot",
            "resolve_serve_config": "eagle_convert.smoke.run",
            "run_smoke": "eagle_convert.smoke.run",
        },
    )

__all__ = [
    "bucket_label",
    "plot_grouped_al",
    "PLOT_MODULES",
    "plot_positions",
    "plot_smoke",
    "require_plot",
    "resolve_serve_config",
    "run_smoke",
    "save_png",
]
