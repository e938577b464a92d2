"""One server's HTTP side: its URL, the API key, limits, and every client failure as one line.

The OpenAI-compatible API (`/v1/models`, `/v1/completions`, `/v1/chat/completions`) and vLLM's
`/metrics` and `/version`, over `httpx2` (huggingface_hub's HTTP library, a declared dependency)
with asyncio. No `httpx2` exception leaves this module: `translate` turns each into a
`ServerError` naming the URL and the fix. The API key is sent as a bearer token and never appears
in a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from eagle_convert.errors import UsageError
from eagle_convert.served.errors import ServerError

if TYPE_CHECKING:
    import httpx2

AUTH_HINT = "give {api_key} or set OPENAI_API_KEY"
PATH_HINT = "give the server's root URL (e.g. http://host:8000), where /v1/models and /metrics answer"


def normalize_url(url: str) -> str:
    """`host:8000`, `http://host:8000/`, `http://host:8000/v1` -> `http://host:8000`."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{{server}}: {url!r} is not an http(s) URL (e.g. http://localhost:8000)", options=("server",))
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def display_url(url: str) -> str:
    """The URL without user:password@ (a credential never reaches a message)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def translate(exc: BaseException, url: str, what: str, timeout_s: float) -> ServerError:
    """A client exception as one line: refused, TLS, timeout, stall, closed mid-stream."""
    import httpx2

    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.ConnectTimeout):
        return ServerError(url, f"did not accept a connection within {timeout_s:g}s", hint="check the URL and firewall")
    if isinstance(exc, httpx2.TimeoutException):
        return ServerError(
            url,
            f"stalled: no data for {timeout_s:g}s during {what}",
            hint="raise {request_timeout} or lower the concurrency",
        )
    if isinstance(exc, httpx2.ConnectError):
        if "SSL" in text or "certificate" in text.lower() or "TLS" in text:
            return ServerError(
                url, f"failed the TLS handshake ({text})", hint="check the certificate (SSL_CERT_FILE) or use http://"
            )
        return ServerError(url, f"is not reachable ({text})", hint="start the server or fix the host and port")
    if isinstance(exc, httpx2.RemoteProtocolError):
        return ServerError(url, f"closed the connection during {what} ({text})", hint="check the server's log")
    if isinstance(exc, httpx2.HTTPError):
        return ServerError(url, f"failed during {what} ({type(exc).__name__}: {text})", hint="check the server's log")
    return ServerError(url, f"failed during {what} ({type(exc).__name__}: {text})")


def status_error(url: str, path: str, status: int, body: str) -> ServerError:
    """An HTTP error status as one line with the fix that status asks for."""
    detail = _error_detail(body)
    if status in (401, 403):
        return ServerError(url, f"refused {path} (HTTP {status}{detail})", hint=AUTH_HINT)
    if status in (404, 405):
        return ServerError(url, f"has no {path} (HTTP {status})", hint=PATH_HINT)
    return ServerError(url, f"answered {path} with HTTP {status}{detail}", hint="check the server's log")


def _error_detail(body: str) -> str:
    """`: message` from an OpenAI-style error body, or from a short text body; '' otherwise."""
    try:
        data = json.loads(body)
        msg = data.get("error", data) if isinstance(data, dict) else data
        msg = msg.get("message", msg) if isinstance(msg, dict) else msg
        if isinstance(msg, (dict, list)):
            msg = data.get("detail", "") if isinstance(data, dict) else ""
    except (json.JSONDecodeError, AttributeError):
        msg = body
    text = " ".join(str(msg).split())[:160]
    return f": {text}" if text else ""


@dataclass(frozen=True)
class ServedModel:
    """What `/v1/models` (and `/version`) tell about the served model."""

    id: str
    max_model_len: int | None
    root: str | None  # vLLM: the model path or repo it loaded
    owned_by: str | None  # "vllm" for vLLM
    engine: str | None  # "vllm 0.32.0" from /version; None where unknown


class Connection:
    """An asyncio HTTP client bound to one server: base URL, bearer key, per-request limit."""

    def __init__(self, url: str, *, api_key: str | None = None, request_timeout: float = 300.0) -> None:
        self.base = normalize_url(url)
        self.url = display_url(self.base)
        self.request_timeout = request_timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> Connection:
        import httpx2

        self._client = httpx2.AsyncClient(
            base_url=self.base,
            headers=self._headers,
            timeout=httpx2.Timeout(self.request_timeout),
            # no keep-alive: a pooled connection the server closed while idle (uvicorn after 5 s, e.g.
            # while the baseline server's level runs) would fail the next request at random
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=0),
            follow_redirects=True,
            trust_env=True,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def client(self) -> httpx2.AsyncClient:
        assert self._client is not None, "use `async with Connection(...)`"
        return self._client

    async def get(self, path: str, *, optional: bool = False) -> tuple[int, str, dict[str, str]]:
        """GET `path`: (status, text, headers); an HTTP error status raises unless `optional`."""
        try:
            r = await self.client.get(path)
        except Exception as exc:
            raise translate(exc, self.url, f"GET {path}", self.request_timeout) from None
        if r.status_code >= 400 and not optional:
            raise status_error(self.url, path, r.status_code, r.text)
        return r.status_code, r.text, dict(r.headers)

    async def get_json(self, path: str) -> Any:
        _, text, _ = await self.get(path)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ServerError(
                self.url, f"answered {path} with something that is not JSON ({text[:60]!r})", hint=PATH_HINT
            ) from None

    async def speculative_config(self) -> dict[str, Any] | None:
        """The served speculative config from vLLM's dev-mode `/server_info` (VLLM_SERVER_DEV_MODE=1;
        vLLM 0.32 `entrypoints/serve/dev/server_info/api_router.py`); None where it is not exposed."""
        status, text, _ = await self.get("/server_info?config_format=json", optional=True)
        if status != 200:
            return None
        try:
            config = json.loads(text).get("vllm_config")
        except (json.JSONDecodeError, AttributeError):
            return None
        spec = config.get("speculative_config") if isinstance(config, dict) else None
        return spec if isinstance(spec, dict) else None

    async def model(self, name: str | None = None) -> ServedModel:
        """The served model from `/v1/models` (`name`, else the only one), its engine from `/version`."""
        data = await self.get_json("/v1/models")
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(x, dict) and isinstance(x.get("id"), str) for x in items):
            raise ServerError(
                self.url, "answered /v1/models without a model list (no data[].id)", hint="is it OpenAI-compatible?"
            )
        if not items:
            raise ServerError(self.url, "serves no model (/v1/models is empty)", hint="check the server's start-up log")
        ids = [x["id"] for x in items]
        if name is not None and name not in ids:
            raise ServerError(self.url, f"does not serve {name!r} (it serves {', '.join(ids)})", hint="fix the name")
        if name is None and len(items) > 1:
            raise ServerError(
                self.url, f"serves {len(items)} models ({', '.join(ids)})", hint="point at a server of one model"
            )
        card = items[ids.index(name)] if name is not None else items[0]
        mlen = card.get("max_model_len")
        status, text, headers = await self.get("/version", optional=True)
        engine = None
        if status == 200:
            try:
                version = json.loads(text).get("version")
                engine = f"vllm {version}" if version and card.get("owned_by") == "vllm" else None
            except (json.JSONDecodeError, AttributeError):
                engine = None
        if engine is None:  # what the model list, else the Server header, reveals
            owner = card.get("owned_by")
            engine = owner if isinstance(owner, str) and owner else headers.get("server")
        return ServedModel(
            card["id"],
            mlen if isinstance(mlen, int) else None,
            card.get("root") if isinstance(card.get("root"), str) else None,
            card.get("owned_by") if isinstance(card.get("owned_by"), str) else None,
            engine,
        )
