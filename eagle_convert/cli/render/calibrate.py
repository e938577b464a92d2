"""Render `upgrade --init calibrated`'s measurement: the fc_norm values and how close they draft."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.cli.output import figure
from eagle_convert.finetune import Calibration


def render_calibration(console: Console, cal: Calibration, *, norm_output: bool) -> None:
    table = Table(
        title=f"fc_norm calibrated on {cal.fit_prompts} prompts ({escape(cal.prompts)}, "
        f"{cal.tokens} tokens, {cal.device}, {cal.seconds:.1f}s)",
        title_justify="left",
    )
    for col in ("aux", "layer id", "weight (median RMS)", "mean", "p10 … p90"):
        table.add_column(col, justify="left" if col == "aux" else "right")
    for i, (v, s, lid) in enumerate(zip(cal.values, cal.rms, cal.aux_ids)):
        table.add_row(f"fc_norm.{i}", str(lid), f"{v:.6g}", f"{s['mean']:.6g}", f"{s['p10']:.4g} … {s['p90']:.4g}")
    console.print(table)
    if cal.agreement is not None:
        console.print(
            f"first draft step, top-1 agreement with the EAGLE-3 draft on {cal.held_out_prompts} held-out "
            f"prompts ({cal.positions} positions): calibrated [bold]{figure(cal.agreement, '{:.1%}')}[/bold], "
            f"ones {figure(cal.agreement_identity, '{:.1%}')}"
        )
    else:
        console.print("[dim]one calibration prompt: no held-out prompt to measure the agreement on[/dim]")
    if norm_output:
        console.print(
            "[dim]norm_output=true still changes draft steps 2..k (they read the post-norm state the "
            "EAGLE-3 draft was not trained on), which no fc_norm value undoes: fine-tune "
            "(eagle-convert finetune), or upgrade with --no-norm-output to keep the EAGLE-3 draft's "
            "acceptance before fine-tuning.[/dim]"
        )
