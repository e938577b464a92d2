"""`smoke`: acceptance length of EAGLE-3 drafts against a target (`run_smoke`, the command's one
library call), its plots, and the plot style every command's pictures share (`smoke/style.py`)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.smoke.plot import (
        PLOT_MODULES,
        draft_names,
        plot_grouped_al,
        plot_positions,
        plot_smoke,
        require_plot,
    )
    from eagle_convert.smoke.run import run_smoke
    from eagle_convert.smoke.style import (
        bucket_label,
        draft_style,
        finish,
        model_name,
        save_png,
        smoke_caption,
        stop_notes,
        value_label,
    )
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "PLOT_MODULES": "eagle_convert.smoke.plot",
            "draft_names": "eagle_convert.smoke.plot",
            "plot_grouped_al": "eagle_convert.smoke.plot",
            "plot_positions": "eagle_convert.smoke.plot",
            "plot_smoke": "eagle_convert.smoke.plot",
            "require_plot": "eagle_convert.smoke.plot",
            "run_smoke": "eagle_convert.smoke.run",
            "bucket_label": "eagle_convert.smoke.style",
            "draft_style": "eagle_convert.smoke.style",
            "finish": "eagle_convert.smoke.style",
            "model_name": "eagle_convert.smoke.style",
            "save_png": "eagle_convert.smoke.style",
            "smoke_caption": "eagle_convert.smoke.style",
            "stop_notes": "eagle_convert.smoke.style",
            "value_label": "eagle_convert.smoke.style",
        },
    )

__all__ = [
    "bucket_label",
    "draft_names",
    "draft_style",
    "finish",
    "model_name",
    "plot_grouped_al",
    "PLOT_MODULES",
    "plot_positions",
    "plot_smoke",
    "require_plot",
    "run_smoke",
    "save_png",
    "smoke_caption",
    "stop_notes",
    "value_label",
]
