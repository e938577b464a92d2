"""Static validation rules, one module per family; each exposes `check(ctx) -> list[Finding]`.

Rules read a `Context` (the draft as vLLM sees it) and return findings; they never raise for a
broken checkpoint, so one run reports every problem at once.
"""

from __future__ import annotations

from collections.abc import Callable

from eagle_convert.validate.findings import Finding
from eagle_convert.validate.rules import (
    auxids,
    config,
    files,
    keys,
    producer,
    serve,
    served,
    shapes,
    target,
    targetweights,
    vocab,
)
from eagle_convert.validate.rules.context import Context

__all__ = ["FAMILIES", "run_static"]

# family name (as in schemas/findings.json) -> check; order is the order of the report.
FAMILIES: dict[str, Callable[[Context], list[Finding]]] = {
    "files": files.check,
    "keys": keys.check,
    "shapes": shapes.check,
    "config": lambda ctx: config.check(ctx) + auxids.check(ctx) + served.check(ctx),
    "vocab": vocab.check,
    "target": lambda ctx: target.check(ctx) + targetweights.check(ctx),
    "producer": producer.check,
    "serve": serve.check,
}


def run_static(ctx: Context) -> tuple[list[Finding], list[str]]:
    """All static findings and the families that ran (target only with a target config, serve only
    with a --speculative-config)."""
    out: list[Finding] = []
    ran = []
    for name, check in FAMILIES.items():
        if (name == "target" and ctx.target is None) or (name == "serve" and not (ctx.serve and ctx.serve.given)):
            continue
        out += check(ctx)
        ran.append(name)
    return out, ran
