"""`served`: acceptance and per-user speedup measured on running servers (`smoke --server`, check's
serve stage): the OpenAI-compatible API streamed with asyncio, vLLM's spec-decode counters from
`/metrics`, the honest-number checks, and the report in smoke's JSON shape."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.served.errors import SERVER_EXIT_CODE, NoDraftError, ServerError, ServerRestartedError
    from eagle_convert.served.http import Connection, ServedModel, display_url, normalize_url
    from eagle_convert.served.metrics import SpecCounters, parse_prometheus, spec_counters
    from eagle_convert.served.options import ServerOptions
    from eagle_convert.served.plot import plot_served, served_caption
    from eagle_convert.served.results import BASELINE_LABEL, ServedLevel, ServedReport, ServedServer
    from eagle_convert.served.run import DEFAULT_LEVELS, level_requests, run_served
    from eagle_convert.served.stream import RequestOutcome, Sampling, run_streams, stream_one
else:
    __getattr__, __dir__ = attach(__name__, __file__)
