"""`UpgradeOptions`: what `upgrade` is asked for besides the draft, the output and the target.

One field per option, with its help text and choices (`optionspec`): the `upgrade` command's click
options and report's `upgrade` line in `commands.sh` are both made from these fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.optionspec import check, option
from eagle_convert.upgrade.plan import LAYOUTS

INITS = ("ones", "calibrated")


def parse_ids(value: str) -> tuple[int, ...]:
    """`"2,16,29"` -> (2, 16, 29).

    Raises:
        ValueError: not a comma-separated list of integers, or empty.
    """
    try:
        ids = tuple(int(x) for x in value.replace(" ", "").split(",") if x != "")
    except ValueError:
        raise ValueError(f"{value!r} is not a comma-separated list of integers (e.g. 2,16,29)") from None
    if not ids:
        raise ValueError("give at least one id (e.g. 2,16,29)")
    return ids


def format_ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))


@dataclass(frozen=True)
class UpgradeOptions:
    """How to upgrade: the output layout, the flags, the fc_norm init and how the output is written."""

    layout: str = option(
        "vllm",
        choices=LAYOUTS,
        help="Output tensor names and config format: vllm (canonical names vLLM and SGLang load), "
        "keep (the input's names, only additions), speculators (speculators config format).",
    )
    norm_output: bool = option(
        True, help="Also set norm_output (post-norm feedback); --no-norm-output adds only the fc_norm weights."
    )
    aux_layer_ids: tuple[int, ...] | None = option(
        None,
        metavar="IDS",
        parse=parse_ids,
        format=format_ids,
        help="Comma-separated aux layer ids in vLLM's convention (outputs of k target layers), "
        "for drafts whose config has none.",
    )
    serve_for: tuple[str, ...] = option(
        (),
        flag="--for",
        multiple=True,
        metavar="ENGINE[==VERSION]",
        help="Write one config every named engine reads as trained (repeatable: vllm, sglang, trtllm, all): "
        "SGLang's aux ids in eagle_config in its id + 1 convention and an architecture it registers; refused, "
        "with the reason, when no single config can (e.g. norm_before_residual for SGLang / TensorRT-LLM). "
        "The model card then lists each engine's serve command. Default: vLLM.",
    )
    init: str = option(
        "ones",
        choices=INITS,
        help="fc_norm weights: ones (the identity in weight space only), or calibrated: run --target (a local "
        "folder) over calibration prompts and set each fc_norm.{i} to the median RMS of aux state i, so "
        "the first draft step matches the EAGLE-3 draft's (needs the smoke extra).",
    )
    calibration_prompts: str | None = option(
        None,
        metavar="NAME|FILE|DIR",
        help="Calibration prompts for --init calibrated: a suite (builtin, spec-bench-sample), a JSONL "
        'file ({"prompt": ...} or {"messages": [...]} per line, or Spec-Bench / SPEED-Bench rows) or a '
        "prepared Spec-Bench / SPEED-Bench folder. Default: the built-in set.",
    )
    link: bool = option(
        False,
        help="Reflink (else hard-link, else copy) the input's weight files instead of copying them, and add "
        "one small shard with the fc_norm weights: flat in checkpoint size. Only for tensor names vLLM "
        "loads as they are (e.g. --layout keep).",
    )
    verify: bool = option(
        True, help="Re-read the output and check every byte and the config against the plan before publishing it."
    )
    fsync: bool = option(
        True,
        help="Flush every output file and folder to disk before publishing it (and the parent after), so "
        "the output survives a power loss; --no-fsync for scratch outputs.",
    )

    def __post_init__(self) -> None:
        check(self)
