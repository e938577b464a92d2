"""`run_report`: the whole EAGLE-3 → EAGLE-3.1 story of one draft, side by side, resumable.

Stages, cheapest first: inspect the input; upgrade it with identity `fc_norm` weights and with
calibrated ones (`upgrade --init calibrated`); fine-tune one of the upgrades; validate
every variant against the target; measure every variant with one engine on the same prompts and
context buckets (and, with vLLM and concurrency levels, per-user tokens/s against the target
alone); measure every variant's attention drift by draft depth (`drift`, reference engine); with
`servers`, measure the running deployment (`report/served.py`). Then, always (they are cheap): each variant's model card with the measured table,
`report.json`, `report.md`, the PNGs and `commands.sh`.

Every stage is keyed by the content hashes of its inputs and its options (`report/cache.py`), so
re-running the same command skips what is still valid: an interrupted report resumes, an edited
output is rebuilt, and a changed input reruns exactly the stages that read it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.draft import local_checkpoint
from eagle_convert.errors import OutputError
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.progress import OnTick
from eagle_convert.report.cache import STATE_DIR, folder_digest
from eagle_convert.report.runner import (
    CALIBRATED,
    EAGLE3,
    FINETUNE_CACHE,
    FINETUNED,
    IDENTITY,
    Runner,
    StageEvent,
    Variant,
)
from eagle_convert.report.served import check_served, served_stage
from eagle_convert.report.stages import (
    ReportOptions,
    Say,
    finetune_defaults,
    finetune_stage,
    inspect_stage,
    upgrade_stage,
    validate_stage,
)
from eagle_convert.upgrade import UpgradeOptions

if TYPE_CHECKING:
    from eagle_convert.engines import EngineStatus

TITLES = {
    EAGLE3: "EAGLE-3 (the input)",
    IDENTITY: "EAGLE-3.1, identity fc_norm (upgrade)",
    CALIBRATED: "EAGLE-3.1, calibrated fc_norm (upgrade --init calibrated)",
    FINETUNED: "EAGLE-3.1, fine-tuned (finetune)",
}


@dataclass
class ReportResult:
    """A finished (or resumed) report: its folder, `report.json`'s data, the stage events and files written."""

    out: Path
    data: dict[str, Any]  # report.json
    events: list[StageEvent] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def ran(self) -> list[str]:
        return [e.name for e in self.events if e.status == "ran"]

    @property
    def skipped(self) -> list[str]:
        return [e.name for e in self.events if e.status == "skipped"]


def _check_out(out: Path, inputs: dict[str, Path]) -> Path:
    out = out.expanduser().resolve()
    for what, p in inputs.items():
        if out == p or p in out.parents or out in p.parents:
            raise OutputError(f"{out}: the report folder must not be, contain or lie inside the {what} {p}")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / STATE_DIR).is_dir():
        raise OutputError(
            f"{out}: exists, is not empty and is not a report folder",
            hint="choose a new {out}, or the folder of an earlier report to resume it",
            options=("out",),
            file=out,
        )
    return out


def _file_digest(r: Runner, value: str | None) -> str:
    """What a prompts option names, hashed: a file's or folder's content, else the named suite's
    prompts (a shipped suite can change with eagle-convert)."""
    if value is None:
        return "built-in"
    if Path(value).exists():
        return folder_digest(Path(value), r.memo)
    from eagle_convert.measure import resolve_suite

    rows = [[p.id, p.category, p.text, p.messages] for p in resolve_suite(value).prompts]
    return "suite:" + hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _engines(serve_for: tuple[str, ...]) -> list[EngineStatus]:
    """The engine releases `--for` names, resolved once (empty: today's report, vLLM as installed)."""
    from eagle_convert.engines import parse_for

    return parse_for(serve_for) if serve_for else []


