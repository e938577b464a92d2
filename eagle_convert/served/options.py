"""`ServerOptions`: how running servers are reached and judged, apart from what is measured (`MeasureOptions`)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.optionspec import option


@dataclass(frozen=True)
class ServerOptions:
    """How the servers are reached and judged (the measuring settings are `MeasureOptions`):
    `smoke --server`'s options besides the URLs."""

    api_key: str | None = option(None, envvar="OPENAI_API_KEY", help="Bearer key for the servers (never printed).")
    request_timeout: float = option(300.0, min=0.1, help="Seconds one request (and any silence mid-stream) may take.")
    timeout: float | None = option(None, min=1, help="Seconds the whole --server run may take.")
    max_failed: float = option(
        0.1, min=0, max=1, help="A level where a larger share of requests failed gives no figure."
    )
    timing_only: bool = option(
        False,
        help="Measure a server without spec-decode counters (another engine) for per-user tokens/s and "
        "speedups only, without acceptance.",
    )
    exclusive: bool = option(
        False, help="Other traffic that moves a server's counters is an error (default: a note beside the figure)."
    )
