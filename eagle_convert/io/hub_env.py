"""The Hugging Face Hub environment, read on every call (not at import time like `huggingface_hub.constants`).

`HF_ENDPOINT`, `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) and `HF_HOME` / `HF_HUB_CACHE`;
`HF_TOKEN` is left to the client's own `get_token`. Used by `hub.HubSource` and `hub_errors`.
"""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_REASON = "offline mode is on (HF_HUB_OFFLINE)"
_TRUE = {"1", "ON", "YES", "TRUE"}


def endpoint() -> str | None:
    """HF_ENDPOINT now (None: the client's default)."""
    value = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return value or None


def endpoint_display() -> str:
    from huggingface_hub import constants

    return endpoint() or constants.ENDPOINT


def offline() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE now; else the client's `is_offline_mode()` (read at its import)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if value is not None:
        return value.strip().upper() in _TRUE
    from huggingface_hub import is_offline_mode

    return bool(is_offline_mode())


def default_cache_dir() -> Path:
    """The HF hub cache folder now: HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > HF_HOME/hub > XDG default."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.path.expanduser(os.environ[var])))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"
