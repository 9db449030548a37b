"""A stand-in for the Hugging Face Hub on loopback: the parts of its HTTP API that staging and huggingface_hub's
own downloads use, with faults a test can inject.

- `GET /api/models/{repo}/revision/{revision}` (`?blobs=true` or not): the commit and, per file, its path, size,
  git blob id and, for LFS files, the SHA-256 and size of the content;
- `GET /api/models/{repo}/tree/{revision}`: every file and folder, as `list_repo_tree(recursive=True)` reads them;
- `GET` and `HEAD /{repo}/resolve/{revision}/{path}`: the bytes, with `Range`, `ETag` (the SHA-256 for LFS files,
  the git blob id for the others), `X-Repo-Commit` and, for LFS files, `X-Linked-Etag` and `X-Linked-Size`;
- refusals as the Hub words them: 401 for a gated repo without its token, 404 with `X-Error-Code`
  (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`).

Faults are queued per file path (or `LISTING`) and each request takes the next one: an HTTP status (`"401"`,
`"404"`, `"429"`, `"500"`, `"503"`), `"corrupt"` (right length, one byte changed), `"cut"` (half the bytes, then
the connection closes) or `"hold"` (half the bytes, then nothing until `release()`, then the connection closes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import re
import socketserver
import threading
import urllib.parse
from pathlib import Path

LISTING = "LISTING"
CHUNK = 1 << 20


@dataclasses.dataclass
class File:
    path: str
    content: bytes | Path
    lfs: bool

    @property
    def size(self) -> int:
        return len(self.content) if isinstance(self.content, bytes) else self.content.stat().st_size

    def read(self, start: int, end: int) -> bytes:
        if isinstance(self.content, bytes):
            return self.content[start:end]
        with self.content.open("rb") as f:
            f.seek(start)
            return f.read(end - start)

    def digest(self, name: str) -> str:
        h = hashlib.new(name)
        if name == "sha1":
            h.update(f"blob {self.size}\0".encode())
        if isinstance(self.content, bytes):
            h.update(self.content)
        else:
            with self.content.open("rb") as f:
                while block := f.read(CHUNK):
                    h.update(block)
        return h.hexdigest()


@dataclasses.dataclass
class Repo:
    repo_id: str
    commit: str
    files: list[File]
    branches: tuple[str, ...] = ("main",)
    token: str | None = None
    _etags: dict[str, str] = dataclasses.field(default_factory=dict)

    def etag(self, f: File) -> str:
        if f.path not in self._etags:
            self._etags[f.path] = f.digest("sha256" if f.lfs else "sha1")
        return self._etags[f.path]

    def file(self, path: str) -> File | None:
        return next((f for f in self.files if f.path == path), None)


def repo(repo_id: str, files: dict[str, bytes | Path], lfs_from: int = 1024, **kwargs) -> Repo:
    """A repo whose files at least `lfs_from` bytes long are LFS files, as the Hub's default `.gitattributes`
    makes weights."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    made = [File(p, c, (len(c) if isinstance(c, bytes) else c.stat().st_size) >= lfs_from) for p, c in files.items()]
    return Repo(repo_id, commit, made, **kwargs)


