"""`served`: acceptance and per-user speedup measured on running servers (`smoke --server`, check's
serve stage): the OpenAI-compatible API streamed with asyncio, vLLM's spec-decode counters from
`/metrics`, the honest-number checks, and the report in smoke's JSON shape."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.served.errors import SERVER_EXIT_CODE, NoDraftError, ServerError, ServerRestartedError
    from eagle_convert.served.http import Connection, ServedModel, display_url, normalize_url
    from eagle_convert.served.metrics import SpecCounters, parse_prometheus, spec_counters
    from eagle_convert.served.plot import plot_served, served_caption
    from eagle_convert.served.results import BASELINE_LABEL, ServedLevel, ServedReport, ServedServer
    from eagle_convert.served.run import DEFAULT_LEVELS, ServerOptions, level_requests, run_served
    from eagle_convert.served.stream import RequestOutcome, Sampling, run_streams, stream_one
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "SERVER_EXIT_CODE": "eagle_convert.served.errors",
            "NoDraftError": "eagle_convert.served.errors",
            "ServerError": "eagle_convert.served.errors",
            "ServerRestartedError": "eagle_convert.served.errors",
            "Connection": "eagle_convert.served.http",
            "ServedModel": "eagle_convert.served.http",
            "display_url": "eagle_convert.served.http",
            "normalize_url": "eagle_convert.served.http",
            "SpecCounters": "eagle_convert.served.metrics",
            "parse_prometheus": "eagle_convert.served.metrics",
            "spec_counters": "eagle_convert.served.metrics",
            "plot_served": "eagle_convert.served.plot",
            "served_caption": "eagle_convert.served.plot",
            "BASELINE_LABEL": "eagle_convert.served.results",
            "ServedLevel": "eagle_convert.served.results",
            "ServedReport": "eagle_convert.served.results",
            "ServedServer": "eagle_convert.served.results",
            "DEFAULT_LEVELS": "eagle_convert.served.run",
            "ServerOptions": "eagle_convert.served.run",
            "level_requests": "eagle_convert.served.run",
            "run_served": "eagle_convert.served.run",
            "RequestOutcome": "eagle_convert.served.stream",
            "Sampling": "eagle_convert.served.stream",
            "run_streams": "eagle_convert.served.stream",
            "stream_one": "eagle_convert.served.stream",
        },
    )

__all__ = [
    "BASELINE_LABEL",
    "Connection",
    "DEFAULT_LEVELS",
    "display_url",
    "level_requests",
    "NoDraftError",
    "normalize_url",
    "parse_prometheus",
    "plot_served",
    "RequestOutcome",
    "run_served",
    "run_streams",
    "Sampling",
    "ServedLevel",
    "ServedModel",
    "ServedReport",
    "ServedServer",
    "served_caption",
    "SERVER_EXIT_CODE",
    "ServerError",
    "ServerOptions",
    "ServerRestartedError",
    "spec_counters",
    "SpecCounters",
    "stream_one",
]
