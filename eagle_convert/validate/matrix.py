"""The compatibility matrix: one verdict per known vLLM release (`validate --vllm-version all`).

A user deploys on whichever vLLM they run, and the same draft is served as trained by some releases,
differently by others (a flag lost, fc_norm loaded but never applied) and not at all by the oldest.
The matrix opens and classifies the draft, reads its target's config.json and the d2t/t2d values
once (`run.open_draft`, `Context.memo`), then reads the config and runs the static rules once per
release (`run.static_report`), so every row costs a fraction of one `validate`.

Verdicts, from a release's findings (errors and warnings; infos never count):
- "fails to load": a finding whose impact for that release is fails-to-load;
- "served differently": otherwise any error, or a warning that changes what vLLM serves
  (`Finding.changes_serving`: loads other weights, computes differently, caps the context);
- "served as trained": neither (hygiene warnings and infos only).

The deep scan and the engine check are not per-release facts (the scan reads values; the engine
check runs the installed vLLM only), so `compatibility_matrix` takes neither: run `validate
--deep` / `--engine vllm` for one release beside it.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle_convert.draft import Checkpoint, CheckpointRef
from eagle_convert.engines import EngineStatus
from eagle_convert.jsonable import dump, key
from eagle_convert.validate.findings import Finding, code_table
from eagle_convert.validate.run import ValidationReport, open_draft, static_report
from eagle_convert.vllm_model import (
    KNOWN_RELEASES,
    NEWEST_RELEASE,
    VllmVersionStatus,
    status_for,
)

SCHEMA_VERSION = 1
Verdict = Literal["served as trained", "served differently", "fails to load"]
AS_TRAINED: Verdict = "served as trained"
DIFFERENTLY: Verdict = "served differently"
FAILS: Verdict = "fails to load"
VERDICTS: tuple[Verdict, ...] = (AS_TRAINED, DIFFERENTLY, FAILS)


def verdict_of(findings: Sequence[Finding]) -> tuple[Verdict, tuple[str, ...]]:
    """The verdict for one release's findings, and the codes that decide it (sorted, each once)."""
    counted = [f for f in findings if f.level != "info"]
    fails = sorted({f.code for f in counted if f.impact == "fails-to-load"})
    if fails:
        return FAILS, tuple(fails)
    changing = sorted({f.code for f in counted if f.level == "error" or f.changes_serving})
    return (DIFFERENTLY, tuple(changing)) if changing else (AS_TRAINED, ())


@dataclass(frozen=True)
class MatrixRow:
    """One release's verdict, the codes behind it and its whole static report."""

    release: str
    verdict: Verdict
    codes: tuple[str, ...]
    report: ValidationReport
    engine: str = "vllm"  # "sglang", "trtllm": a row of `--for all` / `--for ENGINE`
    gate: bool = False  # a named engine's row: its errors fail the command

    @property
    def label(self) -> str:
        """ "vLLM 0.34.0", "SGLang 0.5.23"."""
        from eagle_convert.engines import ENGINES

        return f"{ENGINES[self.engine].title} {self.release}"

    @property
    def why(self) -> str:
        """The deciding codes with their slugs ("E104 tensor-without-flag, W310 short-context"), or ""."""
        table = code_table()
        return ", ".join(f"{c} {table[c].slug}" for c in self.codes)

    def to_dict(self) -> dict[str, Any]:
        counts, report = self.report.counts(), self.report
        return dump(
            self,
            "engine release verdict codes why vllm_class errors warnings infos findings",
            vllm_class=report.vllm_class,
            **{f"{level}s": counts[level] for level in ("error", "warning", "info")},
            findings=report.findings_dicts(),
        )


@dataclass(frozen=True)
class ReleaseRange:
    """Consecutive known releases with the same verdict and codes."""

    first: str
    last: str
    verdict: Verdict
    codes: tuple[str, ...]

    @property
    def span(self) -> str:
        return self.first if self.first == self.last else f"{self.first}-{self.last}"


