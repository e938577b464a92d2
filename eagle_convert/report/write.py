"""What `report` writes after its stages: model cards, report.json, report.md, PNGs, commands.sh.

All of it is rebuilt on every run from the stage records (cheap), so it always shows every
variant, whichever stages this run skipped. Every file is replaced by rename.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eagle_convert._version import __version__
from eagle_convert.io import write_text_atomic
from eagle_convert.measure import Measure, MeasureOptions, SmokeReport
from eagle_convert.report.cache import StageRecord, write_json_atomic
from eagle_convert.report.drift import drift_command
from eagle_convert.report.markdown import render_markdown
from eagle_convert.report.runner import CALIBRATED, EAGLE3, FINETUNED, IDENTITY, StageEvent, Variant
from eagle_convert.report.served import SERVED_STAGE
from eagle_convert.report.stages import ReportOptions, smoke_command

REPORT_VERSION = 1
# "The fine-tuned draft is as good as the input": AL within this of the input's (issue 11).
AL_TOLERANCE = 0.05


def checks(acc: SmokeReport) -> list[dict[str, Any]]:
    """The two claims an EAGLE-3 → 3.1 report is read for, with the measured numbers."""
    al = {d.label: d.total.acceptance_length for d in acc.drafts}
    out = []
    ft, e3 = al.get(FINETUNED), al.get(EAGLE3)
    if ft is not None and e3 is not None:
        out.append(
            {
                "claim": f"fine-tuned EAGLE-3.1 keeps the input's AL (>= AL(EAGLE-3) - {AL_TOLERANCE})",
                "holds": ft >= e3 - AL_TOLERANCE,
                "value": round(ft - e3, 4),
                "detail": f"AL {ft:.3f} vs {e3:.3f} ({ft - e3:+.3f})",
            }
        )
    cal, ident = al.get(CALIBRATED), al.get(IDENTITY)
    if cal is not None and ident is not None:
        out.append(
            {
                "claim": "calibrated fc_norm drafts at least as well as identity before fine-tuning",
                "holds": cal >= ident,
                "value": round(cal - ident, 4),
                "detail": f"AL {cal:.3f} vs {ident:.3f} ({cal - ident:+.3f})",
            }
        )
    return out


def _cards(variants: Sequence[Variant], target: Path, acc_dict: dict[str, Any]) -> dict[str, str]:
    """Each variant the report built gets its model card with the measured table (the input is
    the user's folder and is never written to)."""
    from eagle_convert.draft import acceptance_from_smoke, write_model_card
    from eagle_convert.validate import serving_summary

    cards = {}
    for v in variants:
        if v.stage is None:
            continue
        table = acceptance_from_smoke(acc_dict, this=v.path)
        cards[v.name] = str(
            write_model_card(v.path, target=str(target), acceptance=table, serving=serving_summary(v.path))
        )
    return cards


def _validate_summary(val: dict[str, Any]) -> dict[str, Any]:
    """A variant row's verdict: the counts, and with `--for` each engine release's (without findings)."""
    keys = ("ok", "errors", "warnings", "infos")
    out = {k: val[k] for k in keys}
    if "engines" in val:
        out["engines"] = [{k: e[k] for k in ("engine", "release", "label", *keys)} for e in val["engines"]]
    return out


def _options(opts: ReportOptions, m: Measure) -> dict[str, Any]:
    """The options as report.json has always recorded them, flat (`--prompts` as prompts_file, k and
    concurrency as resolved, the fine-tune's and drift's under report's names), with
    speculative_config only when given."""
    from eagle_convert.served import display_url

    train = opts.train
    shown = {
        **vars(opts.measure),
        "k": m.k,
        "concurrency": m.concurrency,
        **{k: v for k, v in vars(opts).items() if k not in ("measure", "train", "drifting", "extra")},
        "finetune_prompts": train.prompts,
        "continuation_tokens": train.continuation_tokens,
        "steps_fc_norm": train.steps_fc_norm,
        "steps_all": train.steps_all,
        "drift_depth": opts.drifting.depth,
    }
    if shown["speculative_config"] is None:
        del shown["speculative_config"]
    shown["servers"] = [display_url(u) for u in opts.servers]  # never a user:password@ of a URL
    if opts.baseline_server:
        shown["baseline_server"] = display_url(opts.baseline_server)
    return {("prompts_file" if k == "prompts" else k): v for k, v in shown.items()}


def _commands(
    records: dict[str, StageRecord],
    variants: Sequence[Variant],
    target: Path,
    opts: ReportOptions,
    asked: MeasureOptions,
    drift: bool = False,
) -> list[dict[str, str | None]]:
    """commands.sh's lines: each stage's, then smoke's and drift's side by side (`asked`: the
    measurement options with the engine and concurrency levels the report resolved)."""
    order = ["inspect", "upgrade:identity", "upgrade:calibrated", "finetune", *(f"validate:{v.name}" for v in variants)]
    out = [{"stage": n, "command": records[n].command} for n in order if n in records and records[n].command]
    out.append(
        {
            "stage": "smoke (every variant, side by side)",
            "command": smoke_command(target, [v.path for v in variants], asked),
        }
    )
    if drift:
        paths = [v.path for v in variants]
        out.append({"stage": "drift (every variant, side by side)", "command": drift_command(target, paths, opts)})
    if SERVED_STAGE in records:
        out.append({"stage": "smoke --server (the running servers)", "command": records[SERVED_STAGE].command})
    return out


def write_outputs(
    out: Path,
    draft: Path,
    target: Path,
    variants: Sequence[Variant],
    records: dict[str, StageRecord],
    acc: SmokeReport,
    opts: ReportOptions,
    m: Measure,
    notes: list[str],
    seconds: float,
    events: Sequence[StageEvent],
    *,
    drift: dict[str, Any] | None = None,
    served: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write everything; returns the file paths and, under "data", report.json's content.

    `drift` is the drift stages' `drift --json` dict (None: `--no-drift`, and no drift.png);
    `served` the served stage's `smoke --server --json` dict (None: no `--server`).
    """
    from eagle_convert.report.plots import plot_report

    asked = replace(opts.measure, engine=m.engine, concurrency=m.concurrency)
    acc_dict = acc.to_dict()
    cards = _cards(variants, target, acc_dict)
    plots = plot_report(acc, out)
    if drift is not None:
        from eagle_convert.drift import plot_drift, read_drift_report

        plots["drift.png"] = plot_drift(read_drift_report(drift, "report drift stages"), out / "drift.png")
    else:
        (out / "drift.png").unlink(missing_ok=True)  # an earlier run's, no longer what report.md shows
    by_label = {d.label: d for d in acc.drafts}
    variant_rows = []
    for v in variants:
        val = records[f"validate:{v.name}"].result
        variant_rows.append(
            {
                "name": v.name,
                "title": v.title,
                "path": str(v.path),
                "stage": v.stage,
                "variant": by_label[v.name].variant,
                "card": cards.get(v.name),
                "acceptance_length": round(by_label[v.name].total.acceptance_length, 4),
                "validate": _validate_summary(val),
            }
        )
    if m.engine != "vllm":
        tnote = (
            "Not measured: per-user tokens/s by concurrency needs `--engine vllm` (the reference engine "
            "decodes one request at a time in PyTorch and says nothing about serving throughput)."
        )
    elif not m.concurrency:
        tnote = "Not measured: `--concurrency` was turned off."
    else:
        tnote = ""
    cal = records.get("upgrade:calibrated")
    data: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "eagle_convert": __version__,
        "draft": str(draft),
        "draft_name": draft.name,
        "target": str(target),
        "out": str(out),
        "engine": m.engine,
        "seconds": round(seconds, 2),
        "options": _options(opts, m),
        "variants": variant_rows,
        "stages": [
            {"name": e.name, "status": e.status, "seconds": round(e.seconds, 2), "command": e.command} for e in events
        ],
        "ran": [e.name for e in events if e.status == "ran"],
        "skipped": [e.name for e in events if e.status == "skipped"],
        "inspect": records["inspect"].result,
        "validate": {v.name: records[f"validate:{v.name}"].result for v in variants},
        "calibration": (cal.result.get("calibration") if cal else None),
        "finetune": records["finetune"].result if "finetune" in records else None,
        "acceptance": acc_dict,
        "drift": drift,
        "served": served,
        "throughput_note": tnote,
        "checks": checks(acc),
        "notes": list(notes),
        "plots": {name: p.name for name, p in plots.items()},
        "commands": _commands(records, variants, target, opts, asked, drift is not None),
    }
    files = {"report.json": out / "report.json", "report.md": out / "report.md", "commands.sh": out / "commands.sh"}
    write_json_atomic(files["report.json"], data)
    write_text_atomic(files["report.md"], render_markdown(data))
    script = [
        "#!/usr/bin/env bash",
        "# The eagle-convert commands that reproduce each stage of this report.",
        "set -euo pipefail",
        *(f"# {c['stage']}\n{c['command']}" for c in data["commands"]),
    ]
    write_text_atomic(files["commands.sh"], "\n".join(script) + "\n")
    files["commands.sh"].chmod(0o755)
    return {**files, **{name: p for name, p in plots.items()}, "data": json.loads(json.dumps(data, default=str))}
