"""Lean HTTP/1.1 connections for the sync client's API calls: the single-object ones
(GET, POST, merge PATCH, DELETE; the claim's POST is on the warm path) and its watches.

httpx spends about 1 ms of CPU per request above what the standard library's
http.client does with the same TLS context (request and response models, header
validation, the auth and redirect layers). On a small node that CPU competes with the
API server and the controller while they serve the claim, so those calls go through a
small pool of keep-alive ``http.client`` connections instead (up to ``max_conns``; a
request past them waits for one to come free, at most the timeout), and each watch
through a connection of its own (``open_stream``). LISTs, and any call when no
connection comes free in time, none can be made or a proxy applies, go through httpx.

Thread-safe: one request at a time per connection; threads share the pool. Owns its
sockets; ``close`` releases them.
"""

from __future__ import annotations

import base64
import http.client
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from . import _proxy
from ._kubeconfig import KubeConfig

# Request bodies larger than this are left to httpx.
MAX_BODY = 1 << 20
# An answer larger than this fails (a lean connection carries calls whose answer is one
# object, and etcd stores none over 1.5 MiB; LISTs go through httpx).
MAX_ANSWER = 4 << 20
MAX_LINE = 4 << 20  # one line of a streamed answer (a watch event: one object)
# Connections per pool: threads' claims at once share them (a request past them waits for
# one), as the async client's do (_fasthttp_async, where 8 is measured).
DEFAULT_MAX_CONNS = 8


@dataclass(frozen=True)
class Answer:
    """A complete response: status, Content-Type and body."""

    status: int
    content_type: str
    body: bytes


def proxied(server: str) -> bool:
    """True when the environment names a proxy for server that its NO_PROXY does not
    bypass (the client's httpx goes through it: so must this client, so it stays out of
    the way). The rules are the httpx clients' (_proxy)."""
    try:
        return _proxy.proxy_for(server) is not None
    except httpx.InvalidURL:
        return False


def auth_header(cfg: KubeConfig) -> str | None:
    """The Authorization header value cfg calls for (basic, or a bearer token, refreshed
    as the kubeconfig says), or None (client certificate or no credentials)."""
    if cfg.username is not None and cfg.password is not None:
        raw = f"{cfg.username}:{cfg.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()
    if cfg.token or cfg.token_file or cfg.exec_config:
        tok = cfg.bearer_token()
        return f"Bearer {tok}" if tok else None
    return None


@dataclass(frozen=True)
class Target:
    """Where a lean connection goes: cfg.server's scheme, host, port and path prefix, and
    whether a lean connection may go there at all (http or https, no proxy applies)."""

    https: bool
    host: str
    port: int
    prefix: str
    usable: bool
    host_header: str

    @classmethod
    def of(cls, server: str) -> Target:
        u = urllib.parse.urlsplit(server)
        https = u.scheme == "https"
        host, default = u.hostname or "", 443 if https else 80
        port = u.port or default
        shown = f"[{host}]" if ":" in host else host
        return cls(
            https=https,
            host=host,
            port=port,
            prefix=u.path.rstrip("/"),
            usable=u.scheme in ("http", "https") and bool(host) and not proxied(server),
            host_header=shown if port == default else f"{shown}:{port}",
        )


def take_lines(buf: bytearray, part: bytes) -> list[str]:
    """Appends part to buf and takes the complete lines out of it, without their line
    ends; what follows the last line end stays in buf."""
    buf += part
    end = buf.rfind(b"\n")
    if end < 0:
        return []
    lines = buf[:end].decode().split("\n")
    del buf[: end + 1]
    return lines


def shut_socket(sock: socket.socket | None) -> None:
    """Shuts sock down for both directions: a read blocked on it returns."""
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: its reader is done