def run_report(
    draft: str | Path,
    target: str | Path,
    out: str | Path,
    options: ReportOptions | None = None,
    *,
    progress: Say | None = None,
    on_stage: Callable[[StageEvent], None] | None = None,
    on_tick: OnTick | None = None,
    api_key: str | None = None,
) -> ReportResult:
    """Build (or resume) the report of `draft` against `target` in the folder `out`.

    Args:
        draft: the EAGLE-3 draft.
        target: the target model folder.
        out: the report folder: new, or an earlier report's (its finished stages are reused).
        options: the report's settings (default `ReportOptions()`).
        progress: receives one line per stage.
        on_stage: a `StageEvent` after each stage (raising from it stops the run there, as an
            interruption would: the finished stages stay recorded).
        on_tick: counts the stages done and, inside them, calibration prompts, fine-tune steps and
            measured prompts (without it the long stages say their first and last step instead).
        api_key: the bearer key for `options.servers` (never recorded).

    Returns:
        The report's paths and every stage's outcome.

    Raises:
        MissingExtraError: an extra a stage needs is not installed (checked before any stage).
        UsageError: an unknown engine (of `engine` or `serve_for`), `concurrency` without the vLLM engine, or a speculative config
            the installed vLLM refuses, whose k is not `options.measure.k` or (reference engine) with keys
            other than method and num_speculative_tokens.
        OutputError: `out` is, contains or lies inside an input, or is not a folder.
    """
    from eagle_convert.measure import PLOT_MODULES
    from eagle_convert.report.drift import drift_variants
    from eagle_convert.report.measure import measure_variants
    from eagle_convert.report.write import write_outputs

    opts = options or ReportOptions()
    # Everything the run will import, before its first stage: the plots come last, after minutes
    # of fine-tuning and measuring, and so does the vLLM measurement.
    require("smoke", "report", (*TORCH_MODULES, *PLOT_MODULES))
    # engine, k, serve config, concurrency and prompts, decided once (the option objects refused
    # out-of-range values when built); a k that contradicts the speculative config, keys the reference
    # engine cannot follow or a bad --prompts fail here
    from eagle_convert.vllm_model import default_release

    release = default_release()  # report's entry: the release the speculative config, the reference engine
    m = opts.measure.resolve("report", release)  # and the variants' labels follow
    engines = _engines(opts.serve_for)  # an unknown --for engine fails here, before the first stage
    serve_key = {"for": [[st.engine, st.release, st.requested, st.outside] for st in engines]} if engines else {}
    suite = m.suite
    check_served(opts, suite)  # and bad --server values
    dpath, tpath = local_checkpoint(draft, "draft", "report"), local_checkpoint(target, "target", "report")
    out = _check_out(Path(out), {"draft": dpath, "target": tpath})
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _m: None)
    variants_n = 2 + int(opts.calibrate) + int(opts.finetune)  # inspect, upgrade, ..., validate and smoke each
    stages_n = (
        2
        + int(opts.calibrate)
        + int(opts.finetune)
        + (2 + int(opts.drift)) * variants_n  # validate, smoke and drift each
        + int(m.engine == "vllm" and bool(m.concurrency))
        + int(bool(opts.servers))
    )
    r = Runner(out, say, on_stage, on_tick, stages_n)
    t0 = time.perf_counter()

    d_draft, d_target = r.digest(dpath), r.digest(tpath)
    r.stage("inspect", {}, {"draft": d_draft}, lambda: inspect_stage(dpath))
    variants = [Variant(EAGLE3, dpath, TITLES[EAGLE3], None)]
    notes: list[str] = list(suite.notices)  # rows the prompt suite refused (SPEED-Bench placeholders)
    for line in suite.notices:
        say(f"report: {line}")

    ident = out / IDENTITY
    r.stage(
        "upgrade:identity",
        serve_key,
        {"draft": d_draft},
        lambda: upgrade_stage(dpath, ident, UpgradeOptions(serve_for=opts.serve_for)),
        outputs=(IDENTITY,),
    )
    variants.append(Variant(IDENTITY, ident, TITLES[IDENTITY], "upgrade:identity"))

    if opts.calibrate:
        cal = out / CALIBRATED
        r.stage(
            "upgrade:calibrated",
            {"prompts": opts.calibration_prompts is not None, **serve_key},
            {"draft": d_draft, "target": d_target, "prompts": _file_digest(r, opts.calibration_prompts)},
            lambda: upgrade_stage(
                dpath,
                cal,
                UpgradeOptions(
                    init="calibrated", calibration_prompts=opts.calibration_prompts, serve_for=opts.serve_for
                ),
                target=tpath,
                say=lambda m: say(f"  {m}"),  # calibrate_fc_norm starts its lines with "calibrate: "
                on_tick=on_tick,
            ),
            outputs=(CALIBRATED,),
        )
        variants.append(Variant(CALIBRATED, cal, TITLES[CALIBRATED], "upgrade:calibrated"))

    if opts.finetune:
        source = next((v for v in variants if v.name.endswith(opts.finetune_from)), variants[1])
        ft = out / FINETUNED
        train = opts.finetune_options()
        ft_opts = {
            "source": source.name,
            "options": {k: v for k, v in asdict(train).items() if k != "prompts"},
            "defaults": finetune_defaults(),
        }
        if opts.capture is not None:  # absent otherwise: the stage keys of reports without it stay
            ft_opts["capture"] = {"engine": opts.capture, "tensor_parallel_size": m.tensor_parallel_size}
        r.stage(
            "finetune",
            ft_opts,
            {"source": r.digest(source.path), "target": d_target, "prompts": _file_digest(r, train.prompts)},
            lambda: finetune_stage(
                source.path,
                tpath,
                ft,
                train,
                say,
                on_tick,
                capture=opts.capture,
                cache=None if opts.capture is None else out / FINETUNE_CACHE,  # no cache: online
                tensor_parallel_size=m.tensor_parallel_size,
            ),
            outputs=(FINETUNED,),
        )
        variants.append(Variant(FINETUNED, ft, TITLES[FINETUNED] + f" from {source.name}", "finetune"))
        if train.prompts is None and opts.measure.prompts in (None, "builtin", "built-in"):
            notes.append(
                "The fine-tune trained on the built-in prompts, which the report also measures on, so "
                "the fine-tuned AL is optimistic: pass --finetune-prompts with other data."
            )

    digests = {v.name: r.digest(v.path) for v in variants}
    for v in variants:
        r.stage(
            f"validate:{v.name}",
            serve_key,
            {"draft": digests[v.name], "target": d_target},
            functools.partial(validate_stage, v.path, tpath, engines, opts.serve_for),
        )

    acceptance = measure_variants(r, variants, digests, tpath, d_target, opts, m, release)
    drift = drift_variants(r, variants, digests, tpath, d_target, opts, suite) if opts.drift else None
    served = served_stage(r, opts, suite, api_key=api_key, say=say, on_tick=on_tick)
    files = write_outputs(
        out,
        dpath,
        tpath,
        variants,
        r.records,
        acceptance,
        opts,
        m,
        notes,
        time.perf_counter() - t0,
        r.events,
        drift=drift,
        served=served,
    )
    r.memo.save()
    data = files.pop("data")
    return ReportResult(out, data, r.events, files)
