"""An in-memory fake of the few API server calls the SDK makes, and a scripted sandboxd,
both as httpx handlers (usable by sync and async clients through MockTransport); clients
and sandbox handles on them; and a local HTTP server that records what reaches it
(Recorder)."""

from __future__ import annotations

import base64
import contextlib
import copy
import http.server
import json
import posixpath
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import httpx

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    KubeConfig,
    PodProxyConnection,
    RouterConnection,
    Sandbox,
    SandboxClient,
)

SERVER = "https://kube.test"
_COLL = re.compile(r"^/apis/([^/]+)/v1beta1/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$")
_PROXY = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/:]+):(\d+)/proxy(/.*)$")

Hook = Callable[["FakeKube", str, dict[str, Any]], None]
Handler = Callable[[httpx.Request], httpx.Response]


class FakeKube:
    def __init__(self) -> None:
        self.store: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.events: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
        self.requests: list[httpx.Request] = []
        self.rv = 100
        self.on_create: Hook | None = None
        self.on_patch: Hook | None = None
        self.sandboxd: Callable[[httpx.Request, str], httpx.Response] | None = None

    # ---- helpers for tests ---------------------------------------------------------

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta["resourceVersion"] = str(self.rv)
        self.store[(resource, meta["namespace"], meta["name"])] = obj
        return obj

    def emit(self, resource: str, name: str, etype: str, obj: dict[str, Any]) -> None:
        self.events.setdefault((resource, name), []).append((etype, copy.deepcopy(obj)))

    def update(self, resource: str, name: str, status: dict[str, Any], ns: str = "default") -> dict[str, Any]:
        obj = copy.deepcopy(self.store[(resource, ns, name)])
        obj["status"] = status
        obj = self.put(resource, obj)
        self.emit(resource, name, "MODIFIED", obj)
        return obj

    def calls(self, method: str, pattern: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.url.path)]

    # ---- the handler ---------------------------------------------------------------

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.requests.append(req)
        m = _PROXY.match(req.url.path)
        if m:
            assert self.sandboxd is not None
            return self.sandboxd(req, m.group(4))
        m = _COLL.match(req.url.path)
        if not m:
            return _status(404, "NotFound", f"no route {req.url.path}")
        _, ns, resource, name = m.groups()
        if req.method == "POST":
            body = json.loads(req.content)
            body["metadata"]["namespace"] = ns
            if (resource, ns, body["metadata"]["name"]) in self.store:
                return _status(409, "AlreadyExists", "exists")
            obj = self.put(resource, body)
            if self.on_create:
                self.on_create(self, resource, obj)
            return httpx.Response(201, json=obj)
        if req.method == "GET" and name:
            obj = self.store.get((resource, ns, name))
            return httpx.Response(200, json=obj) if obj else _status(404, "NotFound", f"{name} not found")
        if req.method == "GET" and req.url.params.get("watch"):
            sel = req.url.params.get("fieldSelector", "")
            wname = sel.removeprefix("metadata.name=")
            evs = self.events.pop((resource, wname), [])
            lines = "".join(json.dumps({"type": t, "object": o}) + "\n" for t, o in evs)
            return httpx.Response(200, content=lines.encode())
        if req.method == "GET":
            items = [o for (r, n, _), o in self.store.items() if r == resource and n == ns]
            return httpx.Response(200, json={"items": items, "metadata": {"resourceVersion": str(self.rv)}})
        if req.method == "DELETE":
            obj = self.store.get((resource, ns, name))
            if obj is None:
                return _status(404, "NotFound", f"{name} not found")
            want = ((json.loads(req.content) if req.content else {}).get("preconditions") or {}).get("uid")
            if want and want != obj["metadata"].get("uid"):
                return _status(409, "Conflict", f"Precondition failed: UID in precondition: {want}")
            del self.store[(resource, ns, name)]
            self.emit(resource, name, "DELETED", obj)
            return httpx.Response(200, json={"kind": "Status", "status": "Success"})
        if req.method == "PATCH":
            obj = copy.deepcopy(self.store.get((resource, ns, name)) or {})
            if not obj:
                return _status(404, "NotFound", f"{name} not found")
            _merge(obj, json.loads(req.content))
            obj = self.put(resource, obj)
            if self.on_patch:
                self.on_patch(self, resource, obj)
            return httpx.Response(200, json=obj)
        return _status(405, "MethodNotAllowed", req.method)