class HubStandIn:
    def __init__(self, *repos: Repo, host: str = "127.0.0.1"):
        self.repos = {r.repo_id: r for r in repos}
        self.faults: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.held = threading.Event()
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                standin._handle(self, body=False)

            def do_GET(self):
                standin._handle(self, body=True)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fault(self, key: str, *faults: str) -> None:
        with self._lock:
            self.faults.setdefault(key, []).extend(faults)

    def release(self) -> None:
        self._released.set()

    def ranges(self, path: str) -> list[str | None]:
        """The `Range` header of every GET of `path`'s bytes, in order."""
        with self._lock:
            return [r for m, p, r in self.requests if m == "GET" and p.endswith("/" + path) and "/resolve/" in p]

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def _next_fault(self, key: str) -> str | None:
        with self._lock:
            queue = self.faults.get(key)
            return queue.pop(0) if queue else None

    def _handle(self, h: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        with self._lock:
            self.requests.append((h.command, path, h.headers.get("Range")))
        tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", url.path)
        if tree:
            return self._tree(h, urllib.parse.unquote(tree[1]), urllib.parse.unquote(tree[2]),
                              urllib.parse.unquote(tree[3] or ""), body)
        listing = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", url.path)
        if listing:
            return self._listing(h, urllib.parse.unquote(listing[1]), urllib.parse.unquote(listing[2]), body)
        if path.startswith("/api/models/"):
            repo_id = "/".join(path.split("/")[3:5])
            return self._listing(h, repo_id, "main", body)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path)
        if resolve:
            return self._resolve(h, urllib.parse.unquote(resolve[1]), urllib.parse.unquote(resolve[2]),
                                 urllib.parse.unquote(resolve[3]), body)
        self._refuse(h, 404, "EntryNotFound", f"no route {path}", body)

    def _refuse(self, h, status: int, code: str | None, message: str, body: bool, retry_after: int | None = None):
        payload = json.dumps({"error": message}).encode()
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        if retry_after is not None:
            h.send_header("Retry-After", str(retry_after))
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        if body:
            h.wfile.write(payload)

    def _faulted(self, h, key: str, body: bool) -> str | None:
        """Answers a status fault and returns None, or returns the fault the caller must act out."""
        fault = self._next_fault(key)
        if fault is None or not fault.isdigit():
            return fault
        status = int(fault)
        code = {401: None, 404: "EntryNotFound"}.get(status)
        self._refuse(h, status, code, f"injected {status}", body, retry_after=1 if status == 429 else None)
        return "answered"

    def _check(self, h, repo_id: str, revision: str, body: bool) -> Repo | None:
        r = self.repos.get(repo_id)
        if r is None:
            # As the Hub: an unknown repo and a private one look the same to a caller without a token.
            self._refuse(h, 401 if not h.headers.get("Authorization") else 404, "RepoNotFound",
                         f"Repository Not Found for url: {h.path}", body)
            return None
        if r.token and h.headers.get("Authorization") != f"Bearer {r.token}":
            self._refuse(h, 401, "GatedRepo", f"Access to model {repo_id} is restricted: you must be authenticated",
                         body)
            return None
        if revision != r.commit and revision not in r.branches:
            self._refuse(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
            return None
        return r

    def _listing(self, h, repo_id: str, revision: str, body: bool) -> None:
        if self._faulted(h, LISTING, body) is not None:
            return
        r = self._check(h, repo_id, revision, body)
        if r is None:
            return
        siblings = []
        for f in r.files:
            entry = {"rfilename": f.path, "size": f.size}
            if f.lfs:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{r.etag(f)}\nsize {f.size}\n"
                entry["blobId"] = hashlib.sha1(f"blob {len(pointer)}\0{pointer}".encode()).hexdigest()
                entry["lfs"] = {"sha256": r.etag(f), "size": f.size, "pointerSize": len(pointer)}
            else:
                entry["blobId"] = r.etag(f)
            siblings.append(entry)
        self._json(h, {"id": r.repo_id, "modelId": r.repo_id, "sha": r.commit, "private": False,
                       "siblings": siblings}, body)

    @staticmethod
    def _json(h, value, body: bool) -> None:
        payload = json.dumps(value).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        if body:
            h.wfile.write(payload)

    def _tree(self, h, repo_id: str, revision: str, under: str, body: bool) -> None:
        """The repo's files (and folders) under `under`, every level at once, as huggingface_hub's
        `list_repo_tree(recursive=True)` reads them."""
        r = self._check(h, repo_id, revision, body)
        if r is None:
            return
        prefix = f"{under.rstrip('/')}/" if under else ""
        entries, folders = [], set()
        for f in r.files:
            if not f.path.startswith(prefix):
                continue
            parts = f.path.split("/")
            folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
            entry = {"type": "file", "oid": r.etag(f), "size": f.size, "path": f.path}
            if f.lfs:
                entry["lfs"] = {"oid": r.etag(f), "size": f.size, "pointerSize": 134}
            entries.append(entry)
        entries += [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
                    for d in sorted(folders) if d.startswith(prefix)]
        self._json(h, entries, body)

    def _resolve(self, h, repo_id: str, revision: str, path: str, body: bool) -> None:
        fault = self._faulted(h, path, body) if body else None
        if fault == "answered":
            return
        r = self._check(h, repo_id, revision, body)
        if r is None:
            return
        f = r.file(path)
        if f is None:
            self._refuse(h, 404, "EntryNotFound", f"{path} does not exist on {revision}", body)
            return
        size, start, end = f.size, 0, f.size
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", h.headers.get("Range") or "")
        if wanted:
            start = int(wanted[1])
            end = min(int(wanted[2]) + 1, size) if wanted[2] else size
            if start >= size:
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        h.send_response(206 if wanted else 200)
        h.send_header("Content-Length", str(end - start))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{r.etag(f)}"')
        h.send_header("X-Repo-Commit", r.commit)
        if f.lfs:
            h.send_header("X-Linked-Etag", f'"{r.etag(f)}"')
            h.send_header("X-Linked-Size", str(size))
        if wanted:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        if fault in ("cut", "hold"):
            h.send_header("Connection", "close")
        h.end_headers()
        if not body:
            return
        stop = start + (end - start) // 2 if fault in ("cut", "hold") else end
        self._send(h, f, start, stop, corrupt=fault == "corrupt")
        if fault == "hold":
            h.wfile.flush()
            self.held.set()
            self._released.wait(timeout=60)
        if fault in ("cut", "hold"):
            h.close_connection = True
            return

    def _send(self, h, f: File, start: int, stop: int, corrupt: bool) -> None:
        if isinstance(f.content, Path) and not corrupt:
            with f.content.open("rb") as source:
                offset = start
                while offset < stop:
                    sent = os.sendfile(h.wfile.fileno(), source.fileno(), offset, min(stop - offset, 1 << 24))
                    if sent == 0:
                        break
                    offset += sent
            return
        position = start
        while position < stop:
            block = f.read(position, min(stop, position + CHUNK))
            if corrupt and position == start:
                block = bytes([block[0] ^ 0xFF]) + block[1:]
            h.wfile.write(block)
            position += len(block)
