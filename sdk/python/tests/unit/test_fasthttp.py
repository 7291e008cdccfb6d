"""The lean HTTP/1.1 connections of the sync client's claim POST (_fasthttp), against a
local HTTP server: requests and answers, keep-alive reuse, threads sharing the pool, a
connection the server closed while idle, the cases it leaves to httpx, proxies and
credentials."""

from __future__ import annotations

import base64
import http.client
import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_sandbox_sdk import _fasthttp
from agent_sandbox_sdk._kubeconfig import KubeConfig


class Handler(http.server.BaseHTTPRequestHandler):
    """Records each request (under the server prefix /base) and answers {"ok":true}: 201,
    /fail 409; /close closes the connection after its answer; /big answers more than
    MAX_ANSWER; /hold waits for the test's event before answering."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, Any]]] = []
    hold: ClassVar[threading.Event] = threading.Event()
    drop: ClassVar[bool] = False  # close the connection without an answer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        port = self.client_address[1]
        self.seen.append({"path": self.path, "headers": dict(self.headers), "body": body, "port": port})
        what = self.path.removeprefix("/base")
        if self.drop:
            self.close_connection = True
            return
        if what == "/hold":
            self.hold.wait(5)
        out = b"x" * (_fasthttp.MAX_ANSWER + 1) if what == "/big" else b'{"ok":true}'
        out = b"m" * (2 << 20) if what == "/mid" else out
        self.send_response(409 if what == "/fail" else 201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if what == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self) -> None:
        """A scripted stream: the pieces in ``stream`` (raw bytes after the status line),
        each flushed, then the connection held until ``hold`` (when ``stall``)."""
        self.seen.append({"path": self.path, "headers": dict(self.headers), "port": self.client_address[1]})
        self.wfile.write(b"HTTP/1.1 " + self.stream_status + b"\r\n")
        for piece in self.stream:
            self.wfile.write(piece)
            self.wfile.flush()
            threading.Event().wait(0.005)
        if self.stall:
            self.hold.wait(5)
        self.close_connection = True

    stream: ClassVar[list[bytes]] = []
    stream_status: ClassVar[bytes] = b"200 OK"
    stall: ClassVar[bool] = False

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.ThreadingHTTPServer]:
    Handler.seen.clear()
    Handler.hold.clear()
    Handler.drop = False
    Handler.stream, Handler.stream_status, Handler.stall = [], b"200 OK", False
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    Handler.hold.set()
    srv.shutdown()
    srv.server_close()


def conn_for(
    srv: http.server.ThreadingHTTPServer, max_conns: int = 8, timeout: float = 5.0, **cfg: Any
) -> _fasthttp.FastPool:
    port = srv.server_address[1]
    kc = KubeConfig(server=f"http://127.0.0.1:{port}/base", **cfg)
    return _fasthttp.FastPool(kc, timeout, "test-agent", max_conns=max_conns)


def test_request_and_answer(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    a = fc.try_request("POST", "/apis/x", b'{"a":1}', "application/json")
    assert a == _fasthttp.Answer(201, "application/json", b'{"ok":true}')
    req = Handler.seen[0]
    assert req["path"] == "/base/apis/x" and req["body"] == b'{"a":1}'
    h = {k.lower(): v for k, v in req["headers"].items()}
    assert h["content-type"] == "application/json" and h["accept"] == "application/json"
    assert h["user-agent"] == "test-agent" and h["host"] == f"127.0.0.1:{server.server_address[1]}"
    assert "authorization" not in h
    fc.close()


@pytest.mark.parametrize("tls_context", [False, True], ids=["pool", "as KubeClient makes it"])
def test_keep_alive_reuses_one_connection(server: http.server.ThreadingHTTPServer, tls_context: bool) -> None:
    """Also with the TLS context the clients give the pool for an http:// server (its
    connections carry none): before, none was taken for the pool's, and each call made a
    new connection."""
    fc = conn_for(server)
    if tls_context:
        fc._ssl = ssl.create_default_context()
    for _ in range(5):
        assert fc.try_request("POST", "/a", b"{}", "application/json") is not None
    assert len({r["port"] for r in Handler.seen}) == 1
    assert fc.sent == 5 and fc.connects == 1
    fc.close()


def test_reconnects_after_the_server_closed(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    a = fc.try_request("POST", "/close", b"{}", "application/json")
    assert a is not None and a.status == 201
    b = fc.try_request("POST", "/a", b"{}", "application/json")
    assert b is not None and b.status == 201
    assert Handler.seen[0]["port"] != Handler.seen[1]["port"]
    assert fc.sent == 2 and fc.connects == 2
    fc.close()


def test_error_status_is_an_answer(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    a = fc.try_request("POST", "/fail", b"{}", "application/json")
    assert a is not None and a.status == 409 and a.body == b'{"ok":true}'
    fc.close()


def held(fc: _fasthttp.FastPool, n: int) -> tuple[list[threading.Thread], list[_fasthttp.Answer | None]]:
    """n threads POSTing /hold at once; returns once the server has seen them all."""
    got: list[_fasthttp.Answer | None] = []
    threads = [
        threading.Thread(target=lambda: got.append(fc.try_request("POST", "/hold", b"{}", "application/json")))
        for _ in range(n)
    ]
    for t in threads:
        t.start()
    for _ in range(500):
        if len(Handler.seen) >= n:
            break
        threading.Event().wait(0.01)
    return threads, got


def test_threads_at_once_share_the_pool_and_wait_past_it(server: http.server.ThreadingHTTPServer) -> None:
    """Four threads at once on a pool of two: two requests go out, the other two wait and
    then reuse those connections."""
    fc = conn_for(server, max_conns=2)
    threads, got = held(fc, 2)
    late = [
        threading.Thread(target=lambda: got.append(fc.try_request("POST", "/a", b"{}", "application/json")))
        for _ in range(2)
    ]
    for t in late:
        t.start()
    threading.Event().wait(0.1)
    assert len(Handler.seen) == 2 and fc.connects == 2  # the late two wait for a connection
    Handler.hold.set()
    for t in threads + late:
        t.join(5)
    assert len(got) == 4 and all(a is not None and a.status == 201 for a in got)
    assert fc.connects == 2 and len({r["port"] for r in Handler.seen}) == 2 and fc.sent == 4
    fc.close()


def test_none_free_in_time_closed_and_oversized_are_left_to_httpx(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server, max_conns=1, timeout=0.3)
    assert fc.try_request("POST", "/a", b"x" * (_fasthttp.MAX_BODY + 1), "application/json") is None
    fc._open = 1  # the one connection is in use by a request that does not end
    t0 = time.monotonic()
    assert fc.try_request("POST", "/a", b"{}", "application/json") is None
    assert time.monotonic() - t0 >= 0.25 and not Handler.seen
    fc._open = 0
    assert fc.try_request("POST", "/a", b"{}", "application/json") is not None
    fc.close()
    assert fc.try_request("POST", "/a", b"{}", "application/json") is None
    assert fc._open == 0


def test_close_while_a_request_runs(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    assert fc.try_request("POST", "/a", b"{}", "application/json") is not None  # one idle connection
    threads, got = held(fc, 1)
    fc.close()
    Handler.hold.set()
    for t in threads:
        t.join(5)
    assert got and got[0] is not None and got[0].status == 201  # the request in flight finishes
    assert fc._open == 0 and not fc._idle  # and its connection is closed, not kept


def test_an_object_over_a_request_body_s_bound_is_an_answer(server: http.server.ThreadingHTTPServer) -> None:
    """A GET of one large object (2 MiB; etcd keeps up to 1.5 MiB, JSON adds to it) is
    read whole: the answer's bound is MAX_ANSWER, not the request's MAX_BODY."""
    fc = conn_for(server)
    a = fc.try_request("POST", "/mid", b"{}", "application/json")
    assert a is not None and a.status == 201 and len(a.body) == 2 << 20
    fc.close()


def test_oversized_answer_fails_and_drops_the_connection(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    with pytest.raises(http.client.HTTPException):
        fc.try_request("POST", "/big", b"{}", "application/json")
    a = fc.try_request("POST", "/a", b"{}", "application/json")
    assert a is not None and a.status == 201
    assert Handler.seen[0]["port"] != Handler.seen[1]["port"]
    fc.close()


def test_unreachable_server_is_left_to_httpx() -> None:
    fc = _fasthttp.FastPool(KubeConfig(server="http://127.0.0.1:1"), 2.0, "t")
    assert fc.try_request("POST", "/a", b"{}", "application/json") is None


def test_server_gone_after_the_request_raises(server: http.server.ThreadingHTTPServer) -> None:
    fc = conn_for(server)
    Handler.drop = True
    with pytest.raises((OSError, http.client.HTTPException)):
        fc.try_request("POST", "/a", b"{}", "application/json")
    Handler.drop = False
    a = fc.try_request("POST", "/a", b"{}", "application/json")
    assert a is not None and a.status == 201
    fc.close()


def test_credentials(server: http.server.ThreadingHTTPServer, tmp_path: Path) -> None:
    fc = conn_for(server, username="u", password="p:w")
    fc.try_request("POST", "/a", b"{}", "application/json")
    tok = tmp_path / "token"
    tok.write_text("t1\n")
    fc2 = conn_for(server, token_file=str(tok))
    fc2.try_request("POST", "/a", b"{}", "application/json")
    tok.write_text("t2\n")  # a rotated token is read again
    fc2.try_request("POST", "/a", b"{}", "application/json")
    auth = [{k.lower(): v for k, v in r["headers"].items()}["authorization"] for r in Handler.seen]
    assert auth == ["Basic " + base64.b64encode(b"u:p:w").decode(), "Bearer t1", "Bearer t2"]
    fc.close()
    fc2.close()


def test_auth_header_none_without_credentials() -> None:
    assert _fasthttp.auth_header(KubeConfig(server="https://h")) is None
    assert _fasthttp.auth_header(KubeConfig(server="https://h", token="abc")) == "Bearer abc"


PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.mark.parametrize(
    ("env", "server", "want"),
    [
        ({}, "https://10.0.0.1:6443", False),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "https://10.0.0.1:6443", True),
        ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.1"}, "https://10.0.0.1:6443", False),
        ({"HTTP_PROXY": "http://proxy:3128"}, "https://10.0.0.1:6443", False),
        ({"HTTP_PROXY": "http://proxy:3128"}, "http://10.0.0.1:8080", True),
        ({"ALL_PROXY": "http://proxy:3128"}, "https://api.example:443", True),
    ],
)
def test_a_proxy_leaves_it_to_httpx(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], server: str, want: bool
) -> None:
    for k in PROXY_VARS + tuple(v.lower() for v in PROXY_VARS):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _fasthttp.proxied(server) is want
    assert _fasthttp.FastPool(KubeConfig(server=server, insecure=True), 1.0, "t").usable is not want


CHUNKED = b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_stream_lines_across_chunks(server: http.server.ThreadingHTTPServer) -> None:
    Handler.stream = [CHUNKED, chunk(b'{"a":1}\n{"b"'), chunk(b":2}\n"), chunk(b'{"c":3}\n{"d":4}'), b"0\r\n\r\n"]
    fc = conn_for(server)
    ls = fc.open_stream("/w?watch=1", 5.0)
    assert ls is not None and ls.status_code == 200 and ls.content_type == "application/json"
    assert list(ls.iter_lines()) == ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']
    ls.close()
    req = Handler.seen[0]
    assert req["path"] == "/base/w?watch=1" and req["headers"]["User-Agent"] == "test-agent"
    assert fc._open == 0  # a stream's connection is its own, not the pool's
    fc.close()


def test_stream_error_body(server: http.server.ThreadingHTTPServer) -> None:
    body = b'{"kind":"Status","code":403}'
    Handler.stream_status = b"403 Forbidden"
    Handler.stream = [f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body]
    fc = conn_for(server)
    ls = fc.open_stream("/w", 5.0)
    assert ls is not None and ls.status_code == 403 and ls.read() == body
    ls.close()
    fc.close()


def test_stream_read_timeout_and_shutdown_end_the_lines_quietly(server: http.server.ThreadingHTTPServer) -> None:
    Handler.stream, Handler.stall = [CHUNKED, chunk(b'{"a":1}\n')], True
    fc = conn_for(server)
    ls = fc.open_stream("/w", 0.3)
    assert ls is not None
    t0 = time.monotonic()
    assert list(ls.iter_lines()) == ['{"a":1}']  # then nothing for 0.3 s
    assert 0.25 <= time.monotonic() - t0 < 3
    ls.close()
    ls = fc.open_stream("/w", 30.0)
    assert ls is not None
    lines = ls.iter_lines()
    assert next(lines) == '{"a":1}'
    threading.Timer(0.1, ls.shutdown).start()  # another thread ends it: the blocked read returns
    t0 = time.monotonic()
    assert list(lines) == [] and time.monotonic() - t0 < 3
    ls.close()
    fc.close()


@pytest.mark.parametrize(
    "pieces",
    [
        [CHUNKED, chunk(b'{"a":1}\n'), b"5\r\n{"],  # dropped inside a chunk
        [CHUNKED, b"zz\r\n"],  # a bad chunk size
        [b"Content-Length: 40\r\n\r\n", b'{"a":1}\n'],  # dropped inside the length
    ],
)
def test_stream_failures_raise(server: http.server.ThreadingHTTPServer, pieces: list[bytes]) -> None:
    Handler.stream = pieces
    fc = conn_for(server)
    ls = fc.open_stream("/w", 5.0)
    assert ls is not None
    with pytest.raises((OSError, http.client.HTTPException)):
        list(ls.iter_lines())
    ls.close()
    fc.close()


def test_stream_line_is_bounded(server: http.server.ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fasthttp, "MAX_LINE", 64)
    Handler.stream, Handler.stall = [CHUNKED, chunk(b'{"a":1}\n'), chunk(b"x" * 40), chunk(b"y" * 40)], True
    fc = conn_for(server)
    ls = fc.open_stream("/w", 5.0)
    assert ls is not None
    got: list[str] = []
    with pytest.raises(http.client.HTTPException, match="longer than 64"):
        for line in ls.iter_lines():
            got.append(line)
    assert got == ['{"a":1}']
    ls.close()
    fc.close()


def test_stream_left_to_httpx_when_unreachable_or_closed(server: http.server.ThreadingHTTPServer) -> None:
    gone = _fasthttp.FastPool(KubeConfig(server="http://127.0.0.1:1"), 2.0, "t")
    assert gone.open_stream("/w", 5.0) is None
    fc = conn_for(server)
    fc.close()
    assert fc.open_stream("/w", 5.0) is None


def test_a_connection_that_cannot_be_set_up_frees_its_slot(tmp_path: Path) -> None:
    cfg = KubeConfig(server="https://127.0.0.1:1", ca_file=str(tmp_path / "missing-ca.crt"))
    fc = _fasthttp.FastPool(cfg, 2.0, "t", max_conns=1)
    for _ in range(2):  # the one slot is free again after each failure
        with pytest.raises(OSError):
            fc.try_request("POST", "/a", b"{}", "application/json")
        assert fc._open == 0
