"""A lean HTTP/1.1 connection for the sync client's small, latency-critical API calls
(the claim's POST on the warm path).

httpx spends about 1 ms of CPU per request above what the standard library's
http.client does with the same TLS context (request and response models, header
validation, the auth and redirect layers). On a small node that CPU competes with the
API server and the controller while they serve the claim, so the claim's own POST goes
through one keep-alive ``http.client`` connection instead; every other call, and this one
whenever the connection is in use, unusable or a proxy applies, goes through httpx.

Thread-safe: one request at a time per connection (``try_request`` returns None when
another thread holds it). Owns its socket; ``close`` releases it.
"""

from __future__ import annotations

import base64
import http.client
import select
import socket
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass

from ._kubeconfig import KubeConfig

# Bodies larger than this are left to httpx (and so is any answer larger than this).
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class Answer:
    """A complete response: status, Content-Type and body."""

    status: int
    content_type: str
    body: bytes


def proxied(server: str) -> bool:
    """True when the environment names a proxy for server's scheme that server does not
    bypass (httpx would use it: so must this client, so it stays out of the way)."""
    u = urllib.parse.urlsplit(server)
    proxies = urllib.request.getproxies()
    if not proxies.get(u.scheme) and not proxies.get("all"):
        return False
    return not urllib.request.proxy_bypass(u.hostname or "")


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


class FastConn:
    """One keep-alive HTTP/1.1 connection to cfg's API server."""

    def __init__(self, cfg: KubeConfig, timeout: float, user_agent: str) -> None:
        u = urllib.parse.urlsplit(cfg.server)
        self._cfg = cfg
        self._https = u.scheme == "https"
        self._host = u.hostname or ""
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._timeout = timeout
        self._ua = user_agent
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._closed = False
        self.sent = 0  # requests answered
        self.connects = 0  # connections made
        self.usable = u.scheme in ("http", "https") and bool(self._host) and not proxied(cfg.server)

    def try_request(self, method: str, path: str, body: bytes, content_type: str) -> Answer | None:
        """Sends one request and reads its whole answer; None when it was not sent: another
        request holds the connection, the client is closed, the body is too large or no
        connection could be made (the caller then uses httpx, which retries connecting).
        Raises OSError or http.client.HTTPException when the request failed once sent
        (the connection is then dropped)."""
        if not self.usable or len(body) > MAX_BODY or not self._lock.acquire(blocking=False):
            return None
        try:
            conn = None if self._closed else self._connection()
            return None if conn is None else self._send(conn, method, path, body, content_type)
        finally:
            self._lock.release()

    def close(self) -> None:
        """Closes the connection; later requests return None."""
        with self._lock:
            self._closed = True
            self._drop()

    def _send(self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes, ctype: str) -> Answer:
        headers = {
            "Host": self._host_header(),
            "Accept": "application/json",
            "Content-Type": ctype,
            "User-Agent": self._ua,
        }
        auth = auth_header(self._cfg)  # runs under self._lock; KubeConfig is thread-safe
        if auth:
            headers["Authorization"] = auth
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read(MAX_BODY + 1)
            if len(data) > MAX_BODY:
                raise http.client.HTTPException(f"answer larger than {MAX_BODY} bytes")
            if resp.will_close:
                self._drop()
            self.sent += 1
            return Answer(resp.status, resp.getheader("Content-Type") or "", data)
        except BaseException:
            self._drop()
            raise

    def _connection(self) -> http.client.HTTPConnection | None:
        """The open connection, or a new one when there is none or the server closed it
        while it was idle (its socket reads as ready: EOF or unasked-for bytes); None when
        connecting failed."""
        conn = self._conn
        if conn is not None and (conn.sock is None or _readable(conn.sock)):
            self._drop()
            conn = None
        if conn is not None:
            return conn
        if self._https:
            ctx = self._cfg.ssl_context()
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=ctx)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            conn.connect()
        except OSError:
            conn.close()
            return None
        self._conn = conn
        self.connects += 1
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _host_header(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        default = 443 if self._https else 80
        return host if self._port == default else f"{host}:{self._port}"


def _readable(sock: socket.socket) -> bool:
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)
