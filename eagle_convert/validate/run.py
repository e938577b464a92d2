"""`validate`: everything that can go wrong when vLLM serves a draft, found before deployment.

vLLM does not protect users: a missing tensor loads as uninitialised memory, missing aux ids give
~1% acceptance, a d2t with a full vocabulary or colliding aux ids crash only at the first decode.
Static validation reads config.json, safetensors headers and the small d2t/t2d tensors (no torch,
time independent of the weights' size); `deep` reads every value; `load="vllm"` loads the
draft with vLLM's real loader and a sentinel fill. Findings are data (`findings.py`).
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft import Checkpoint, CheckpointRef, Classified, DraftInfo, classify, describe, open_checkpoint
from eagle_convert.errors import ConfigError, NotADraftError, UnknownLayoutError, UsageError
from eagle_convert.extras import require
from eagle_convert.jsonable import dump, key
from eagle_convert.validate.deep import DeepSummary, Progress
from eagle_convert.validate.findings import Report, finding
from eagle_convert.validate.options import LOADS
from eagle_convert.vllm_model import (
    FingerprintCheck,
    ServeConfig,
    VllmVersionStatus,
    installed_status,
    parse_serve_config,
)

SCHEMA_VERSION = 1


@dataclass
class ValidationReport(Report):
    """Findings plus what was checked: the draft's identity, target, deep-scan and engine results."""

    is_hub: bool = False
    info: DraftInfo | None = None
    vllm_class: str | None = None  # implementation class vLLM builds (None: unregistered)
    target: str | None = None
    deep: DeepSummary | None = None
    engine: dict[str, Any] | None = None  # EngineReport.to_dict() (features included)
    vllm: VllmVersionStatus | None = None  # the release the verdict is for, and why (E706 when unknown)
    serve: ServeConfig | None = None  # --speculative-config / --max-model-len, as the release reads them
    fingerprints: FingerprintCheck | None = None  # the installed vLLM's deciding code vs its release's (E705)
    notes: dict[str, str] = field(default_factory=dict)  # what a check read or could not do (target weights)
    # engines.EngineStatus: the engine release other than vLLM the verdict is for (--for)
    serving: Any = field(default=None, metadata=key("for"))
    serve_commands: list[Any] = field(default_factory=list)  # engines.ServeCommand: how to serve it as trained
    serve_config: Any = None  # engines.GivenServe: the deployment's SGLang / TensorRT-LLM serve config (--serve-config)
    seconds: float = field(default=0.0, metadata=key(ndigits=3))
    timings: dict[str, float] = field(default_factory=dict, metadata=key(ndigits=3))

    def to_dict(self) -> dict[str, Any]:
        counts, info = self.counts(), self.info
        return dump(
            self,
            _KEYS,
            schema_version=SCHEMA_VERSION,
            ok=not self.errors,
            **{f"{level}s": counts[level] for level in ("error", "warning", "info")},
            **{k: getattr(info, k) if info else None for k in ("layout", "variant", "vllm_architecture")},
            checks=list(self.families_run),
            findings=self.findings_dicts(),
        )


_KEYS = (
    "schema_version source ok errors warnings infos layout variant vllm_architecture vllm_class target checks findings "
    "deep engine vllm serve fingerprints for serve_commands serve_config seconds timings notes"
)


def _check_args(load: str | None, target: Any) -> None:
    if load is not None and load not in LOADS:
        raise UsageError(f"{{load={load!r}}}: expected one of {', '.join(LOADS)}", options=("load",))
    if load is not None and target is None:
        raise UsageError(
            f"{{load={load}}} needs {{target}}: vLLM loads a draft only together with its target",
            options=("load", "target"),
        )
    if load == "vllm":
        require("vllm", "validate {load=vllm}", options=("load",))  # before the static checks, not after them


