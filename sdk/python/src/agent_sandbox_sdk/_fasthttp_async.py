"""Lean keep-alive HTTP/1.1 connections for the async client's API calls (the twin of
_fasthttp for asyncio): the single-object ones, claims' POSTs among them, and watches.

httpx's async stack spends about as much CPU per request as its sync one above a plain
stream (request and response models, header validation, the auth, redirect and cookie
passes, anyio). A burst of claims from one client runs on the same cores as the API
server and the controller serving it, so those calls go through a small pool of
asyncio stream connections instead: each request takes an idle connection or opens one
(up to ``max_conns``; past that it waits for one to come free, at most the pool's
timeout), writes the request and reads the whole answer (Content-Length, chunked or up
to EOF, bounded by MAX_ANSWER). A watch gets a connection of its own (``open_stream``).
LISTs, and any call when the pool is closed, cannot connect, has no connection free in
time or a proxy applies, go through httpx.

Not thread-safe: one event loop uses a pool (as it uses one httpx.AsyncClient). Owns its
connections; ``aclose`` releases them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, Callable

from ._fasthttp import MAX_ANSWER, MAX_BODY, MAX_LINE, Answer, PoolBase, auth_header, take_lines
from ._kubeconfig import KubeConfig

MAX_HEAD_LINES = 128  # status line and header lines of one answer
MAX_HEAD_LINE = 16 << 10  # bytes in one of them (the stream's own limit, below)
# Connections per pool. 40 claims at once on one client, against the bench's API server
# (client CPU, API server + etcd CPU per claim, wall time of the 40): 8 connections
# 1.06 / 3.37 ms, 110 ms; 50 connections 3.26 / 5.00 ms, 273 ms; httpx 5.83 / 4.88 ms,
# 394 ms. Each new connection is a TLS handshake on both sides, and two cores are busy
# with 8 requests in flight; more only queue at the server.
DEFAULT_MAX_CONNS = 8


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 as expected (or exceeds a bound)."""


async def auth_header_async(cfg: KubeConfig) -> str | None:
    """auth_header for the event loop: an exec plugin that has to run runs in a worker
    thread (KubeConfig.bearer_token_async), once for the requests waiting on it."""
    if not cfg.exec_config or cfg.token or cfg.token_file or (cfg.username is not None and cfg.password is not None):
        return auth_header(cfg)
    tok = await cfg.bearer_token_async()
    return f"Bearer {tok}" if tok else None


