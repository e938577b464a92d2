"""The write side of the loopback hub (`hubserver.HubServer`): the endpoints `huggingface_hub`'s
`HfApi.create_repo`, `create_branch`, `create_commit` / `upload_folder` and `ModelCard.push_to_hub`
call (huggingface_hub 2.4, `hf_api.py`, `_commit_api.py`, `lfs.py`):

- `POST /api/repos/create` ({"name", "organization", "visibility"}; 409 when it exists),
- `POST /api/validate-yaml` (README front matter parsed with PyYAML, 400 with `errors` when invalid),
- `POST /api/models/{repo}/branch/{branch}` (from main, or `startingPoint`; 409 when it exists),
- `POST /api/models/{repo}/preupload/{rev}` (`lfs` for weight suffixes, `regular` otherwise),
- `POST /{repo}.git/info/lfs/objects/batch` + `PUT /lfs-upload/{oid}` (basic transfer, sha256 checked),
- `POST /api/models/{repo}/commit/{rev}` (NDJSON: header, file (base64), lfsFile, deletedFile;
  `?create_pr=1` commits to a new `refs/pr/N` and answers a discussions URL).

Every commit makes a new revision folder under the server's storage, so the read endpoints serve
what was pushed. With a `token`, writes need `Authorization: Bearer <token>`. Clients must send
`HF_HUB_DISABLE_XET` (no Xet protocol here): the legacy LFS path is what this server speaks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from hubserver import HubServer

LFS_CONTENT_TYPE = "application/vnd.git-lfs+json"


def read_body(handler: Any) -> bytes:
    """The request body: Content-Length or chunked transfer encoding."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else b""


def handle(handler: Any, server: HubServer, method: str, error: type[Exception]) -> None:
    """Dispatch one write request; `error(status, code, message)` is hubserver's error type."""
    url = urlsplit(handler.path)
    path, query = url.path, parse_qs(url.query)
    body = read_body(handler)
    if method == "PUT" and path.startswith("/lfs-upload/"):  # a presigned URL, as on S3: no token sent
        return _lfs_upload(handler, server, path.rsplit("/", 1)[1], body, error)
    token = server.token
    if token is not None and handler.headers.get("Authorization") != f"Bearer {token}":
        raise error(401, None, "Invalid credentials in Authorization header")
    if path == "/api/repos/create":
        return _create_repo(handler, server, json.loads(body or b"{}"), error)
    if path == "/api/validate-yaml":
        return _validate_yaml(handler, json.loads(body or b"{}"))
    if path.endswith(".git/info/lfs/objects/batch"):
        return _lfs_batch(handler, server, json.loads(body or b"{}"))
    if path.startswith("/api/models/"):
        parts = path[len("/api/models/") :].split("/")
        if len(parts) >= 4:
            repo = handler._repo("/".join(parts[:2]))
            action, rev = parts[2], unquote("/".join(parts[3:]))
            if action == "preupload":
                return _preupload(handler, json.loads(body or b"{}"))
            if action == "commit":
                return _commit(handler, server, repo, rev, body, query.get("create_pr", ["0"])[0] == "1", error)
            if action == "branch":
                return _branch(handler, server, repo, rev, json.loads(body or b"{}"), error)
    raise error(404, None, "Not Found")


def _create_repo(handler: Any, server: HubServer, payload: dict, error: type[Exception]) -> None:
    repo_id = f"{payload.get('organization')}/{payload.get('name')}"
    url = f"{server.endpoint}/{repo_id}"
    if repo_id in server.repos:  # the hub's 409 carries the url too: create_repo(exist_ok=True) reads it
        handler._json(
            409,
            {"error": "You already created this model repo", "url": url},
            False,
            {"X-Error-Message": "You already created this model repo"},
        )
        return
    server.create_repo(repo_id, private=payload.get("visibility") == "private")
    handler._json(200, {"url": url, "name": repo_id, "id": repo_id}, False)


def _validate_yaml(handler: Any, payload: dict) -> None:
    import yaml

    content = payload.get("content", "")
    errors = []
    if content.startswith("---"):
        head = content.split("---", 2)
        try:
            if len(head) < 3 or not isinstance(yaml.safe_load(head[1]) or {}, dict):
                errors.append({"message": "metadata is not a YAML mapping between --- lines"})
        except yaml.YAMLError as exc:
            errors.append({"message": f"invalid YAML: {exc}"})
    handler._json(
        400 if errors else 200,
        {"errors": errors, "warnings": []},
        False,
        {"X-Error-Code": "BadRequest"} if errors else None,
    )


def _preupload(handler: Any, payload: dict) -> None:
    from hubserver import LFS_SUFFIXES

    files = [
        {
            "path": f["path"],
            "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
            "shouldIgnore": False,
            "oid": None,
        }
        for f in payload.get("files", [])
    ]
    handler._json(200, {"files": files}, False)


def _lfs_batch(handler: Any, server: HubServer, payload: dict) -> None:
    objects = []
    for obj in payload.get("objects", []):
        entry = {"oid": obj["oid"], "size": obj["size"]}
        if obj["oid"] not in server.lfs:
            entry["actions"] = {"upload": {"href": f"{server.endpoint}/lfs-upload/{obj['oid']}", "header": {}}}
        objects.append(entry)
    body = json.dumps({"transfer": "basic", "objects": objects}).encode()
    handler._send(200, {"Content-Type": LFS_CONTENT_TYPE}, body, False)


def _lfs_upload(handler: Any, server: HubServer, oid: str, body: bytes, error: type[Exception]) -> None:
    if hashlib.sha256(body).hexdigest() != oid:
        raise error(400, None, f"sha256 mismatch for {oid}")
    server.lfs[oid] = server.store_blob(body)
    handler._send(200, {}, b"", False)


def _branch(handler: Any, server: HubServer, repo: Any, branch: str, payload: dict, error: type[Exception]) -> None:
    if branch in repo.revisions:
        raise error(409, None, f"Reference refs/heads/{branch} already exists")
    start = handler._revision(repo, payload.get("startingPoint") or "main")
    server.add_revision(repo.repo_id, branch, start.root)
    handler._json(200, {}, False)


def _commit(
    handler: Any, server: HubServer, repo: Any, rev: str, body: bytes, create_pr: bool, error: type[Exception]
) -> None:
    base = handler._revision(repo, rev)
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    header = next((x["value"] for x in lines if x.get("key") == "header"), {})
    root = server.new_revision_folder(repo.repo_id, base.root)
    for item in lines:
        key, value = item.get("key"), item.get("value", {})
        if key == "header":
            continue
        target = root / value["path"]
        if ".." in Path(value["path"]).parts:
            raise error(400, None, f"bad path {value['path']}")
        if key == "file":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(value["content"]))
        elif key == "lfsFile":
            blob = server.lfs.get(value["oid"])
            if blob is None:
                raise error(400, None, f"LFS object {value['oid']} was never uploaded")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(blob, target)
        elif key in ("deletedFile", "deletedFolder"):
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        else:
            raise error(400, None, f"unknown commit operation {key!r}")
    branch = f"refs/pr/{server.next_pr(repo.repo_id)}" if create_pr else base.name
    commit = server.add_revision(repo.repo_id, branch, root, summary=header.get("summary", ""))
    out = {
        "commitUrl": f"{server.endpoint}/{repo.repo_id}/commit/{commit}",
        "commitOid": commit,
        "pullRequestUrl": (
            f"{server.endpoint}/{repo.repo_id}/discussions/{branch.rsplit('/', 1)[1]}" if create_pr else None
        ),
    }
    handler._json(200, out, False)