@dataclass
class Matrix:
    """Every known release's verdict for one draft; `default` is the release the exit status is for."""

    source: str
    rows: list[MatrixRow] = field(metadata=key("matrix"))
    default: VllmVersionStatus
    target: str | None = None
    layout: str | None = None
    variant: str | None = None
    seconds: float = field(default=0.0, metadata=key(ndigits=3))
    timings: dict[str, float] = field(default_factory=dict, metadata=key(ndigits=3))
    serve_commands: list[Any] = field(default_factory=list)  # engines.ServeCommand: vLLM's, then each engine row's

    @property
    def vllm_rows(self) -> list[MatrixRow]:
        return [r for r in self.rows if r.engine == "vllm"]

    @property
    def engine_rows(self) -> list[MatrixRow]:
        """The rows of engines other than vLLM (`--for`), in the order named."""
        return [r for r in self.rows if r.engine != "vllm"]

    def row(self, release: str) -> MatrixRow:
        """The vLLM row of `release` (a known release string). Raises KeyError for any other."""
        for r in self.vllm_rows:
            if r.release == release:
                return r
        raise KeyError(release)

    @property
    def default_row(self) -> MatrixRow:
        return self.row(self.default.release)

    def failed(self, *, strict: bool = False) -> bool:
        """What `validate` without `--vllm-version` exits on: the default release's errors (with
        `strict`, its warnings too), and those of every engine row named with `--for` (`gate`). The
        other rows inform; they never fail the command."""
        gates = [r for r in self.rows if r.gate] + ([self.default_row] if self.vllm_rows else [])
        return any(r.report.failed(strict=strict) for r in gates)

    def as_trained(self) -> list[str]:
        """The releases that serve the draft as trained, oldest first."""
        return [r.release for r in self.vllm_rows if r.verdict == AS_TRAINED]

    def ranges(self) -> list[ReleaseRange]:
        """Consecutive rows with the same verdict and codes, oldest first."""
        out: list[ReleaseRange] = []
        for r in self.vllm_rows:
            if out and out[-1].verdict == r.verdict and out[-1].codes == r.codes:
                out[-1] = ReleaseRange(out[-1].first, r.release, r.verdict, r.codes)
            else:
                out.append(ReleaseRange(r.release, r.release, r.verdict, r.codes))
        return out

    def summary(self) -> str:
        """One sentence, newest releases first: "vLLM 0.23.0-0.33.0 serve it as trained;
        0.22.0-0.22.1 serve it differently (W320); 0.21.0 fails to load it (E104)"."""
        vllm = summarize(self.ranges()) if self.vllm_rows else ""
        verbs = {AS_TRAINED: "serves it as trained", DIFFERENTLY: "serves it differently", FAILS: "fails to load it"}
        others = [
            f"{r.label} {verbs[r.verdict]}" + (f" ({', '.join(r.codes)})" if r.codes else "") for r in self.engine_rows
        ]
        return "; ".join([p for p in (vllm, *others) if p])

    def to_dict(self) -> dict[str, Any]:
        engines = [dump(r, "engine release verdict codes") for r in self.engine_rows]
        computed = {"summary": self.summary(), "as_trained": self.as_trained(), "engines": engines}
        return dump(self, _KEYS, schema_version=SCHEMA_VERSION, ok=not self.failed(), **computed)


_KEYS = (
    "schema_version source ok default target layout variant summary as_trained engines matrix serve_commands seconds "
    "timings"
)


def summarize(ranges: Sequence[ReleaseRange]) -> str:
    """The matrix sentence of `ranges` (oldest first), newest first; grouped by verdict and codes."""
    if len(ranges) == 1 and ranges[0].first == KNOWN_RELEASES[0] and ranges[0].last == KNOWN_RELEASES[-1]:
        only = ranges[0]
        every = f"every known vLLM release ({only.span})"
        codes = f" ({', '.join(only.codes)})" if only.codes else ""
        return {
            AS_TRAINED: f"{every} serves it as trained",
            DIFFERENTLY: f"{every} serves it differently{codes}",
            FAILS: f"{every} fails to load it{codes}",
        }[only.verdict]
    parts = []
    for i, r in enumerate(reversed(ranges)):
        plural = r.first != r.last
        codes = f" ({', '.join(r.codes)})" if r.codes else ""
        verb = {
            AS_TRAINED: ("serve it as trained" if plural else "serves it as trained"),
            DIFFERENTLY: ("serve it differently" if plural else "serves it differently") + codes,
            FAILS: ("fail to load it" if plural else "fails to load it") + codes,
        }[r.verdict]
        parts.append(("vLLM " if i == 0 else "") + f"{r.span} {verb}")
    return "; ".join(parts)