def validate_checkpoint(
    ref: str | Path | CheckpointRef,
    *,
    target: str | Path | None = None,
    deep: bool = False,
    load: str | None = None,
    serving_context: int | None = None,
    progress: Progress | None = None,
    load_timeout_s: float = 600,
    chunk_bytes: int | None = None,
    vllm_version: str | VllmVersionStatus | None = None,
    speculative_config: str | dict[str, Any] | ServeConfig | None = None,
    identity_required: bool = False,
) -> ValidationReport:
    """Validate one draft for one vLLM release; see the module docstring.

    Args:
        ref: the draft (folder, file or hub repo).
        target: the target (folder, `config.json` or hub repo) to cross-check against.
        deep: also read every value (NaN/Inf, zeros, implausible norms) in bounded chunks.
        load: "vllm" also loads the draft with the installed vLLM's loader, strictly (needs a
            local `target`).
        serving_context: `--max-model-len`, the context the target is served with.
        vllm_version: the release the draft will be served on (default: the installed vLLM, else
            the newest known release); patch releases read as their minor's newest known one; or the
            status a caller resolved already (`check`). Every known release at once is
            `validate.matrix.compatibility_matrix`.
        speculative_config: the deployment's `--speculative-config` (JSON text, a JSON file, a dict,
            or one already parsed): checked against the draft by the `serve` family, and its
            max_model_len is the context the draft drafts at.
        identity_required: the output must equal the target's (check's [output] identity), so a
            lossy rejection_sample_method is an error, not a warning.
        progress: receives the bytes the deep scan reads.
        load_timeout_s: time limit of the vLLM check.
        chunk_bytes: how much the deep scan checks at a time (default 512 KiB, cache-sized).

    Returns:
        The findings (errors first), the draft's description, the release and what each level read.

    Raises:
        EagleConvertError: unreadable inputs; UsageError for an unknown `vllm_version` or a
            speculative config the release refuses.
    """
    _check_args(load, target)
    status = vllm_version if isinstance(vllm_version, VllmVersionStatus) else installed_status(vllm_version)
    serve = (
        speculative_config
        if isinstance(speculative_config, ServeConfig)
        else parse_serve_config(speculative_config, status.rules, max_model_len=serving_context)
    )
    t0 = time.perf_counter()
    opened = open_draft(ref, target=target)
    report = static_report(
        opened, status, serving_context=serving_context, deep=deep, serve=serve, identity_required=identity_required
    )
    _check_source(report, status, named=status.named)
    if opened.last_context is None:  # no config, or not a draft: nothing else applies
        return _done(report, t0)
    ctx = opened.last_context
    report.serve_commands = vllm_serve_commands(opened, ctx.view, status.release, serve)
    ckpt = opened.ckpt

    if deep:
        from eagle_convert.validate import deep as deep_mod
        from eagle_convert.validate.rules.tensorspec import expected_tensors

        t2 = time.perf_counter()
        expected = expected_tensors(ctx)
        kinds = {disk: expected[v].kind for disk, v in ctx.vnames.items() if v in expected}
        summary = deep_mod.scan(ckpt, chunk_bytes=chunk_bytes or deep_mod.CHUNK_BYTES, progress=progress)
        report.deep = summary
        report.add(deep_mod.findings_from(summary, kinds))
        report.families_run.append("deep")
        report.timings["deep"] = time.perf_counter() - t2

    if load == "vllm":
        report.add(_engine(report, ctx, ckpt, target, load_timeout_s))
        report.families_run.append("engine")
        if status.installed is not None and status.why.startswith("--vllm-version"):
            report.notes["engine"] = (
                f"the engine check ran the installed vLLM {status.installed}; the static verdict is for {status.release}"
            )
    return _done(report, t0)


@dataclass
class OpenedDraft:
    """A draft opened once, with what every release's verdict shares: the checkpoint, its
    classification, the target, and the memo of release-independent results (`Context.memo`)."""

    ckpt: Checkpoint
    head: ValidationReport  # source, is_hub, the open timing, and the findings that end validation early
    classified: Classified | None = None  # None: head's findings are the whole verdict
    target: Any = None  # rules.target.TargetWeights: the target (draft.target.Target) and its weights
    shared: dict = field(default_factory=dict)
    last_context: Any = None  # the Context of the latest `static_report` (deep and engine read it)
    ref: str = ""  # the draft as the caller named it (what a serve command loads)