class _Conn:
    """One connection: its streams and whether the server lets it be reused."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ctx: ssl.SSLContext | None = None
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.ctx = ctx  # the TLS context it was made with (None for plain http)
        self.expired = False  # closed by its stream's deadline, not by a failure

    def stale(self) -> bool:
        """True when the server closed it while idle, or sent what nobody asked for."""
        return self.reader.at_eof() or self.writer.is_closing() or bool(getattr(self.reader, "_buffer", b""))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class AsyncFastPool(PoolBase):
    """Keep-alive connections to cfg's API server for one event loop (arguments:
    PoolBase)."""

    def _setup(self) -> None:
        self._idle: list[_Conn] = []
        self._waiting: list[asyncio.Future[None]] = []  # requests waiting for a connection

    async def try_request(
        self,
        method: str,
        path: str,
        body: bytes,
        content_type: str,
        *,
        on_send: Callable[[], None] | None = None,
        deadline: float | None = None,
    ) -> Answer | None:
        """Sends one request and reads its whole answer; None when it was not sent: the
        pool is closed, the body is too large, no connection could be made (the caller
        then uses httpx, which retries connecting) or none came free within the timeout.
        Raises OSError, asyncio.TimeoutError or ProtocolError when the request failed
        once sent (its connection is then closed); a cancelled request closes its
        connection too. on_send is called once it has a connection, just before the
        request is written (a cancellation before that sent nothing). deadline (the
        loop's time()) bounds the whole call, the wait for a connection included
        (default: the timeout from now)."""
        if not self.usable or self._closed or len(body) > MAX_BODY:
            return None
        if deadline is None:
            deadline = asyncio.get_running_loop().time() + self._timeout
        auth = await auth_header_async(self._cfg)  # before a connection is taken: a plugin may run
        conn = await self._take(deadline)
        if conn is None:
            return None
        keep = False
        try:
            if on_send is not None:
                on_send()
            request = self._head(method, path, len(body), content_type, auth) + body
            ans, keep = await asyncio.wait_for(self._exchange(conn, request, method), self._left(deadline))
            self.sent += 1
            return ans
        finally:
            if keep and not self._closed:
                self._idle.append(conn)
            else:
                self._open -= 1
                conn.close()
            self._wake()

    async def open_stream(self, path: str, timeout: float) -> LineStream | None:
        """GETs path (with its query) on a connection of its own, for an answer read as
        lines (a watch), and reads the answer's head; None when no connection could be
        made (the caller then uses httpx). The connection is closed when the stream is, or
        after timeout (a watch the server should have ended by then: the lines just end).
        Raises OSError, asyncio.TimeoutError or ProtocolError when the request failed once
        sent."""
        if not self.usable or self._closed:
            return None
        head = self._head("GET", path, -1, "", await auth_header_async(self._cfg))
        try:
            conn = await asyncio.wait_for(self._connect(), self._timeout)
        except (OSError, asyncio.TimeoutError):
            return None
        self.connects += 1
        ls = LineStream(conn, asyncio.get_running_loop().call_later(timeout, self._expire, conn))
        try:
            conn.writer.write(head)
            await conn.writer.drain()
            status, _, headers = await asyncio.wait_for(_read_final_head(conn.reader), self._timeout)
        except asyncio.IncompleteReadError as e:
            ls.close()
            raise ProtocolError("the connection closed before the answer was complete") from e
        except BaseException:
            ls.close()
            raise
        ls.status, ls.headers = status, headers
        self.sent += 1
        return ls

    @staticmethod
    def _expire(conn: _Conn) -> None:
        conn.expired = True
        conn.close()

    async def aclose(self) -> None:
        """Closes every idle connection; those in use close when their request ends, and
        later requests return None."""
        self._closed = True
        for fut in self._waiting:
            if not fut.done():
                fut.set_result(None)
        idle, self._idle = self._idle, []
        for c in idle:
            self._open -= 1
            c.close()
        for c in idle:
            with contextlib.suppress(Exception):
                await c.writer.wait_closed()

    def _left(self, deadline: float) -> float:
        """Seconds until deadline (the loop's time()), at most the timeout."""
        return max(0.0, min(self._timeout, deadline - asyncio.get_running_loop().time()))

    def renew_tls(self, ctx: ssl.SSLContext) -> None:
        """New connections use ctx (another client certificate); those made with the old
        context are closed instead of being used again."""
        self._ssl = ctx

    async def _take(self, deadline: float) -> _Conn | None:
        while self._idle:
            c = self._idle.pop()
            if not c.stale() and (not self._to.https or c.ctx is self._ssl):
                return c
            self._open -= 1
            c.close()
        if self._open >= self._max:
            # at most the timeout for a turn: the caller then uses httpx with what is left
            loop = asyncio.get_running_loop()
            return await self._wait_turn(min(deadline, loop.time() + self._timeout))
        self._open += 1
        try:
            c = await asyncio.wait_for(self._connect(), self._left(deadline))
        except BaseException as e:
            self._open -= 1
            self._wake()  # the slot is free again: a waiting request may try it
            if isinstance(e, (OSError, asyncio.TimeoutError)):
                return None
            raise
        self.connects += 1
        return c

    async def _wait_turn(self, deadline: float) -> _Conn | None:
        """Waits (until deadline, the loop's time()) for a connection another request
        releases; None when none came (the caller then uses httpx)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await asyncio.wait_for(fut, self._left(deadline))
        except asyncio.TimeoutError:
            return None
        finally:
            if fut in self._waiting:
                self._waiting.remove(fut)
        return None if self._closed else await self._take(deadline)

    def _wake(self) -> None:
        """A connection went idle or closed: the first request waiting for one goes on."""
        while self._waiting:
            fut = self._waiting.pop(0)
            if not fut.done():
                fut.set_result(None)
                return

    async def _connect(self) -> _Conn:
        to = self._to
        if to.https:
            if self._ssl is None:
                self._ssl = self._cfg.ssl_context()
            ctx = self._ssl
            r, w = await asyncio.open_connection(
                to.host, to.port, ssl=ctx, server_hostname=to.host, limit=MAX_HEAD_LINE
            )
            return _Conn(r, w, ctx)
        r, w = await asyncio.open_connection(to.host, to.port, limit=MAX_HEAD_LINE)
        return _Conn(r, w)

    async def _exchange(self, c: _Conn, request: bytes, method: str) -> tuple[Answer, bool]:
        c.writer.write(request)
        await c.writer.drain()
        try:
            return await read_answer(c.reader, method)
        except asyncio.IncompleteReadError as e:
            raise ProtocolError("the connection closed before the answer was complete") from e

    def _head(self, method: str, path: str, length: int, ctype: str, auth: str | None) -> bytes:
        """The request's head; length < 0: no body (and no Content-Type). auth: the
        Authorization header's value (auth_header_async), if any."""
        lines = [
            f"{method} {self._to.prefix}{path} HTTP/1.1",
            f"Host: {self._to.host_header}",
            "Accept: application/json",
        ]
        if length >= 0:
            lines += [f"Content-Type: {ctype}", f"Content-Length: {length}"]
        lines.append(f"User-Agent: {self._ua}")
        if auth:
            lines.append(f"Authorization: {auth}")
        for ln in lines:
            if "\r" in ln or "\n" in ln:
                raise ValueError("a request line or header holds a line break")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class LineStream:
    """An answer read as lines (a watch's events), on a connection of its own: status
    and headers, then lines(), or body() for an error. close() releases it."""

    def __init__(self, conn: _Conn, deadline: asyncio.TimerHandle) -> None:
        self._conn = conn
        self._deadline = deadline
        self.status = 0
        self.headers: dict[str, str] = {}

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    async def body(self) -> bytes:
        """The whole body (at most MAX_ANSWER bytes), for an error's status."""
        parts: list[bytes] = []
        total = 0
        async for part in self._parts():
            total += len(part)
            if total > MAX_ANSWER:
                raise ProtocolError(f"answer larger than {MAX_ANSWER} bytes")
            parts.append(part)
        return b"".join(parts)

    async def lines(self) -> AsyncGenerator[str, None]:
        """The body's lines (without their line ends), each at most MAX_LINE bytes. They
        end quietly at the end of the body or at the stream's deadline; raise OSError or
        ProtocolError when the connection fails or the answer is malformed."""
        buf = bytearray()
        try:
            async for part in self._parts():
                for line in take_lines(buf, part):
                    yield line
                if len(buf) > MAX_LINE:
                    raise ProtocolError(f"a line longer than {MAX_LINE} bytes")
        except (OSError, ProtocolError, asyncio.IncompleteReadError) as e:
            if self._conn.expired:
                return
            if isinstance(e, asyncio.IncompleteReadError):
                raise ProtocolError("the connection closed in the middle of the answer") from e
            raise
        if buf and not self._conn.expired:
            yield buf.decode()

    def close(self) -> None:
        self._deadline.cancel()
        self._conn.close()

    async def _parts(self) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they come, in any framing."""
        r, te = self._conn.reader, self.headers.get("transfer-encoding", "").lower()
        if te:
            if te.split(",")[-1].strip() != "chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding {te!r}")
            while (size := await _chunk_size(r)) > 0:
                yield await r.readexactly(size)
                if await _read_line(r):
                    raise ProtocolError("a chunk without its line end")
            return
        left = _content_length(self.headers["content-length"]) if "content-length" in self.headers else -1
        while left != 0:
            part = await r.read(65536 if left < 0 else min(left, 65536))
            if not part:
                if left > 0:
                    raise ProtocolError("the connection closed in the middle of the answer")
                return
            left -= len(part) if left > 0 else 0
            yield part


async def _chunk_size(reader: asyncio.StreamReader) -> int:
    size_line = (await _read_line(reader)).split(";", 1)[0].strip()
    try:
        size = int(size_line, 16)
    except ValueError as e:
        raise ProtocolError(f"bad chunk size {size_line[:20]!r}") from e
    if size < 0 or size > MAX_LINE:
        raise ProtocolError(f"a chunk of {size} bytes")
    return size


async def _read_final_head(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str]]:
    """The head of the final answer (informational ones skipped)."""
    while True:
        status, version, headers = await _read_head(reader)
        if status >= 200 or status == 101:
            return status, version, headers


async def read_answer(reader: asyncio.StreamReader, method: str = "POST") -> tuple[Answer, bool]:
    """Reads one HTTP/1.1 answer (informational ones skipped): the answer and whether
    the connection may carry another request. Bounded: MAX_HEAD_LINES lines of head,
    MAX_ANSWER bytes of body."""
    status, version, headers = await _read_final_head(reader)
    conn_hdr = headers.get("connection", "").lower()
    keep = (version == "HTTP/1.1" and "close" not in conn_hdr) or (version == "HTTP/1.0" and "keep-alive" in conn_hdr)
    if method == "HEAD" or status in (204, 304) or status == 101:
        return Answer(status, headers.get("content-type", ""), b""), keep and status != 101
    te = headers.get("transfer-encoding", "").lower()
    if te:
        if te.split(",")[-1].strip() != "chunked":
            raise ProtocolError(f"unsupported Transfer-Encoding {te!r}")
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        n = _content_length(headers["content-length"])
        body = await reader.readexactly(n)
    else:
        body = await reader.read(MAX_ANSWER + 1)
        while len(body) <= MAX_ANSWER:
            more = await reader.read(MAX_ANSWER + 1 - len(body))
            if not more:
                break
            body += more
        if len(body) > MAX_ANSWER:
            raise ProtocolError(f"answer larger than {MAX_ANSWER} bytes")
        keep = False
    return Answer(status, headers.get("content-type", ""), body), keep


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str]]:
    status_line = await _read_line(reader)
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEAD_LINES):
        line = await _read_line(reader)
        if not line:
            return int(parts[1]), parts[0], headers
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ProtocolError(f"malformed header line: {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise ProtocolError("conflicting Content-Length headers")
            value = headers[key] + ", " + value if key != "content-length" else value
        headers[key] = value
    raise ProtocolError(f"more than {MAX_HEAD_LINES} header lines")


async def _read_line(reader: asyncio.StreamReader) -> str:
    try:
        raw = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError as e:
        raise ProtocolError("the connection closed before the answer was complete") from e
    except asyncio.LimitOverrunError as e:
        raise ProtocolError(f"an answer line longer than {MAX_HEAD_LINE} bytes") from e
    return raw[:-2].decode("latin-1")


def _content_length(v: str) -> int:
    if not v.isdigit():
        raise ProtocolError(f"bad Content-Length {v!r}")
    n = int(v)
    if n > MAX_ANSWER:
        raise ProtocolError(f"answer larger than {MAX_ANSWER} bytes")
    return n


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while (size := await _chunk_size(reader)) > 0:
        total += size
        if total > MAX_ANSWER:
            raise ProtocolError(f"answer larger than {MAX_ANSWER} bytes")
        parts.append(await reader.readexactly(size))
        if await _read_line(reader):
            raise ProtocolError("a chunk without its line end")
    for _ in range(MAX_HEAD_LINES):  # trailers, up to the blank line
        if not await _read_line(reader):
            return b"".join(parts)
    raise ProtocolError(f"more than {MAX_HEAD_LINES} trailer lines")