def _serve_for(
    loaded: tuple[dict[str, Any], str] | None, status: VllmVersionStatus, serving_context: int | None
) -> tuple[Any, Finding | None]:
    """The serve config as `status`'s release reads it, or E911 with the reason it refuses it."""
    from eagle_convert.errors import UsageError
    from eagle_convert.validate.findings import finding
    from eagle_convert.vllm_model import parse_serve_config

    if loaded is None:
        return parse_serve_config(None, status.rules, max_model_len=serving_context), None
    try:
        return parse_serve_config(loaded[0], status.rules, max_model_len=serving_context, source=loaded[1]), None
    except UsageError as exc:
        return None, finding("E911", exc.message, field="speculative_config")


def compatibility_matrix(
    ref: str | Path | CheckpointRef | Checkpoint,
    *,
    target: str | Path | None = None,
    serving_context: int | None = None,
    default: VllmVersionStatus,
    releases: Sequence[str] = KNOWN_RELEASES,
    speculative_config: str | dict[str, Any] | None = None,
    engines: Sequence[EngineStatus] = (),
    shared: dict[Hashable, Any] | None = None,
) -> Matrix:
    """The static verdict of a draft for every release in `releases` (default: every known one).

    Args:
        target: the target model (folder or hub repo), read once for every release.
        serving_context: the context length served (`--max-model-len`), else the target's.
        speculative_config: the deployment's `--speculative-config`, read and checked per release;
            a release that refuses it (an unknown key or value there) fails to load (E911).
        default: the release the exit status is for, resolved by the command's entry (validate: the
            installed vLLM, else the newest; `validate.entry`).
        engines: releases of engines other than vLLM (`--for sglang`, `--for all`): one row each, judged
            against the newest vLLM release's reading (the draft as trained); their errors fail the
            matrix too. With `releases` empty the matrix has these rows only.
        shared: the `Context.memo` of another pass over the same draft and target (`open_draft`).

    Raises:
        EagleConvertError: unreadable inputs, as `validate_checkpoint`.
    """
    from eagle_convert.vllm_model import load_speculative_config

    loaded = None if speculative_config is None else load_speculative_config(speculative_config)  # not JSON: exit 2
    t0 = time.perf_counter()
    opened = open_draft(ref, target=target, shared=shared)
    timings = dict(opened.head.timings)
    t1 = time.perf_counter()
    installed = default.installed
    rows = []
    reference: ValidationReport | None = None  # the newest release's report: the draft as trained
    versions = dict.fromkeys([*releases, default.release]) if releases else {}  # the default's row always exists
    for version in versions:
        status = VllmVersionStatus(installed, version, "--vllm-version all")
        serve, refused = _serve_for(loaded, status, serving_context)
        report = static_report(opened, status, serving_context=serving_context, serve=serve)
        if refused is not None:
            report.add(refused)
        verdict, codes = verdict_of(report.findings)
        rows.append(MatrixRow(version, verdict, codes, report))
        if version == NEWEST_RELEASE:
            reference = report
    rows.sort(key=lambda r: KNOWN_RELEASES.index(r.release))
    timings["releases"] = time.perf_counter() - t1
    if engines:
        from eagle_convert.validate.forengine import engine_report, reference_report

        t2 = time.perf_counter()
        if reference is None or list(versions)[-1] != NEWEST_RELEASE:  # engines read the newest's context
            reference = reference_report(opened, serving_context)
        for st in engines:
            report = engine_report(opened, st, reference)
            verdict, codes = verdict_of(report.findings)
            rows.append(MatrixRow(st.release, verdict, codes, report, engine=st.engine, gate=True))
        timings["engines"] = time.perf_counter() - t2
    info = next((r.report.info for r in rows if r.release == default.release), None) or (
        rows[0].report.info if rows else None
    )
    commands = [c for r in rows if r.engine != "vllm" for c in r.report.serve_commands]
    if versions and opened.last_context is not None:
        from eagle_convert.validate.run import vllm_serve_commands

        commands = vllm_serve_commands(opened, opened.last_context.view, default.release, None) + commands
    return Matrix(
        source=opened.head.source,
        rows=rows,
        default=default,
        target=opened.head.target,
        layout=info.layout if info else None,
        variant=info.variant if info else None,
        seconds=time.perf_counter() - t0,
        timings=timings,
        serve_commands=commands,
    )


def serving_summary(ref: str | Path | CheckpointRef | Checkpoint, *, shared: dict[Hashable, Any] | None = None) -> str:
    """The model card's sentence: which releases serve the draft as trained, differently or not at all.

    From the draft alone (no target: the card describes the draft wherever it is served), every
    known release; `Matrix.summary`. `shared`: as `compatibility_matrix`'s.
    """
    return compatibility_matrix(ref, default=status_for(None, KNOWN_RELEASES[-1]), shared=shared).summary()
