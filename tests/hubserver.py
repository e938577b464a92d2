"""A tiny Hugging Face Hub-compatible HTTP server for tests (stdlib only, 127.0.0.1, ephemeral port).

It serves fixture repos from local folders through the endpoints that `eagle_convert.io.hub.HubSource`
and `huggingface_hub` use, so tests run the real client against it (set `HF_ENDPOINT` to
`server.endpoint`):

- `GET /api/models/{repo}` and `GET /api/models/{repo}/revision/{rev}` (model info; `?blobs=1`
  adds file sizes / LFS metadata to `siblings`),
- `GET /api/models/{repo}/tree/{rev}[/{path}]` (recursive listing; one page),
- `HEAD` / `GET /{repo}/resolve/{rev}/{path}` with `X-Repo-Commit`, `ETag` (+ `X-Linked-Etag` and
  `X-Linked-Size` for LFS-like files), `Content-Length`, `Accept-Ranges`; `Range: bytes=a-b`,
  `bytes=a-` and `bytes=-n` are answered with 206 + `Content-Range` (416 when unsatisfiable);
  with `ranges=False` the Range header is ignored and the whole file comes back with 200, as from
  a server or proxy without range support.

Errors carry the `X-Error-Code` header that `huggingface_hub.utils.hf_raise_for_status` maps to its
exception classes: 404 `RepoNotFound` / `RevisionNotFound` / `EntryNotFound`; gated repos answer
file downloads with 401 (no token) or 403 (wrong token) and `GatedRepo`, like the real hub, while
their model info stays public. Private repos answer everything with 401 `RepoNotFound` unless the
right token is sent.

Repos are given as `{"org/name": folder}` (revision `main`) plus `{"org/name@rev": folder}` for
more revisions. Each revision gets a stable fake 40-hex commit sha, accepted as a revision too.
The write endpoints (create repo, branch, preupload, LFS, commit) live in `hubwrite.py`; pushed
revisions are stored in a temp folder of the server's, removed by `stop`.
Bytes of file content sent (GET bodies only) are counted per `"org/name/path"` in `bytes_served`;
every request is logged in `requests` as `Request(method, path, range, status)`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


class Request(NamedTuple):
    method: str
    path: str
    range: str | None  # the Range header, if any
    status: int


@dataclass
class _Revision:
    name: str
    commit: str
    root: Path


@dataclass
class _Repo:
    repo_id: str
    revisions: dict[str, _Revision] = field(default_factory=dict)

    def find(self, rev: str) -> _Revision | None:
        if rev in self.revisions:
            return self.revisions[rev]
        for r in self.revisions.values():
            if r.commit == rev:
                return r
        return None


def _fake_commit(repo_id: str, rev: str) -> str:
    return hashlib.sha1(f"{repo_id}@{rev}".encode()).hexdigest()


def _files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(root)
        for f in filenames:
            if not f.startswith("."):
                out.append((rel / f).as_posix() if str(rel) != "." else f)
    return sorted(out)


class HubServer:
    """The running server: `endpoint`, `bytes_served`, `requests`; see the module docstring."""

    def __init__(
        self,
        repos: dict[str, Path],
        gated: set[str] | frozenset[str] = frozenset(),
        private: set[str] | frozenset[str] = frozenset(),
        token: str | None = None,
        ranges: bool = True,
    ) -> None:
        self.repos: dict[str, _Repo] = {}
        self.ranges = ranges
        for key, folder in repos.items():
            repo_id, _, rev = key.partition("@")
            rev = rev or "main"
            repo = self.repos.setdefault(repo_id, _Repo(repo_id))
            repo.revisions[rev] = _Revision(rev, _fake_commit(repo_id, rev), Path(folder))
        self.gated = set(gated)
        self.private = set(private)
        self.token = token
        self.bytes_served: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.lfs: dict[str, Path] = {}  # sha256 -> stored blob (pushed LFS objects)
        self.commits: list[tuple[str, str, str]] = []  # (repo, branch, summary) of every pushed commit
        self._storage: Path | None = None
        self._pushes = 0
        self._lock = threading.Lock()
        self._etags: dict[tuple[str, int, int], str] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="hubserver", daemon=True
        )

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        if self._storage is not None:
            shutil.rmtree(self._storage, ignore_errors=True)

    # -- pushed content (hubwrite.py) ------------------------------------------------------

    def _store(self) -> Path:
        with self._lock:
            if self._storage is None:
                self._storage = Path(tempfile.mkdtemp(prefix="hubserver-"))
            self._pushes += 1
            return self._storage / str(self._pushes)

    def create_repo(self, repo_id: str, *, private: bool = False) -> None:
        folder = self._store()
        folder.mkdir()
        self.repos[repo_id] = _Repo(repo_id, {"main": _Revision("main", _fake_commit(repo_id, "main"), folder)})
        if private:
            self.private.add(repo_id)

    def store_blob(self, data: bytes) -> Path:
        path = self._store()
        path.write_bytes(data)
        return path

    def new_revision_folder(self, repo_id: str, base: Path) -> Path:
        """A copy of `base` for the next commit to change."""
        folder = self._store()
        shutil.copytree(base, folder)
        return folder

    def add_revision(self, repo_id: str, branch: str, root: Path, summary: str = "") -> str:
        """Point `branch` at `root` as a new commit; returns its sha."""
        commit = hashlib.sha1(f"{repo_id}@{branch}#{len(self.commits)}:{root}".encode()).hexdigest()
        self.repos[repo_id].revisions[branch] = _Revision(branch, commit, root)
        self.commits.append((repo_id, branch, summary))
        return commit

    def next_pr(self, repo_id: str) -> int:
        return 1 + sum(1 for name in self.repos[repo_id].revisions if name.startswith("refs/pr/"))

    def served(self, repo_id: str, path: str) -> int:
        """Content bytes sent for one file of one repo."""
        return self.bytes_served[f"{repo_id}/{path}"]

    def reset_counts(self) -> None:
        with self._lock:
            self.bytes_served.clear()
            self.requests.clear()

    # -- helpers used by the handler -------------------------------------------------------

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _count(self, key: str, n: int) -> None:
        with self._lock:
            self.bytes_served[key] += n

    def file_meta(self, path: Path, name: str) -> dict:
        """size, git blob id, and (for LFS-like files) sha256, as the hub reports them."""
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        data = None
        with self._lock:
            cached = self._etags.get(key)
        if cached is None:
            data = path.read_bytes()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            sha256 = hashlib.sha256(data).hexdigest() if name.endswith(LFS_SUFFIXES) else ""
            cached = f"{blob}:{sha256}"
            with self._lock:
                self._etags[key] = cached
        blob, _, sha256 = cached.partition(":")
        meta: dict = {"size": st.st_size, "blob_id": blob}
        if sha256:
            meta["lfs"] = {"sha256": sha256, "size": st.st_size, "pointerSize": 134}
        return meta


class _HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.commit = status, code, message, commit


def _make_handler(server: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        # -- dispatch ---------------------------------------------------------------------

        def do_HEAD(self) -> None:  # noqa: N802
            self._dispatch(head=True)

        def do_GET(self) -> None:  # noqa: N802
            self._dispatch(head=False)

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch_write("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._dispatch_write("PUT")

        def _dispatch_write(self, method: str) -> None:
            import hubwrite

            try:
                hubwrite.handle(self, server, method, _HubError)
            except _HubError as err:
                self._error(err, False)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def send_response(self, code: int, message: str | None = None) -> None:
            # Logged before anything reaches the client, so a test never races the log.
            path = urlsplit(self.path).path
            server._record(Request(self.command, path, self.headers.get("Range"), code))
            super().send_response(code, message)

        def _dispatch(self, head: bool) -> None:
            url = urlsplit(self.path)
            try:
                if url.path.startswith("/api/models/"):
                    self._api(url.path[len("/api/models/") :], parse_qs(url.query), head)
                elif "/resolve/" in url.path:
                    self._resolve(url.path.lstrip("/"), head)
                else:
                    raise _HubError(404, None, "Not Found")
            except _HubError as err:
                self._error(err, head)
            except (BrokenPipeError, ConnectionResetError):
                pass

        # -- auth / lookup ----------------------------------------------------------------

        def _auth_ok(self) -> bool:
            auth = self.headers.get("Authorization", "")
            return server.token is not None and auth == f"Bearer {server.token}"

        def _repo(self, repo_id: str) -> _Repo:
            repo = server.repos.get(repo_id)
            if repo is None or (repo_id in server.private and not self._auth_ok()):
                status = 401 if self.headers.get("Authorization") is None else 404
                raise _HubError(status, "RepoNotFound", "Repository not found")
            return repo

        def _revision(self, repo: _Repo, rev: str) -> _Revision:
            found = repo.find(rev)
            if found is None:
                raise _HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return found

        def _check_gated(self, repo_id: str) -> None:
            if repo_id in server.gated and not self._auth_ok():
                status = 401 if self.headers.get("Authorization") is None else 403
                raise _HubError(
                    status,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be authenticated "
                    "to access it. Please log in.",
                )

        # -- /api/models ------------------------------------------------------------------

        def _api(self, rest: str, query: dict[str, list[str]], head: bool) -> None:
            parts = rest.split("/")
            if len(parts) < 2:
                raise _HubError(404, "RepoNotFound", "Repository not found")
            repo_id = "/".join(parts[:2])
            repo = self._repo(repo_id)
            tail = parts[2:]
            if not tail:
                return self._info(repo, repo.find("main") or next(iter(repo.revisions.values())), query, head)
            if tail[0] == "revision" and len(tail) >= 2:
                return self._info(repo, self._revision(repo, unquote("/".join(tail[1:]))), query, head)
            if tail[0] == "tree" and len(tail) >= 2:
                rev = self._revision(repo, unquote(tail[1]))
                prefix = unquote("/".join(tail[2:])).strip("/")
                return self._tree(repo, rev, prefix, head)
            raise _HubError(404, None, "Not Found")

        def _info(self, repo: _Repo, rev: _Revision, query: dict[str, list[str]], head: bool) -> None:
            blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
            siblings = []
            for name in _files(rev.root):
                entry: dict = {"rfilename": name}
                if blobs:
                    meta = server.file_meta(rev.root / name, name)
                    entry["size"] = meta["size"]
                    entry["blobId"] = meta["blob_id"]
                    if "lfs" in meta:
                        entry["lfs"] = meta["lfs"]
                siblings.append(entry)
            body = {
                "_id": repo.repo_id,
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": rev.commit,
                "private": repo.repo_id in server.private,
                "gated": "manual" if repo.repo_id in server.gated else False,
                "disabled": False,
                "tags": [],
                "siblings": siblings,
            }
            self._json(200, body, head, {"X-Repo-Commit": rev.commit})

        def _tree(self, repo: _Repo, rev: _Revision, prefix: str, head: bool) -> None:
            entries = []
            dirs: set[str] = set()
            for name in _files(rev.root):
                if prefix and not name.startswith(prefix + "/"):
                    continue
                parent = name.rsplit("/", 1)[0] if "/" in name else ""
                while parent and parent != prefix and parent not in dirs:
                    dirs.add(parent)
                    parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
                meta = server.file_meta(rev.root / name, name)
                entry: dict = {"type": "file", "oid": meta["blob_id"], "size": meta["size"], "path": name}
                if "lfs" in meta:
                    entry["lfs"] = {"oid": meta["lfs"]["sha256"], "size": meta["size"], "pointerSize": 134}
                entries.append(entry)
            entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(dirs)]
            self._json(200, entries, head, {"X-Repo-Commit": rev.commit})

        # -- /{repo}/resolve/{rev}/{path} -------------------------------------------------

        def _resolve(self, rest: str, head: bool) -> None:
            match = re.fullmatch(r"([^/]+/[^/]+)/resolve/([^/]+)/(.+)", rest)
            if match is None:
                raise _HubError(404, None, "Not Found")
            repo_id, rev_text, name = match.group(1), unquote(match.group(2)), unquote(match.group(3))
            repo = self._repo(repo_id)
            rev = self._revision(repo, rev_text)
            self._check_gated(repo_id)
            path = rev.root / name
            if ".." in Path(name).parts or not path.is_file() or any(p.startswith(".") for p in Path(name).parts):
                raise _HubError(404, "EntryNotFound", f'{name} does not exist on "{rev_text}"', rev.commit)
            meta = server.file_meta(path, name)
            size = meta["size"]
            etag = meta["lfs"]["sha256"] if "lfs" in meta else meta["blob_id"]
            headers = {
                "X-Repo-Commit": rev.commit,
                "ETag": f'"{etag}"',
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            if "lfs" in meta:
                headers["X-Linked-Etag"] = f'"{etag}"'
                headers["X-Linked-Size"] = str(size)
            start, end, status = 0, size - 1, 200
            rng = self.headers.get("Range") if server.ranges else None
            if rng is not None:
                parsed = _parse_range(rng, size)
                if parsed is None:
                    headers["Content-Range"] = f"bytes */{size}"
                    return self._send(416, headers, b"", head)
                start, end = parsed
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            length = max(0, end - start + 1)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            if head or length == 0:
                return
            key = f"{repo_id}/{name}"
            with open(path, "rb") as fh:
                fh.seek(start)
                left = length
                while left > 0:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    server._count(key, len(chunk))  # before the write: the client may return before we resume
                    self.wfile.write(chunk)
                    left -= len(chunk)

        # -- responses --------------------------------------------------------------------

        def _send(self, status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _json(self, status: int, value: object, head: bool, extra: dict[str, str] | None = None) -> None:
            headers = {"Content-Type": "application/json", **(extra or {})}
            self._send(status, headers, json.dumps(value).encode(), head)

        def _error(self, err: _HubError, head: bool) -> None:
            headers = {"X-Error-Message": err.message}
            if err.code:
                headers["X-Error-Code"] = err.code
            if err.commit:
                headers["X-Repo-Commit"] = err.commit
            self._json(err.status, {"error": err.message}, head, headers)

    return Handler


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """`bytes=a-b` / `bytes=a-` / `bytes=-n` -> inclusive (start, end), None if unsatisfiable."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):
        n = int(m.group(2))
        if n == 0 or size == 0:
            return None
        return max(0, size - n), size - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


