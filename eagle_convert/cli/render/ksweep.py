"""Render each draft's k sweep: AL and expected speedup at every k <= K from one run, the step
costs behind the speedups and the recommended k."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from eagle_convert.measure import DraftResult


def render_k_sweep(console: Console, drafts: list[DraftResult]) -> None:
    """One table per draft with a sweep (`DraftResult.k_sweep`)."""
    for d in drafts:
        s = d.k_sweep
        if s is None:
            continue
        rk = s.recommended_k
        table = Table(title=f"{d.label}: every k from one run at k={s.k_max} ({s.rounds} rounds)", title_justify="left")
        for name in ("k", "AL (± s.e.)", "acceptance rate", "expected speedup"):
            table.add_column(name, justify="right")
        for r in s.rows:
            speed = "—" if r.expected_speedup is None else f"×{r.expected_speedup:.2f}"
            mark = " [bold green]← recommended[/]" if r.k == rk else ""
            al = f"{r.acceptance_length:.2f} ± {r.standard_error:.2f}"
            table.add_row(str(r.k), al, f"{100 * r.acceptance_rate:.1f}%", speed + mark)
        console.print(table)
        c = s.costs
        if c is None:
            console.print("[dim]no step costs measured: AL per k only (vLLM: needs --concurrency 1)[/dim]")
            continue
        console.print(
            f"[dim]step costs ({c.source}): draft {1e3 * c.draft_s:.3f} ms, target {1e3 * c.target_s:.3f} ms, "
            f"verifying one more token +{1e3 * c.verify_extra_s:.3f} ms; speedup = AL(k) x t_target / "
            "(t_target + k x (t_draft + t_verify_extra)). AL at k < K caps each round at k: a run at that k "
            "has other round boundaries (docs/smoke.md).[/dim]"
        )
        if rk is not None and s.row(rk).expected_speedup is not None and (s.row(rk).expected_speedup or 0) < 1:
            console.print("[yellow]no k is expected to beat the target alone on this machine[/yellow]")
        elif s.at_edge:
            console.print(
                f"[yellow]the best k is the largest measured ({s.k_max}): a run at a larger k may do better[/]"
            )