def open_draft(
    ref: str | Path | CheckpointRef | Checkpoint,
    *,
    target: str | Path | None = None,
    shared: dict[Hashable, Any] | None = None,
) -> OpenedDraft:
    """Open and classify a draft and load its target (config.json only), once for any number of releases.

    `ref` may be an opened `Checkpoint` (upgrade's planned output, `upgrade.preflight.planned_checkpoint`).
    `shared`: the `Context.memo` of other passes over the same checkpoint and target (upgrade's output check).

    Raises:
        EagleConvertError: unreadable inputs (a missing folder, an invalid target).
    """
    t0 = time.perf_counter()
    if isinstance(ref, Checkpoint):
        ckpt, is_hub, text = ref, False, ckpt_text(ref)
    else:
        text = str(ref)
        if not isinstance(ref, CheckpointRef):
            ref = CheckpointRef.parse(str(ref))
        ckpt, is_hub = open_checkpoint(ref), ref.is_hub
    head = ValidationReport(ckpt.description, is_hub=is_hub)
    head.timings["open"] = time.perf_counter() - t0
    head.families_run.append("files")
    opened = OpenedDraft(ckpt, head, ref=text, shared={} if shared is None else shared)
    if not ckpt.has_config:
        head.add(finding("E002", f"{ckpt.description}: no config.json next to the weights", field="config.json"))
        return opened
    try:
        classified = classify(ckpt)
    except NotADraftError as exc:  # a target, MTP head, Medusa, DFlash ...: nothing else applies
        head.add(finding("E004", str(exc)))
        return opened
    except UnknownLayoutError as exc:
        head.add(finding("E001", str(exc)))
        return opened
    except ConfigError as exc:  # a field of the wrong JSON type (schemas/draft-config.schema.json)
        head.add(finding("E304", exc.message, field="config.json"))
        return opened
    from eagle_convert.validate.rules.target import open_target

    opened.classified = classified
    opened.target = open_target(target) if target is not None else None
    head.target = opened.target.description if opened.target else None
    return opened


def static_report(
    opened: OpenedDraft,
    status: VllmVersionStatus,
    *,
    serving_context: int | None = None,
    deep: bool = False,
    serve: ServeConfig | None = None,
    identity_required: bool = False,
) -> ValidationReport:
    """The static verdict of an opened draft for the release `status` names (run per release by the matrix).

    `serve` (parsed for that release) is checked by the `serve` family; the context the draft drafts
    at is its max_model_len, else its --max-model-len, else `serving_context`.
    """
    from eagle_convert.validate.rules import run_static
    from eagle_convert.validate.rules.context import build_context

    head = opened.head
    report = ValidationReport(
        head.source,
        list(head.findings),
        list(head.families_run),
        is_hub=head.is_hub,
        target=head.target,
        vllm=status,
        timings=dict(head.timings),
        serve=serve,
    )
    if opened.classified is None:
        return report
    info = describe(opened.ckpt, status.rules, read_vocab=False, classified=opened.classified)
    report.info = info
    tgt = opened.target
    ctx = build_context(
        opened.ckpt,
        info,
        target=tgt.target if tgt else None,
        target_source=report.target,
        serving_context=(serve.draft_context if serve is not None else None) or serving_context,
        target_model=tgt,
        deep=deep,
        shared=opened.shared,
        serve=serve,
        identity_required=identity_required,
    )
    opened.last_context = ctx
    report.vllm_class = ctx.impl
    t1 = time.perf_counter()
    static, families = run_static(ctx)
    report.families_run = families
    report.add(static)
    # E706: the named or installed vLLM is not a release the rules were read from (unverified)
    if (line := report.vllm.warning() if report.vllm else None) is not None:
        report.add(finding("E706", line))
    report.timings["static"] = time.perf_counter() - t1
    report.timings.update(ctx.timings)
    report.notes = dict(ctx.notes)
    return report


