"""The async client's lean connection pool for claim POSTs (_fasthttp_async), against a
local asyncio server that answers with scripted bytes: requests and answers in each
framing (Content-Length, chunked, up to EOF), keep-alive reuse and the pool's bound,
connections the server closed, malformed or oversized answers, timeouts, cancellation,
and the cases it leaves to httpx."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_sandbox_sdk import _fasthttp_async
from agent_sandbox_sdk._fasthttp import MAX_ANSWER, MAX_BODY, Answer
from agent_sandbox_sdk._kubeconfig import KubeConfig

OK = b'{"ok":true}'


def plain(status: int = 201, body: bytes = OK, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def chunked(*chunks: bytes, trailer: str = "") -> bytes:
    out = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    for c in chunks:
        out += f"{len(c):x}\r\n".encode() + c + b"\r\n"
    return out + b"0\r\n" + trailer.encode() + b"\r\n"


@dataclass
class Server:
    """Reads each request (head and Content-Length body) and answers with what
    ``answers`` maps its path to (bytes; b"" closes without an answer; "hold" waits for
    ``release``; a list is written piece by piece); a path it does not know gets plain().
    ``close_after`` paths close the connection after their answer, ``stall`` paths hold
    it open until ``release``."""

    port: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, bytes | str | list[bytes]] = field(default_factory=dict)
    stall: set[str] = field(default_factory=set)  # paths whose answer then never ends
    close_after: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    conns: int = 0

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.conns += 1
        conn_id = self.conns
        try:
            while True:
                try:
                    head = await r.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await r.readexactly(int(hdrs.get("content-length", "0")))
                what = path.removeprefix("/base").split("?", 1)[0]
                self.seen.append({"method": method, "path": path, "headers": hdrs, "body": body, "conn": conn_id})
                ans = self.answers.get(what, plain())
                if ans == "hold":
                    await self.release.wait()
                    ans = plain()
                if isinstance(ans, list):
                    for piece in ans:
                        w.write(piece)
                        await w.drain()
                        await asyncio.sleep(0.005)
                    ans = b""
                    if what in self.stall:
                        await self.release.wait()
                assert isinstance(ans, bytes)
                if not ans:
                    return
                w.write(ans)
                await w.drain()
                if what in self.close_after:
                    return
        except asyncio.CancelledError:
            return  # the test is over (a held or stalled answer)
        finally:
            w.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    s = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.port = s.sockets[0].getsockname()[1]
    yield srv
    srv.release.set()
    s.close()


def pool_for(srv: Server, max_conns: int = 4, timeout: float = 5.0, **cfg: Any) -> _fasthttp_async.AsyncFastPool:
    kc = KubeConfig(server=f"http://127.0.0.1:{srv.port}/base", **cfg)
    return _fasthttp_async.AsyncFastPool(kc, timeout, "test-agent", max_conns=max_conns)


async def post(p: _fasthttp_async.AsyncFastPool, path: str = "/a", body: bytes = b"{}") -> Answer | None:
    return await p.try_request("POST", path, body, "application/json")


async def test_request_and_answer(server: Server) -> None:
    p = pool_for(server)
    a = await post(p, "/apis/x", b'{"a":1}')
    assert a == Answer(201, "application/json", OK)
    req = server.seen[0]
    assert req["method"] == "POST" and req["path"] == "/base/apis/x" and req["body"] == b'{"a":1}'
    h = req["headers"]
    assert h["content-type"] == "application/json" and h["accept"] == "application/json"
    assert h["user-agent"] == "test-agent" and h["host"] == f"127.0.0.1:{server.port}"
    assert h["content-length"] == "7" and "authorization" not in h
    await p.aclose()


@pytest.mark.parametrize("tls_context", [False, True], ids=["pool", "as AsyncKubeClient makes it"])
async def test_keep_alive_reuses_one_connection(server: Server, tls_context: bool) -> None:
    """As the sync pool's: an http:// server's connections are reused with a TLS context
    given."""
    p = pool_for(server)
    if tls_context:
        p._ssl = ssl.create_default_context()
    for _ in range(5):
        assert await post(p) is not None
    assert {r["conn"] for r in server.seen} == {1}
    assert p.sent == 5 and p.connects == 1
    await p.aclose()


async def test_requests_at_once_open_up_to_the_bound_then_wait(server: Server) -> None:
    """Six at once on a pool of four: four go out on four connections, two wait for one
    of them; afterwards the four are reused."""
    server.answers["/hold"] = "hold"
    p = pool_for(server, max_conns=4)
    tasks = [asyncio.create_task(post(p, "/hold")) for _ in range(6)]
    while len(server.seen) < 4:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert len(server.seen) == 4 and len(p._waiting) == 2 and p.connects == 4
    server.release.set()
    got = await asyncio.gather(*tasks)
    assert all(a is not None and a.status == 201 for a in got)
    assert p.connects == 4 and not p._waiting
    for _ in range(8):
        assert await post(p) is not None
    assert p.connects == 4 and server.conns == 4 and p.sent == 14
    await p.aclose()


async def test_no_connection_free_in_time_is_left_to_httpx(server: Server) -> None:
    p = pool_for(server, max_conns=1, timeout=0.3)
    p._open = 1  # the one connection is in use by a request that does not end
    t0 = asyncio.get_running_loop().time()
    assert await post(p) is None and not p._waiting
    assert asyncio.get_running_loop().time() - t0 >= 0.25
    p._open = 0
    assert await post(p) is not None and p._open == 1
    await p.aclose()


async def test_a_request_that_times_out_frees_its_connection_for_a_waiter(server: Server) -> None:
    server.answers["/hold"] = "hold"
    p = pool_for(server, max_conns=1, timeout=0.3)
    first = asyncio.create_task(post(p, "/hold"))
    while not server.seen:
        await asyncio.sleep(0.01)
    second = asyncio.create_task(post(p))
    with pytest.raises(asyncio.TimeoutError):
        await first
    a = await second  # woken when the first's connection closed: a new one carries it
    assert a is not None and a.status == 201 and p.connects == 2 and p._open == 1
    server.release.set()
    await p.aclose()


async def test_waiting_requests_end_at_aclose_and_at_cancel(server: Server) -> None:
    server.answers["/hold"] = "hold"
    p = pool_for(server, max_conns=1)
    first = asyncio.create_task(post(p, "/hold"))
    while not server.seen:
        await asyncio.sleep(0.01)
    cancelled = asyncio.create_task(post(p))
    waiting = asyncio.create_task(post(p))
    await asyncio.sleep(0.05)
    assert len(p._waiting) == 2
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(p._waiting) == 1
    await p.aclose()
    assert await asyncio.wait_for(waiting, 2) is None  # left to httpx: the pool is closed
    server.release.set()
    a = await first
    assert a is not None and p._open == 0


async def test_chunked_answer_with_trailers(server: Server) -> None:
    server.answers["/c"] = chunked(b'{"ok"', b":true}", trailer="X-T: 1\r\n")
    p = pool_for(server)
    a = await post(p, "/c")
    assert a == Answer(201, "application/json", OK)
    assert await post(p) is not None and p.connects == 1  # the framing left the stream in step
    await p.aclose()


async def test_answer_up_to_eof_is_not_kept(server: Server) -> None:
    server.answers["/eof"] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + OK
    server.close_after.add("/eof")
    p = pool_for(server)
    assert await post(p, "/eof") == Answer(200, "application/json", OK)
    assert await post(p) is not None
    assert p.connects == 2
    await p.aclose()


async def test_informational_answer_is_skipped(server: Server) -> None:
    server.answers["/i"] = b"HTTP/1.1 100 Continue\r\n\r\n" + plain(409)
    p = pool_for(server)
    a = await post(p, "/i")
    assert a is not None and a.status == 409 and a.body == OK
    await p.aclose()


async def test_connection_close_and_a_server_close_while_idle(server: Server) -> None:
    server.answers["/close"] = plain(extra="Connection: close\r\n")
    server.close_after.add("/close")
    server.close_after.add("/idle-close")
    p = pool_for(server)
    assert await post(p, "/close") is not None
    assert await post(p, "/idle-close") is not None  # kept by the pool; the server then closes it
    await asyncio.sleep(0.05)
    assert await post(p) is not None
    assert [r["conn"] for r in server.seen] == [1, 2, 3]
    assert p.connects == 3 and p.sent == 3
    await p.aclose()


@pytest.mark.parametrize(
    "answer",
    [
        b"",  # closed without an answer
        b"HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{}",  # closed mid-body
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 20x OK\r\n\r\n",
        b"HTTP/1.1 201 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 201 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 201 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"HTTP/1.1 201 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 201 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 201 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n",
        b"HTTP/1.1 201 OK\r\n" + b"X: y\r\n" * (_fasthttp_async.MAX_HEAD_LINES + 1) + b"\r\n",
        b"HTTP/1.1 201 OK\r\nX: " + b"y" * (_fasthttp_async.MAX_HEAD_LINE + 1) + b"\r\n\r\n",
        f"HTTP/1.1 201 OK\r\nContent-Length: {MAX_ANSWER + 1}\r\n\r\n".encode(),
        b"HTTP/1.1 201 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + f"{MAX_ANSWER + 1:x}\r\n".encode(),
    ],
)
async def test_bad_answers_fail_and_drop_the_connection(server: Server, answer: bytes) -> None:
    server.answers["/bad"] = answer
    server.close_after.add("/bad")
    p = pool_for(server)
    with pytest.raises((OSError, _fasthttp_async.ProtocolError)):
        await post(p, "/bad")
    assert p._open == 0 and not p._idle
    a = await post(p)
    assert a is not None and a.status == 201 and p.connects == 2
    await p.aclose()


async def test_an_answer_to_eof_over_the_bound_fails(server: Server) -> None:
    server.answers["/big"] = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * (MAX_ANSWER + 1)
    server.close_after.add("/big")
    p = pool_for(server)
    with pytest.raises(_fasthttp_async.ProtocolError, match="larger than"):
        await post(p, "/big")
    await p.aclose()


async def test_timeout_and_cancellation_close_the_connection(server: Server) -> None:
    server.answers["/hold"] = "hold"
    p = pool_for(server, timeout=0.2)
    with pytest.raises(asyncio.TimeoutError):
        await post(p, "/hold")
    assert p._open == 0
    p2 = pool_for(server, timeout=5)
    t = asyncio.create_task(post(p2, "/hold"))
    while len(server.seen) < 2:
        await asyncio.sleep(0.01)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    assert p2._open == 0 and not p2._idle
    server.release.set()
    assert await post(p2) is not None
    await p.aclose()
    await p2.aclose()


async def test_closed_oversized_and_unreachable_are_left_to_httpx(server: Server) -> None:
    p = pool_for(server)
    assert await post(p, body=b"x" * (MAX_BODY + 1)) is None
    assert await post(p) is not None
    await p.aclose()
    assert await post(p) is None and p._open == 0
    gone = _fasthttp_async.AsyncFastPool(KubeConfig(server="http://127.0.0.1:1"), 2.0, "t")
    assert await post(gone) is None and gone._open == 0
    assert not _fasthttp_async.AsyncFastPool(KubeConfig(server="unix:///x"), 2.0, "t").usable


async def test_aclose_while_a_request_runs(server: Server) -> None:
    server.answers["/hold"] = "hold"
    p = pool_for(server)
    assert await post(p) is not None  # one idle connection
    t = asyncio.create_task(post(p, "/hold"))
    while len(server.seen) < 2:
        await asyncio.sleep(0.01)
    await p.aclose()
    server.release.set()
    a = await t
    assert a is not None and a.status == 201  # the request in flight finishes
    assert p._open == 0 and not p._idle  # and its connection is closed, not kept


async def test_credentials_and_header_injection(server: Server, tmp_path: Path) -> None:
    p = pool_for(server, username="u", password="p:w")
    await post(p)
    tok = tmp_path / "token"
    tok.write_text("t1\n")
    p2 = pool_for(server, token_file=str(tok))
    await post(p2)
    tok.write_text("t2\n")  # a rotated token is read again
    await post(p2)
    auth = [r["headers"]["authorization"] for r in server.seen]
    assert auth == ["Basic " + base64.b64encode(b"u:p:w").decode(), "Bearer t1", "Bearer t2"]
    tok.write_text("t3\r\nX-Evil: 1")
    with pytest.raises(ValueError, match="line break"):
        await post(p2)
    assert len(server.seen) == 3 and p2._open == 0
    await p.aclose()
    await p2.aclose()


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def read_all(ls: _fasthttp_async.LineStream) -> list[str]:
    return [line async for line in ls.lines()]


async def test_stream_lines_across_chunks(server: Server) -> None:
    """Lines split across chunks and several in one chunk come out whole; a GET carries
    no body headers."""
    pieces = [chunk(b'{"a":1}\n{"b"'), chunk(b":2}\n"), chunk(b'{"c":3}\n{"d":4}'), b"0\r\n\r\n"]
    server.answers["/w"] = [STREAM_HEAD, *pieces]
    p = pool_for(server)
    ls = await p.open_stream("/w?watch=1", 5.0)
    assert ls is not None and ls.status == 200 and ls.content_type == "application/json"
    assert await read_all(ls) == ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']
    ls.close()
    req = server.seen[0]
    assert req["method"] == "GET" and req["path"] == "/base/w?watch=1"
    assert "content-length" not in req["headers"] and "content-type" not in req["headers"]
    await p.aclose()


async def test_stream_framed_by_length_and_by_eof(server: Server) -> None:
    body = b'{"a":1}\n{"b":2}\n'
    server.answers["/len"] = [f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:5], body[5:]]
    server.answers["/eof"] = [b"HTTP/1.1 200 OK\r\n\r\n", body, b'{"c":3}']
    server.close_after.add("/eof")
    p = pool_for(server)
    for path, want in (("/len", ['{"a":1}', '{"b":2}']), ("/eof", ['{"a":1}', '{"b":2}', '{"c":3}'])):
        ls = await p.open_stream(path, 5.0)
        assert ls is not None
        assert await read_all(ls) == want
        ls.close()
    await p.aclose()


async def test_stream_error_status_body(server: Server) -> None:
    server.answers["/e"] = plain(403, b'{"kind":"Status","code":403}')
    p = pool_for(server)
    ls = await p.open_stream("/e", 5.0)
    assert ls is not None and ls.status == 403
    assert await ls.body() == b'{"kind":"Status","code":403}'
    ls.close()
    await p.aclose()


async def test_stream_deadline_ends_the_lines_quietly(server: Server) -> None:
    server.answers["/w"] = [STREAM_HEAD, chunk(b'{"a":1}\n')]
    server.stall.add("/w")
    p = pool_for(server)
    ls = await p.open_stream("/w", 0.3)
    assert ls is not None
    got: list[str] = []
    t0 = asyncio.get_running_loop().time()
    got = await asyncio.wait_for(read_all(ls), 5)
    assert got == ['{"a":1}'] and asyncio.get_running_loop().time() - t0 < 2
    ls.close()
    await p.aclose()


@pytest.mark.parametrize(
    "pieces",
    [
        [STREAM_HEAD, chunk(b'{"a":1}\n'), b"5\r\n{"],  # dropped inside a chunk
        [STREAM_HEAD, b"zz\r\n"],  # a bad chunk size
        [STREAM_HEAD, chunk(b'{"a":1}\n') + b"3\r\nabcX\r\n"],  # a chunk without its line end
        [b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n", b'{"a":1}\n'],  # dropped inside the length
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"],
    ],
)
async def test_stream_failures_raise(server: Server, pieces: list[bytes]) -> None:
    server.answers["/w"] = pieces
    server.close_after.add("/w")
    p = pool_for(server)
    ls = await p.open_stream("/w", 5.0)
    assert ls is not None
    with pytest.raises((OSError, _fasthttp_async.ProtocolError)):
        await read_all(ls)
    ls.close()
    await p.aclose()


async def test_stream_line_is_bounded(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fasthttp_async, "MAX_LINE", 64)
    server.answers["/w"] = [STREAM_HEAD, chunk(b'{"a":1}\n'), chunk(b"x" * 40), chunk(b"y" * 40)]
    server.stall.add("/w")
    p = pool_for(server)
    ls = await p.open_stream("/w", 5.0)
    assert ls is not None
    got: list[str] = []
    with pytest.raises(_fasthttp_async.ProtocolError, match="longer than 64"):
        async for line in ls.lines():
            got.append(line)
    assert got == ['{"a":1}']
    ls.close()
    server.release.set()
    await p.aclose()


async def test_stream_left_to_httpx_when_unreachable_or_closed(server: Server) -> None:
    gone = _fasthttp_async.AsyncFastPool(KubeConfig(server="http://127.0.0.1:1"), 2.0, "t")
    assert await gone.open_stream("/w", 5.0) is None
    p = pool_for(server)
    await p.aclose()
    assert await p.open_stream("/w", 5.0) is None


async def test_a_failed_connect_wakes_a_waiting_request() -> None:
    """Two at once on a pool of one with nothing listening: the second waits for the
    first's connection; when that fails it tries at once, not after the timeout."""
    p = _fasthttp_async.AsyncFastPool(KubeConfig(server="http://127.0.0.1:1"), 5.0, "t", max_conns=1)
    t0 = asyncio.get_running_loop().time()
    got = await asyncio.gather(post(p), post(p))
    assert got == [None, None] and p._open == 0 and not p._waiting
    assert asyncio.get_running_loop().time() - t0 < 2
