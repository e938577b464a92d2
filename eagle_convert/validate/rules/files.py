"""Where the files are: vLLM reads the weights at the top of the draft folder only."""

from __future__ import annotations

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context


def check(ctx: Context) -> list[Finding]:
    if ctx.ckpt.prefix:
        return [
            finding(
                "E003",
                f"the weights are in {ctx.ckpt.prefix}/ ({', '.join(ctx.ckpt.weight_files)}); vLLM "
                "reads only *.safetensors / *.bin at the top of the draft folder and finds none",
                tensor=None,
                field=None,
            )
        ]
    return []
