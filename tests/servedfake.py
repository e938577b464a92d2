"""A tiny OpenAI-compatible server with vLLM's spec-decode counters, for tests (stdlib, 127.0.0.1).

It serves `/v1/models`, `/version`, `/metrics` (Prometheus text, the counters it advances) and
streamed `/v1/completions` and `/v1/chat/completions` (server-sent events, chunked), so the real
`served` client runs against real sockets. Every request of N tokens runs as vLLM's chain does:
one token from prefill, then rounds of k drafts of which `accept` are accepted (accept + 1 tokens
a round, the last round cut at N). A `mode` makes it misbehave: `no-draft` (no counters),
`auth` (401 without the key), `html` (every path answers an HTML page), `notfound` (404 everywhere), `malformed-sse`, `stall`
(stops mid-stream; with `stall_after=N` only the requests after the first N), `restart` (counters reset during a request), `traffic` (extra drafts counted),
`frozen` (counters never move), `fail-some` (every third request 500), `burst` (the tokens are
produced on time but sent together at the end, as a buffering proxy or a starved client sees them).
`POST /tokenize` counts tokens as vLLM's does for each request kind (`count_prompt`: a token per
word, a BOS for raw text, a chat template's markers per message; `tokenize=False`: 404, a server
without it), and a completion's `usage.prompt_tokens` is that count. Like vLLM it records each finished request's decode time (engine clock: first to last
token produced) and tokens in `vllm:request_decode_time_seconds` / `vllm:request_generation_tokens`
(`histograms=False`: a server that exports neither).

    python tests/servedfake.py --port 0 --delay 0.01   # prints the URL, serves until killed
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "tiny-target"


class FakeServer:
    """Start with `start()` (or as a context manager); `url` is `http://127.0.0.1:PORT`."""

    def __init__(
        self,
        *,
        k: int | None = 3,
        accept: int = 2,
        mode: str = "ok",
        delay: float = 0.0,
        api_key: str | None = None,
        model: str = MODEL,
        max_model_len: int = 256,
        owned_by: str = "vllm",
        stall_after: int = 0,
        tls: tuple[str, str] | None = None,
        speculative: dict[str, Any] | None = None,
        histograms: bool = True,
        tokenize: bool = True,
    ) -> None:
        self.k, self.accept, self.mode, self.delay = k, accept, mode, delay
        self.api_key, self.model, self.max_model_len, self.owned_by = api_key, model, max_model_len, owned_by
        self.lock = threading.Lock()
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos = [0] * (k or 0)
        self.requests = 0
        self.histograms = histograms
        self.tokenize = tokenize
        self.tokenized = 0  # /tokenize requests answered
        self.finished, self.generated, self.decode_s = 0, 0, 0.0  # the decode histograms' _count, _sum, _sum
        self.bodies: list[dict[str, Any]] = []
        ThreadingHTTPServer.request_queue_size = 256  # C = 64 connecting at once (the default backlog is 5)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *_a: None  # a client that hung up is not a test failure
        self.stall_after = stall_after
        self.speculative = speculative  # served as vLLM's dev-mode /server_info when given
        scheme = "http"
        if tls is not None:  # (certificate file, key file): HTTPS with that (self-signed) certificate
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- the engine it pretends to be

    def rounds(self, n: int) -> list[int]:
        """Tokens accepted per round for an N-token request (after the prefill token)."""
        out, left = [], n - 1
        while left > 0 and self.k:
            a = min(self.accept, left - 1)
            out.append(a)
            left -= a + 1
        return out

    def count(self, accepted: int) -> None:
        if not self.k or self.mode == "frozen":
            return
        with self.lock:
            self.drafts += 1
            self.draft_tokens += self.k
            self.accepted += accepted
            for i in range(accepted):
                self.per_pos[i] += 1
            if self.mode == "traffic":
                self.drafts += 5
                self.accepted += 5 * self.k

    def metrics(self) -> str:
        lines = ["# HELP vllm:num_requests_running Number of requests.", "# TYPE vllm:num_requests_running gauge"]
        lab = f'engine="0",model_name="{self.model}"'
        lines.append(f"vllm:num_requests_running{{{lab}}} 0.0")
        if self.k:
            lines += [
                "# TYPE vllm:spec_decode_num_drafts counter",
                f"vllm:spec_decode_num_drafts_total{{{lab}}} {float(self.drafts)}",
                f"vllm:spec_decode_num_drafts_created{{{lab}}} 1.7e9",
                f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {float(self.draft_tokens)}",
                f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {float(self.accepted)}",
            ]
            lines += [
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {float(v)}'
                for i, v in enumerate(self.per_pos)
            ]
        if self.histograms:
            for name, total in (
                ("vllm:request_decode_time_seconds", self.decode_s),
                ("vllm:request_generation_tokens", float(self.generated)),
            ):
                lines += [
                    f"# TYPE {name} histogram",
                    f'{name}_bucket{{{lab},le="+Inf"}} {float(self.finished)}',
                    f"{name}_count{{{lab}}} {float(self.finished)}",
                    f"{name}_sum{{{lab}}} {total}",
                ]
        return "\n".join(lines) + "\n"

    @staticmethod
    def count_prompt(body: dict[str, Any]) -> int:
        """Prompt tokens of a chat (`messages`: 2 per message for its markers, 1 for the generation
        prompt) or raw (`prompt`: 1 for BOS with `add_special_tokens`) request: a token per word."""
        if "messages" in body:
            return sum(len(str(m.get("content", "")).split()) + 2 for m in body["messages"]) + 1
        return len(str(body.get("prompt", "")).split()) + int(body.get("add_special_tokens", True))

    def finish(self, tokens: int, decode_s: float) -> None:
        with self.lock:
            self.finished += 1
            self.generated += tokens
            self.decode_s += decode_s


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: str, ctype: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if server.mode != "auth" or self.headers.get("Authorization") == f"Bearer {server.api_key}":
                return True
            self._send(401, json.dumps({"error": {"message": "Unauthorized", "type": "auth"}}))
            return False

        def do_GET(self) -> None:
            if server.mode == "html":
                return self._send(200, "<html>welcome</html>", "text/html")
            if server.mode == "notfound":
                return self._send(404, json.dumps({"detail": "Not Found"}))
            if not self._authorized():
                return None
            if self.path == "/v1/models":
                card = {
                    "id": server.model,
                    "object": "model",
                    "owned_by": server.owned_by,
                    "root": f"/models/{server.model}",
                    "max_model_len": server.max_model_len,
                }
                return self._send(200, json.dumps({"object": "list", "data": [card]}))
            if self.path == "/server_info?config_format=json" and server.speculative is not None:
                info = {"vllm_config": {"speculative_config": server.speculative}, "vllm_env": {}, "system_env": {}}
                return self._send(200, json.dumps(info))
            if self.path == "/version" and server.owned_by == "vllm":
                return self._send(200, json.dumps({"version": "0.32.0"}))
            if self.path == "/metrics" and server.owned_by == "vllm":
                return self._send(200, server.metrics(), "text/plain; version=0.0.4")
            return self._send(404, json.dumps({"detail": "Not Found"}))

        def _chunk(self, payload: str) -> None:
            data = payload.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if server.mode == "html":
                return self._send(200, "<html>welcome</html>", "text/html")
            if not self._authorized():
                return None
            if self.path == "/tokenize" and server.tokenize:
                with server.lock:
                    server.tokenized += 1
                n = server.count_prompt(body)
                return self._send(
                    200, json.dumps({"count": n, "max_model_len": server.max_model_len, "tokens": [1] * n})
                )
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                return self._send(404, json.dumps({"detail": "Not Found"}))
            with server.lock:
                server.requests += 1
                nth = server.requests
                server.bodies.append(body)
            if server.mode == "fail-some" and nth % 3 == 0:
                return self._send(500, json.dumps({"error": {"message": "engine overloaded"}}))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            n = int(body.get("max_tokens", 16))
            chat = self.path.endswith("chat/completions")
            prompt = server.count_prompt(body)
            done = 0

            def emit(tokens: int) -> None:
                text = "".join(f" t{done - tokens + i}" for i in range(tokens))
                choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
                usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
                self._chunk(f"data: {json.dumps({'choices': [choice], 'usage': usage})}\n\n")

            try:
                time.sleep(server.delay)
                done = 1
                held: list[int] = []  # burst: every chunk, the first token's too, sent at the end
                if server.mode == "burst":
                    held.append(1)
                    done = 0
                else:
                    emit(1)
                first = last = time.monotonic()
                for i, a in enumerate(server.rounds(n) if server.k else [0] * (n - 1)):
                    if server.mode == "stall" and i == 1 and nth > server.stall_after:
                        time.sleep(30)
                    if server.mode == "malformed-sse" and i == 1:
                        self._chunk("data: {not json\n\n")
                        break
                    if server.mode == "restart" and i == 1:
                        with server.lock:
                            server.drafts = server.draft_tokens = server.accepted = 0
                            server.per_pos = [0] * (server.k or 0)
                    time.sleep(server.delay)
                    server.count(a)
                    last = time.monotonic()
                    if server.mode == "burst":
                        held.append(a + 1)
                        continue
                    done += a + 1
                    emit(a + 1)
                for tokens in held:
                    done += tokens
                    emit(tokens)
                self._chunk("data: [DONE]\n\n")
                self._chunk("")
                server.finish(done, last - first)  # as vLLM: recorded after the stream's last chunk
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None

    return Handler


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--k", type=int, default=3)
    args = p.parse_args()
    server = FakeServer(k=args.k, delay=args.delay)
    print(server.url, flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