@contextlib.contextmanager
def hub_server(
    repos: dict[str, Path],
    gated: set[str] | frozenset[str] = frozenset(),
    private: set[str] | frozenset[str] = frozenset(),
    token: str | None = None,
    ranges: bool = True,
) -> Iterator[HubServer]:
    """Run a `HubServer` for the duration of the block (see the module docstring)."""
    server = HubServer(repos, gated=gated, private=private, token=token, ranges=ranges).start()
    try:
        yield server
    finally:
        server.stop()
        # Drop huggingface_hub's pooled keep-alive connections to this server.
        try:
            from huggingface_hub.utils import close_session

            close_session()
        except ImportError:  # pragma: no cover - huggingface_hub is a test dependency
            pass


def _loopback_only(request) -> None:  # an httpx2 request hook
    if request.url.host not in ("127.0.0.1", "localhost"):
        raise AssertionError(f"test tried to reach {request.url}")


@contextlib.contextmanager
def isolated_hf_client(tmp_path: Path, monkeypatch) -> Iterator[None]:
    """Fresh HF cache per test, online, no token, and no request may leave the machine."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    # Import-time constants of the client: no telemetry lookups (its agent registry fetch would go to the
    # import-time endpoint), no token file from the real home, and no offline mode inherited from the shell.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))

    def factory():
        client = _http.default_client_factory()
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "request": [_loopback_only, *hooks.get("request", [])]}
        return client

    _http.set_client_factory(factory)
    try:
        yield
    finally:
        _http.set_client_factory(_http.default_client_factory)
