"""`smoke`: acceptance length of EAGLE-3 drafts against a target (`run_smoke`, the command's one
library call), its plots, and the plot style every command's pictures share (`smoke/style.py`)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
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
else:
    __getattr__, __dir__ = attach(__name__, __file__)
