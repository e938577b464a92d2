"""A server that cannot be measured, as one-line errors naming its URL and the fix.

`ServerError` leaves with exit code 3, apart from 1 (findings, a draft under a floor) and 2 (usage),
so a CI job can tell "the staging server is down or misconfigured" from "the draft is bad".
"""

from __future__ import annotations

import re

from eagle_convert.errors import EagleConvertError

SERVER_EXIT_CODE = 3


class ServerError(EagleConvertError, ConnectionError):
    """The server at a URL could not be measured: unreachable, refused, wrong path, bad answers."""

    exit_code = SERVER_EXIT_CODE

    def __init__(self, url: str, problem: str, *, hint: str | None = None) -> None:
        self.url = url
        names = re.findall(r"\{([a-z_]+)(?:=[^{}]*)?\}", f"{problem} {hint or ''}")  # options the line names
        super().__init__(f"the server at {url} {problem}", hint=hint, options=names)


class NoDraftError(ServerError):
    """The server's /metrics has no spec-decode counters: it runs the target alone."""


class ServerRestartedError(ServerError):
    """A spec-decode counter went down between two reads: the server restarted mid-run."""
