"""`run_validate`: what `validate` runs for its options: one release's report, or the matrix.

One vLLM release (the default) is `validate_checkpoint`; one other engine's release is
`validate_for`; `vllm_version="all"`, several `serve_for` or `serve_for=("all",)` are the
compatibility matrix, static rules only, with a row per release.
"""

from __future__ import annotations

from pathlib import Path

from eagle_convert.draft import CheckpointRef
from eagle_convert.errors import UsageError
from eagle_convert.validate.deep import Progress
from eagle_convert.validate.forengine import validate_for
from eagle_convert.validate.matrix import Matrix, compatibility_matrix
from eagle_convert.validate.options import ValidateOptions, static_only
from eagle_convert.validate.run import ValidationReport, validate_checkpoint


def run_validate(
    ref: str | Path | CheckpointRef, opts: ValidateOptions, *, progress: Progress | None = None
) -> tuple[ValidationReport | Matrix, ValidationReport]:
    """Validate `ref` as `opts` asks; see the module docstring.

    Args:
        ref: the draft (folder, file or hub repo).
        opts: the options (`ValidateOptions`, as `validate` takes them).
        progress: receives the bytes the deep scan reads.

    Returns:
        The result (a report, or the matrix) and the report a CI gates on (`to_junit`): the
        result itself, or the matrix's default vLLM release (else its first engine row).

    Raises:
        UsageError: `deep` or `load` with the matrix, `serve_config` for vLLM or for several engines,
            an unknown engine or release.
        EagleConvertError: unreadable inputs, as `validate_checkpoint`.
    """
    from eagle_convert.engines import ALL, VLLM, parse_for
    from eagle_convert.vllm_model import KNOWN_RELEASES, installed_status

    version, specs = opts.vllm_version, opts.serve_for
    if not specs and version != ALL:
        return _vllm(ref, opts, version, progress)
    if not specs:
        matrix = compatibility_matrix(
            ref,
            default=installed_status(),
            target=opts.target,
            serving_context=opts.serving_context,
            speculative_config=opts.speculative_config,
        )
        return matrix, matrix.default_row.report
    everything = ALL in specs or version == ALL
    statuses = parse_for([*specs, *([f"vllm=={version}"] if version and version != ALL else [])])
    if len(statuses) == 1 and not everything:
        st = statuses[0]
        if st.engine == VLLM:
            if opts.serve_config is not None:
                raise UsageError(
                    "{serve_config} is for {serve_for=sglang} or {serve_for=trtllm}; vLLM's is {speculative_config}",
                    options=("serve_config", "serve_for", "speculative_config"),
                )
            return _vllm(ref, opts, st.requested, progress)
        static_only(opts, f"{{serve_for={st.engine}}}", "the engine rows run the static rules")
        report = validate_for(
            ref, st, target=opts.target, serving_context=opts.serving_context, serve_config=opts.serve_config
        )
        return report, report
    several = "{serve_for=all}" if everything else "several {serve_for}"
    static_only(opts, several, "the engine rows run the static rules")
    vllm = [st for st in statuses if st.engine == VLLM]
    releases = KNOWN_RELEASES if everything else tuple(dict.fromkeys(st.release for st in vllm))
    named = vllm[0].vllm if vllm and not everything else None  # a vLLM row's status is always set
    default = named or installed_status()
    matrix = compatibility_matrix(
        ref,
        target=opts.target,
        serving_context=opts.serving_context,
        speculative_config=opts.speculative_config,
        releases=releases,
        default=default,
        engines=[st for st in statuses if st.engine != VLLM],
    )
    return matrix, matrix.default_row.report if matrix.vllm_rows else matrix.engine_rows[0].report


def _vllm(
    ref: str | Path | CheckpointRef, opts: ValidateOptions, version: str | None, progress: Progress | None
) -> tuple[ValidationReport, ValidationReport]:
    report = validate_checkpoint(
        ref,
        target=opts.target,
        deep=opts.deep,
        load=opts.load,
        serving_context=opts.serving_context,
        progress=progress,
        load_timeout_s=opts.load_timeout,
        vllm_version=version,
        speculative_config=opts.speculative_config,
    )
    return report, report