def ckpt_text(ckpt: Checkpoint) -> str:
    """What a serve command loads for an opened checkpoint: its folder or hub repo, as its source names it."""
    src = ckpt.source
    repo = getattr(src, "repo_id", None) or getattr(src, "repo", None)
    root = getattr(src, "root", None) or getattr(src, "path", None)
    return str(repo or root or ckpt.description)


def vllm_serve_commands(opened: OpenedDraft, view: Any, release: str, serve: ServeConfig | None) -> list[Any]:
    """vLLM's serve command for `opened` at `release` (k: the deployment's, else 3)."""
    from eagle_convert.validate.engine_serve import serve_draft

    k = serve.k if serve is not None and serve.given and isinstance(serve.k, int) else None
    draft = serve_draft(opened, view, k=k)
    if draft is None:
        return []
    from eagle_convert.engines import serve_command

    return [serve_command(draft, "vllm", release)]


def _check_source(report: ValidationReport, status: VllmVersionStatus, *, named: bool) -> None:
    """When the verdict is for the installed vLLM: does its deciding code match its release's fingerprints?

    Files are hashed, never imported (milliseconds); a file that differs is parsed to name the units
    (`vllm_model.fingerprints`). Not run for a named release (`--vllm-version`: the verdict is about that
    release, not this installation) nor for an unverified one (E706 already says the rules were borrowed).
    """
    from eagle_convert.vllm_model import check_release, known_fingerprint_releases, vllm_package_dir

    if named or status.installed is None or not status.verified:
        return
    t0 = time.perf_counter()  # the data file's load included
    pkg = vllm_package_dir()
    if pkg is None or status.release not in known_fingerprint_releases():
        return
    check = check_release(status.release, pkg)
    report.fingerprints = check
    report.timings["fingerprints"] = time.perf_counter() - t0
    for file, drifts in check.by_file().items():
        units = "; ".join(f"{'the whole file' if d.unit == '*' else d.unit} {d.kind}" for d in drifts)
        report.add(
            finding(
                "E705",
                f"the installed vLLM's deciding code differs from vLLM {status.release}'s ({check.source}) in "
                f"{file}: {units}; the rules applied were read from {status.release}, so this verdict is unverified",
                field=f"vllm/{file}",
            )
        )


def _engine(report: ValidationReport, ctx: Any, ckpt: Any, target: str | Path | None, timeout_s: float) -> list:
    from eagle_convert.io import LocalSource
    from eagle_convert.validate.rules.engine import feature_findings, from_engine
    from eagle_convert.vllm import check_with_vllm

    target_ref = CheckpointRef.parse(str(target))
    if not isinstance(ckpt.source, LocalSource) or target_ref.is_hub:
        raise UsageError(
            "{load=vllm} needs a local draft folder and a local target folder",
            hint="download both first (huggingface-cli download ...)",
            options=("load",),
        )
    local = target_ref.local
    if local is None:  # not a hub ref (checked above), so a local path
        raise UsageError(f"{{target={target}}}: not a local folder", options=("target",), file=str(target))
    target_dir = local if local.is_dir() else local.parent
    t0 = time.perf_counter()
    serve = ctx.serve if ctx.serve is not None and ctx.serve.given else None
    kw: dict[str, Any] = {}
    if serve is not None:  # the draft loads with the deployment's keys (its own max_model_len fits the target's)
        kw = {"speculative": dict(serve.data), "num_speculative_tokens": serve.k or 3}
        kw["max_model_len"] = max(512, serve.data.get("max_model_len") or 0)
    result = check_with_vllm(Path(ckpt.source.root), target_dir, timeout_s=timeout_s, **kw)
    report.timings["engine"] = time.perf_counter() - t0
    report.engine = result.to_dict()
    return feature_findings(ctx, result.features) + from_engine(result)


def _done(report: ValidationReport, t0: float) -> ValidationReport:
    report.seconds = time.perf_counter() - t0
    return report
