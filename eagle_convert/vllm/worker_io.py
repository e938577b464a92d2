"""How the vLLM worker processes answer their parent: JSON lines on the real stdout, every other
print/log (vLLM's included) on stderr, and an exception still answered as one JSON line."""

from __future__ import annotations

import os
import sys
import traceback
from typing import TextIO

from eagle_convert.vllm.errors import one_line_error

__all__ = ["claim_stdout", "failure_answer"]


def claim_stdout() -> TextIO:
    """Keep the real stdout for the JSON answers and route everything else written there to stderr."""
    sys.stdout.flush()
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return real_stdout


def failure_answer(exc: BaseException) -> dict:
    """The answer for an import failure or a bug: one line of error, the traceback's tail for --debug."""
    return {"ok": False, "error": one_line_error(exc), "stage": "worker", "traceback": traceback.format_exc()[-4000:]}
