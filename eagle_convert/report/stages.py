"""The work of each `report` stage, and the eagle-convert command that reproduces it.

Every function here calls the same library function the command it names calls, with the same
arguments, and returns (result, command); `report.run` decides whether it runs at all.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.cache import CAPTURE_ENGINES
from eagle_convert.drift import DriftOptions
from eagle_convert.finetune import FinetuneOptions
from eagle_convert.measure import NATURAL, MeasureOptions
from eagle_convert.optionspec import check, nested, option, to_argv
from eagle_convert.progress import OnTick
from eagle_convert.upgrade import UpgradeOptions

if TYPE_CHECKING:
    from eagle_convert.draft import Checkpoint
    from eagle_convert.engines import EngineStatus
    from eagle_convert.upgrade import Calibrate, NormInit, UpgradePlan

Say = Callable[[str], None]


@dataclass(frozen=True)
class ReportOptions:
    """Everything a report run is asked for besides DRAFT, TARGET and OUT (the CLI's options): the
    measurement settings (`measure`, as smoke takes them), the fine-tune's (`train`, as finetune
    takes them; its template and seed are the measurement's), the drift's depth (`drifting`) and the
    variants to build."""

    measure: MeasureOptions = nested(MeasureOptions, defaults={"buckets": (NATURAL, 1024), "concurrency": None})
    calibrate: bool = option(
        True, flag="--calibrated", help="Also build the calibrated upgrade (upgrade --init calibrated)."
    )
    calibration_prompts: str | None = option(
        None,
        metavar="NAME|FILE|DIR",
        help="Prompts the calibration measures the target's aux hidden states on: a suite (builtin, "
        "spec-bench-sample), a JSONL file or a prepared folder (as --prompts, long context excepted).",
    )
    finetune: bool = option(True, help="Build the fine-tuned variant.")
    finetune_from: str = option(
        "calibrated",
        choices=("calibrated", "identity"),
        help="Which upgrade the fine-tune starts from (identity when there is no calibrated).",
    )
    train: FinetuneOptions = nested(
        FinetuneOptions,
        only=("prompts", "continuation_tokens", "steps_fc_norm", "steps_all"),
        flags={"prompts": "--finetune-prompts"},
        prefix="Fine-tune: ",
    )
    capture: str | None = option(
        None,
        choices=CAPTURE_ENGINES,
        help="Fine-tune from a capture cache (finetune --capture): the fine-tune's data captured with this engine "
        "(vllm: the target in vLLM, --tensor-parallel-size passed through) into DIR/finetune-capture, then "
        "trained from without the target in memory.",
    )
    drift: bool = option(
        True, help="Also measure every variant's attention drift by draft depth (drift, reference engine)."
    )  # the drift:NAME stages (report/drift.py)
    drifting: DriftOptions = nested(DriftOptions, only=("depth",), flags={"depth": "--drift-depth"}, prefix="Drift: ")
    servers: tuple[str, ...] = option(
        flag="--server",
        multiple=True,
        metavar="URL",
        help="Also measure a running server with the draft (smoke --server: AL, per-position acceptance and "
        "per-user tokens/s from its /metrics and streamed requests) on the report's prompts, as the served "
        "stage; repeatable (docs/serve.md).",
    )
    labels: tuple[str, ...] = option(flag="--label", multiple=True, help="A name for each --server, in order.")
    baseline_server: str | None = option(
        None,
        metavar="URL",
        help="The same target served without speculation: the served per-user speedups' denominator.",
    )
    serve_for: tuple[str, ...] = option(
        (),
        flag="--for",
        multiple=True,
        metavar="ENGINE[==VERSION]",
        help="Where the draft will be served (repeatable: vllm, sglang, trtllm, all): the upgrades write one "
        "config every named engine reads as trained (upgrade --for) and every variant is validated for each "
        "named engine release (validate --for). Default: vLLM.",
    )
    extra: dict[str, Any] = field(default_factory=dict)  # recorded, not interpreted

    def __post_init__(self) -> None:
        check(self)

    def finetune_options(self) -> FinetuneOptions:
        """The fine-tune's options: `train` with the measurement's chat template and seed."""
        return replace(self.train, chat_template=self.measure.chat_template, seed=self.measure.seed)

    def drift_options(self) -> DriftOptions:
        """The drift's options: `drifting`'s depth on the measurement's prompts, tokens, buckets and template."""
        m = self.measure
        return replace(
            self.drifting,
            select=MeasureOptions(prompts=m.prompts, categories=m.categories, limit=m.limit),
            max_new_tokens=m.max_new_tokens,
            buckets=m.buckets,
            chat_templates=() if m.chat_template is None else (m.chat_template,),
        )


def q(path: str | Path) -> str:
    return shlex.quote(str(path))


def command(*parts: str | Path | None) -> str:
    """`eagle-convert ...` with every part quoted for a POSIX shell (None parts dropped)."""
    return " ".join(["eagle-convert", *(q(p) for p in parts if p is not None)])


# ------------------------------------------------------------------------------ stages


def inspect_stage(draft: Path) -> tuple[dict[str, Any], str]:
    from eagle_convert.draft import inspect_checkpoint

    rep = inspect_checkpoint(str(draft)).to_dict(tensors=False)
    keep = (
        "producer",
        "layout",
        "variant",
        "variant_reasons",
        "attention",
        "hidden_size",
        "target_hidden_size",
        "num_aux",
        "aux_layer_ids",
        "num_layers",
        "vocab_size",
        "draft_vocab_size",
        "has_embed",
        "dtypes",
        "num_tensors",
        "total_bytes",
        "storage",
        "vllm_architecture",
        "vllm_class",
    )
    return {k: rep[k] for k in keep if k in rep}, command("inspect", draft)


def validate_stage(
    folder: Path, target: Path, engines: Sequence[EngineStatus] = (), serve_for: Sequence[str] = ()
) -> tuple[dict[str, Any], str]:
    """`validate FOLDER --target TARGET [--for ...]`: today's verdict (vLLM as installed) without
    `engines`; with them, one verdict per engine release, summed (ok only when every engine is ok)."""
    if not engines:
        return _validated(folder, target, None), command("validate", folder, "--target", target)
    rows = [_validated(folder, target, st) for st in engines]
    result = {
        "ok": all(r["ok"] for r in rows),
        **{n: sum(r[n] for r in rows) for n in ("errors", "warnings", "infos")},
        "variant": rows[0]["variant"],
        "findings": [{**f, "engine": r["label"]} for r in rows for f in r["findings"]],
        "engines": rows,
    }
    flags = [a for spec in serve_for for a in ("--for", spec)]
    return result, command("validate", folder, "--target", target, *flags)


def _validated(folder: Path, target: Path, st: EngineStatus | None) -> dict[str, Any]:
    """One engine release's verdict as the report records it (None: vLLM as `validate` picks it)."""
    from eagle_convert.engines import ALL, VLLM
    from eagle_convert.validate import validate_checkpoint, validate_for

    if st is None or st.engine == VLLM:  # `--for all` names each release, not what is installed
        version = None if st is None else st.requested or (st.release if st.why == f"--for {ALL}" else None)
        rep = validate_checkpoint(folder, target=target, vllm_version=version).to_dict()
    else:
        rep = validate_for(folder, st, target=target).to_dict()
    findings = [{"code": f["code"], "level": f["level"], "message": f.get("message")} for f in rep["findings"]]
    row = {k: rep[k] for k in ("ok", "errors", "warnings", "infos", "variant")} | {"findings": findings}
    if st is None:
        return row
    return {"engine": st.engine, "release": st.release, "label": st.label, "verified": st.verified, **row}


def upgrade_stage(
    draft: Path,
    out: Path,
    opts: UpgradeOptions,
    *,
    target: Path | None = None,
    say: Say | None = None,
    on_tick: OnTick | None = None,
) -> tuple[dict[str, Any], str]:
    """`upgrade DRAFT --out OUT --force` with `opts` (identity fc_norm), or with `opts.init` calibrated
    `upgrade DRAFT --out OUT --target TARGET --force --init calibrated [--calibration-prompts FILE]`."""
    from eagle_convert.upgrade import upgrade_draft

    result: dict[str, Any] = {}
    measure: Calibrate | None = None
    if opts.init == "calibrated":
        from eagle_convert.finetune import calibrate_fc_norm

        assert target is not None
        tgt, prompts = target, opts.calibration_prompts

        def calibrated(ckpt: Checkpoint, plan: UpgradePlan) -> NormInit:
            cal = calibrate_fc_norm(
                ckpt, tgt, aux_ids=plan.aux.ids, release=plan.release, prompts=prompts, say=say, on_tick=on_tick
            )
            result["calibration"] = cal.to_dict()
            return cal.norm_init()

        measure = calibrated
    run = upgrade_draft(draft, out, opts, target=target, force=True, calibrate=measure)
    res, plan = run.result, run.plan
    assert res is not None  # not a dry run
    result |= {
        "out": str(out),
        "bytes": res.total_bytes,
        "verified": res.verified,
        "config_changes": plan.to_dict()["config_diff"],
        "additions": plan.to_dict()["additions"],
    }
    return result, upgrade_command(draft, out, opts, target)


def upgrade_command(draft: Path, out: Path, opts: UpgradeOptions, target: Path | None = None) -> str:
    """`upgrade DRAFT --out OUT [--target TARGET] --force` and the flags of `opts`."""
    args: list[str | Path] = ["upgrade", draft, "--out", out]
    if target:
        args += ["--target", target]
    return command(*args, "--force", *to_argv(opts))


def finetune_defaults() -> str:
    """finetune's defaults, part of the stage key: a resumed report reruns a fine-tune whose
    defaults changed with the installed eagle-convert (the internal constants too)."""
    from eagle_convert.finetune import BATCH_SIZE, HOLD_OUT_EVERY, LOSS_DECAY

    return repr([asdict(FinetuneOptions()), [HOLD_OUT_EVERY, BATCH_SIZE, LOSS_DECAY]])


def finetune_stage(
    source: Path,
    target: Path,
    out: Path,
    opts: FinetuneOptions,
    say: Say,
    on_tick: OnTick | None = None,
    *,
    capture: str | None = None,
    cache: Path | None = None,
    tensor_parallel_size: int = 1,
) -> tuple[dict[str, Any], str]:
    """`finetune SOURCE --target TARGET --out OUT --force` with the report's finetune options; with
    `capture` (an engine), `--capture ENGINE --cache CACHE`: the data captured first, then trained from."""
    from eagle_convert.cache import CaptureOptions
    from eagle_convert.finetune import plan_finetune, run_finetune

    cap = None if capture is None else CaptureOptions(engine=capture, tensor_parallel_size=tensor_parallel_size)
    plan = plan_finetune(source, target, out, opts, force=True, cache=cache, capture=cap)

    best: list[float] = []

    def progress(event: Any) -> None:  # every stage and phase; a series as ticks (else its first and last)
        if event.eal is not None:
            best[:] = [max([*best, event.eal])]
        tick = event.tick(best[0] if event.kind == "step" and event.eal is not None else None)
        if tick is not None and on_tick is not None:
            on_tick(tick)
        elif event.kind not in ("generate", "step", "capture") or event.step in (1, event.total):
            say(f"  finetune: {event.message}")

    res = run_finetune(plan, progress=progress)
    return {"plan": plan.to_dict(), "result": res.to_dict(), "source": str(source)}, finetune_command(
        source, target, out, opts, cap, plan.cache
    )


def finetune_command(
    source: Path, target: Path, out: Path, opts: FinetuneOptions, cap: Any = None, cache: Path | None = None
) -> str:
    """`finetune SOURCE --target TARGET --out OUT --force` and the flags of `opts`; with a
    `CaptureOptions` and its cache, `--capture ENGINE --cache CACHE` and the capture's flags."""
    args: list[str | Path] = ["finetune", source, "--target", target, "--out", out, "--force", *to_argv(opts)]
    if cap is not None and cache is not None:
        args += ["--capture", cap.engine, "--cache", cache, *to_argv(cap, exclude=("engine",))]
    return command(*args)


def smoke_command(target: Path, drafts: Sequence[Path], asked: MeasureOptions) -> str:
    """The `smoke` command that measures `drafts` as the report did: `asked` is the report's
    measurement options with the engine and the concurrency levels it resolved."""
    return command("smoke", *drafts, "--target", target, *to_argv(asked), "--json")
