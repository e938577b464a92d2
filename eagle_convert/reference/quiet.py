"""Keep transformers' own progress bars out of eagle-convert's output.

transformers 5 draws a "Loading weights" tqdm bar on stderr for every `from_pretrained`; inside a
command that prints its own progress (smoke, finetune, calibrate, report) it interleaves with it
and, piped into a log, leaves carriage-return noise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_loading() -> Iterator[None]:
    """No transformers (or huggingface_hub) progress bars inside; the previous setting after."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()