class PoolBase:
    """What both pools (this one and _fasthttp_async's) keep: where they connect, their
    limits and counters."""

    def __init__(
        self,
        cfg: KubeConfig,
        timeout: float,
        user_agent: str,
        ssl_context: ssl.SSLContext | None = None,
        max_conns: int = DEFAULT_MAX_CONNS,
    ) -> None:
        self._cfg = cfg
        self._to = Target.of(cfg.server)
        self._timeout = timeout
        self._ua = user_agent
        self._ssl = ssl_context  # made from cfg at the first connection when None
        self._max = max_conns
        self._open = 0  # connections open or being opened, idle or in use
        self._closed = False
        self.sent = 0  # requests answered
        self.connects = 0  # connections made
        self.usable = self._to.usable and not cfg.proxy_url  # a kubeconfig's proxy: httpx goes through it
        self._setup()

    def _setup(self) -> None:
        """The subclass's own state (called at the end of __init__)."""


class FastPool(PoolBase):
    """Keep-alive HTTP/1.1 connections to cfg's API server, up to max_conns (arguments:
    PoolBase)."""

    def _setup(self) -> None:
        self._cond = threading.Condition()  # guards the state; notified when one is put back
        self._idle: list[http.client.HTTPConnection] = []

    def try_request(
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
        client is closed, the body is too large, no connection could be made (the caller
        then uses httpx, which retries connecting) or none came free within the timeout.
        Raises OSError or http.client.HTTPException when the request failed once sent
        (the connection is then closed). on_send is called once it has a connection,
        just before the request is written. deadline (time.monotonic()) bounds the whole
        call, the wait for a connection included (default: the timeout from now); each
        socket operation waits at most the timeout, and never past it."""
        if not self.usable or len(body) > MAX_BODY:
            return None
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        conn = self._take(deadline)
        if conn is None:
            return None
        keep = False
        try:
            if on_send is not None:
                on_send()
            if conn.sock is not None:
                conn.sock.settimeout(self._op_timeout(deadline))
            ans, keep = self._send(conn, method, path, body, content_type)
            return ans
        finally:
            self._put(conn, keep)

    def close(self) -> None:
        """Closes the idle connections; those in use close when their request ends, and
        later requests return None."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for c in idle:
            c.close()

    def open_stream(self, path: str, read_timeout: float) -> LineResponse | None:
        """GETs path (with its query) on a connection of its own, for an answer read as
        lines (a watch), up to the answer's head; None when no connection could be made
        (the caller then uses httpx). Each read waits at most read_timeout. Raises
        OSError or http.client.HTTPException when the request failed once sent."""
        if not self.usable or self._closed:
            return None
        conn = self._connect()
        if conn is None:
            return None
        headers = {"Host": self._to.host_header, "Accept": "application/json", "User-Agent": self._ua}
        auth = auth_header(self._cfg)
        if auth:
            headers["Authorization"] = auth
        try:
            conn.request("GET", self._to.prefix + path, headers=headers)
            if conn.sock is not None:
                conn.sock.settimeout(read_timeout)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        with self._cond:
            self.sent += 1
        return LineResponse(conn, resp)

    def _op_timeout(self, deadline: float) -> float:
        """The timeout of one socket operation of a call with this deadline."""
        return max(0.001, min(self._timeout, deadline - time.monotonic()))

    def renew_tls(self, ctx: ssl.SSLContext) -> None:
        """New connections use ctx (another client certificate); those made with the old
        context are closed instead of being used again."""
        with self._cond:
            self._ssl = ctx

    def _current(self, conn: http.client.HTTPConnection) -> bool:
        """Whether conn was made with the TLS context in use (a plain-http one always is)."""
        return not self._to.https or _made_with(conn) is self._ssl

    def _take(self, deadline: float) -> http.client.HTTPConnection | None:
        """An idle connection the server has not closed, else a new one while fewer than
        max_conns are open, else waits for one to be put back (until deadline, and at
        most the timeout: the caller then uses httpx with what is left of its call)."""
        wait_end = min(deadline, time.monotonic() + self._timeout)
        with self._cond:
            while True:
                if self._closed:
                    return None
                while self._idle:
                    c = self._idle.pop()
                    if c.sock is not None and not _readable(c.sock) and self._current(c):
                        return c
                    self._open -= 1  # the server closed it while idle (or sent unasked bytes)
                    c.close()
                if self._open < self._max:
                    self._open += 1
                    break
                left = wait_end - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
        conn = None
        try:
            conn = self._connect(self._op_timeout(deadline))
        finally:
            if conn is None:  # failed (or raised): the slot is free again
                with self._cond:
                    self._open -= 1
                    self._cond.notify()
        return conn

    def _put(self, conn: http.client.HTTPConnection, keep: bool) -> None:
        with self._cond:
            keep = keep and not self._closed
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._cond.notify()
        if not keep:
            conn.close()

    def _send(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes, ctype: str
    ) -> tuple[Answer, bool]:
        """The answer, and whether the connection may carry another request."""
        headers = {
            "Host": self._to.host_header,
            "Accept": "application/json",
            "Content-Type": ctype,
            "User-Agent": self._ua,
        }
        auth = auth_header(self._cfg)  # KubeConfig is thread-safe
        if auth:
            headers["Authorization"] = auth
        conn.request(method, self._to.prefix + path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read(MAX_ANSWER + 1)
        if len(data) > MAX_ANSWER:
            raise http.client.HTTPException(f"answer larger than {MAX_ANSWER} bytes")
        with self._cond:
            self.sent += 1
        return Answer(resp.status, resp.getheader("Content-Type") or "", data), not resp.will_close

    def _connect(self, timeout: float | None = None) -> http.client.HTTPConnection | None:
        """A new connection, made within timeout (default: the pool's); None when
        connecting failed."""
        conn: http.client.HTTPConnection
        to = self._to
        t = self._timeout if timeout is None else timeout
        if to.https:
            if self._ssl is None:
                self._ssl = self._cfg.ssl_context()
            conn = http.client.HTTPSConnection(to.host, to.port, timeout=t, context=self._ssl)
            setattr(conn, _CTX_ATTR, self._ssl)
        else:
            conn = http.client.HTTPConnection(to.host, to.port, timeout=t)
        try:
            conn.connect()
        except OSError:
            conn.close()
            return None
        with self._cond:
            self.connects += 1
        return conn


class LineResponse:
    """A streamed answer (a watch's events) on a connection of its own: its status, then
    iter_lines(), or read() for an error. shutdown() may be called from another thread:
    a read blocked on the socket returns and the lines end. close() releases it."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp
        self._shut = False
        self.status_code = resp.status
        self.content_type = resp.getheader("Content-Type") or ""

    def read(self) -> bytes:
        """The whole body (at most MAX_ANSWER bytes), for an error's status."""
        data = self._resp.read(MAX_ANSWER + 1)
        if len(data) > MAX_ANSWER:
            raise http.client.HTTPException(f"answer larger than {MAX_ANSWER} bytes")
        return data

    def iter_lines(self) -> Iterator[str]:
        """The body's lines (without their line ends), each at most MAX_LINE bytes. They
        end quietly at the end of the body, when a read waits longer than the stream's
        read timeout, or after shutdown(); raise OSError or http.client.HTTPException when
        the connection fails or the answer is malformed."""
        buf = bytearray()
        while True:
            try:
                part = self._resp.read1(65536)
            except TimeoutError:
                return
            except (OSError, http.client.HTTPException):
                if self._shut:
                    return
                raise
            if not part:
                if self._resp.length and not self._shut:  # http.client does not tell
                    raise http.client.IncompleteRead(bytes(buf), self._resp.length)
                break
            yield from take_lines(buf, part)
            if len(buf) > MAX_LINE:
                raise http.client.HTTPException(f"a line longer than {MAX_LINE} bytes")
        if buf and not self._shut:
            yield buf.decode()

    def shutdown(self) -> None:
        self._shut = True
        shut_socket(self._conn.sock)

    def close(self) -> None:
        self._resp.close()
        self._conn.close()


_CTX_ATTR = "_agent_sandbox_ssl"  # the TLS context a pooled connection was made with


def _made_with(conn: http.client.HTTPConnection) -> ssl.SSLContext | None:
    """The TLS context conn was made with (None for plain http)."""
    ctx: ssl.SSLContext | None = getattr(conn, _CTX_ATTR, None)
    return ctx


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read (the server closed it, or sent
    unasked bytes): it is then not reused. poll(), not select(): select() fails for a
    descriptor at or past FD_SETSIZE (1024), which made every connection look readable,
    so none was reused in a process with many files open."""
    try:
        p = select.poll()
        p.register(sock, select.POLLIN)
        return bool(p.poll(0))
    except (OSError, ValueError):
        return True