def _merge(dst: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        elif v is None:
            dst.pop(k, None)
        else:
            dst[k] = v


def _status(code: int, reason: str, msg: str) -> httpx.Response:
    return httpx.Response(code, json={"kind": "Status", "status": "Failure", "reason": reason, "message": msg})


def ready(status: str = "True", reason: str = "Ready", message: str = "") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


class FakeSandboxd:
    """Answers the sandboxd calls the tests need; counts them by path. ``links`` maps a
    symlink's path to its target as stored (relative to the link's directory): stat
    describes the link, or with ``follow=true`` the file it leads to."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.hits: list[tuple[str, str]] = []
        self.requests: list[httpx.Request] = []
        self.fail: dict[tuple[str, str], list[int]] = {}

    def __call__(self, req: httpx.Request, path: str) -> httpx.Response:
        self.hits.append((req.method, path))
        self.requests.append(req)
        queued = self.fail.get((req.method, path))
        if queued:
            return httpx.Response(queued.pop(0), json={"code": "UNAVAILABLE", "message": "try again"})
        if path == "/v1/processes/run":
            body = json.loads(req.content)
            return httpx.Response(200, json={"stdout": f"ran {body['command']}", "stderr": "", "exit_code": 0})
        if path == "/v1/processes":
            lines = [
                {"type": "start", "id": 7, "pid": 42},
                {"type": "stdout", "data": base64.b64encode(b"hello ").decode()},
                {"type": "stderr", "data": base64.b64encode(b"warn").decode()},
                {"type": "stdout", "data": base64.b64encode(b"world").decode()},
                {"type": "exit", "exit_code": 3, "signal": 0, "timed_out": False},
            ]
            return httpx.Response(200, content="".join(json.dumps(x) + "\n" for x in lines).encode())
        if path.startswith("/v1/processes/7/"):
            return httpx.Response(204)
        if path.startswith("/v1/stat/"):
            return self._stat(req, path[len("/v1/stat/") :])
        if path.startswith("/v1/files/"):
            key = path[len("/v1/files/") :]
            if req.method == "PUT":
                self.files[key] = req.read()
                return httpx.Response(204)
            if key not in self.files:
                return httpx.Response(404, json={"code": "NOT_FOUND", "message": "open: not found"})
            if req.method == "HEAD":
                return httpx.Response(200)
            if req.method == "DELETE":
                del self.files[key]
                return httpx.Response(204)
            return httpx.Response(200, content=self.files[key])
        return httpx.Response(404, json={"code": "NOT_FOUND", "message": "no route"})

    def _stat(self, req: httpx.Request, key: str) -> httpx.Response:
        follow = req.url.params.get("follow", "false")
        if follow not in ("true", "false"):
            return httpx.Response(400, json={"code": "INVALID_ARGUMENT", "message": "follow must be a boolean"})
        if key in self.links and follow == "false":
            target = self.links[key]
            return httpx.Response(200, json={"path": "/" + key, "type": "symlink", "symlink_target": target})
        found, seen = key, 0
        while found in self.links and seen < 40:
            found, seen = posixpath.normpath(posixpath.join(posixpath.dirname(found), self.links[found])), seen + 1
        if found not in self.files:
            return httpx.Response(404, json={"code": "NOT_FOUND", "message": "stat: not found"})
        return httpx.Response(200, json={"path": "/" + key, "type": "file", "size": len(self.files[found])})


def config() -> KubeConfig:
    return KubeConfig(server=SERVER, namespace="default", token="t0k")


def sync_client(fake: FakeKube) -> SandboxClient:
    c = SandboxClient(config=config(), connection=PodProxyConnection(port=8080))
    c.kube.http.close()
    c.kube.http = httpx.Client(base_url=SERVER, transport=httpx.MockTransport(fake))
    return c


def async_client(fake: FakeKube) -> AsyncSandboxClient:
    c = AsyncSandboxClient(config=config(), connection=PodProxyConnection(port=8080))
    c.kube.http = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(fake))
    return c


def httpx_sync_client(fake: FakeKube) -> SandboxClient:
    """sync_client without the lean connections (the fake answers only httpx: a lean
    connection would first look up the fake's host name)."""
    c = sync_client(fake)
    c.kube._fast.usable = False
    return c


def httpx_async_client(fake: FakeKube) -> AsyncSandboxClient:
    c = async_client(fake)
    c.kube._fast.usable = False
    return c


ROUTER = RouterConnection(url="http://router.test", token="t")


def sync_sandbox(handler: Handler) -> Sandbox:
    """A handle on sandbox default/sb behind the router, whose sandboxd is handler."""
    c = SandboxClient(config=config(), connection=ROUTER)
    c.http = httpx.Client(transport=httpx.MockTransport(handler))
    return Sandbox(c, "default", "sb")


def async_sandbox(handler: Handler) -> AsyncSandbox:
    c = AsyncSandboxClient(config=config(), connection=ROUTER)
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AsyncSandbox(c, "default", "sb")


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]]  # set per server class

    def do_GET(self) -> None:
        self.seen.append({"method": "GET", "target": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        out = json.dumps({"kind": "Sandbox", "metadata": {"name": "a"}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_CONNECT(self) -> None:
        """A tunnel (an https request through a proxy): recorded and refused."""
        self.seen.append({"method": "CONNECT", "target": self.path})
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Recorder:
    """A threaded HTTP/1.1 server on host (127.0.0.1 unless told) that answers every GET
    with a small JSON object and records its request target (an absolute URI when it is
    asked as a proxy), Host and headers in ``seen``. Use as a context manager."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.seen: list[dict[str, str]] = []
        handler = type("Handler", (_RecordingHandler,), {"seen": self.seen})
        self.server = http.server.ThreadingHTTPServer((host, 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def silent_after(line: bytes) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (its URL is yielded) that answers every request
    with a chunked NDJSON stream holding line, then says nothing more and keeps the
    connection open: a quiet stream, or a half-open connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            conns.append(c)
            c.recv(65536)  # the request (small enough for one read)
            c.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(line):x}\r\n".encode()
                + line
                + b"\r\n"
            )

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for c in conns:
            c.close()
        srv.close()
