"""URLs of a port in a sandbox (any TCP port a server in the sandbox listens on, not only
sandboxd's) and ready-to-use httpx clients for them, in each connection mode:

- router: the path form ``ROUTER/s/{namespace}/{name}/{port}/...`` with the router's
  bearer token in ``Authorization``;
- proxy: the API server's pod proxy ``SERVER/api/v1/namespaces/NS/pods/POD:PORT/proxy/...``
  with the kubeconfig's credentials (bearer token in ``headers``; a client certificate
  only works through :func:`http_client`, which loads it);
- direct: ``http://POD_IP:PORT/...`` (reachable from inside the cluster network only).

The clients of :func:`http_client` send these credentials (the bearer token, the
kubeconfig's client certificate) only to their base URL's scheme, host and port and
below its path (Scope): an absolute URL or a redirect the sandbox's app answers with
gets none.
"""

from __future__ import annotations

import posixpath
import ssl
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit, urlunsplit

import httpx

from . import _conn, _k8s, _proxy, _wire
from ._kubeconfig import KubeConfig
from .errors import SandboxError
from .models import Connection, DirectConnection, PodProxyConnection, RouterConnection


@dataclass(frozen=True)
class PortURL:
    """Where a port of a sandbox answers.

    ``url`` is the full URL of ``path`` on that port; ``base_url`` the URL of the port's
    root (ends with ``/``); ``headers`` must go on every request (``Authorization`` when a
    bearer token is needed); ``token`` is that bearer token or None; ``mode`` is
    "router", "proxy" or "direct"; ``needs_kube_tls`` says that the API server's TLS
    material (CA, client certificate) is needed as well (proxy mode)."""

    url: str
    base_url: str
    # out of repr, as the connections' tokens are (logs, tracebacks)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    token: str | None = field(default=None, repr=False)
    mode: str = ""
    needs_kube_tls: bool = False


def check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer in 1..65535, not {port!r}")
    return port


def _join(base: str, path: str) -> str:
    """base (ending with /) plus path (a leading / is dropped: the path is below base)."""
    return base + path.lstrip("/")


def _direct_base(conn: DirectConnection, namespace: str, name: str, sandbox: dict[str, Any] | None, port: int) -> str:
    if conn.url:  # a pinned sandboxd URL: the same host, the other port
        u = urlsplit(conn.url)
        host = u.hostname or ""
        if not host:
            raise SandboxError(f"DirectConnection url {conn.url!r} has no host")
        host = f"[{host}]" if ":" in host else host
        return urlunsplit((u.scheme or "http", f"{host}:{port}", "/", "", ""))
    ip = _k8s.select_pod_ip(((sandbox or {}).get("status") or {}).get("podIPs") or [])
    if not ip:
        raise SandboxError(f"sandbox {namespace}/{name} has no pod IP yet (not Ready or suspended)")
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}/"


def _sandboxd_port(conn: DirectConnection) -> int:
    """The port sandboxd answers on: a pinned URL's own (its scheme's default without
    one; conn.port is not used with a URL), else conn.port."""
    if conn.url:
        u = urlsplit(conn.url)
        try:
            explicit = u.port
        except ValueError:
            explicit = None
        return explicit or _DEFAULT_PORTS.get((u.scheme or "http").lower(), 80)
    return conn.port


def port_target(
    conn: Connection,
    cfg: KubeConfig | None,
    namespace: str,
    name: str,
    sandbox: dict[str, Any] | None,
    port: int,
    path: str = "/",
) -> PortURL:
    """The PortURL of port in sandbox name (a resolved connection; sandbox is the Sandbox
    object, needed by the proxy and direct modes)."""
    check_port(port)
    if isinstance(conn, RouterConnection):
        tok = _conn.router_token(conn, cfg)
        base = f"{conn.url.rstrip('/')}/s/{quote(namespace, safe='')}/{quote(name, safe='')}/{port}/"
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return PortURL(_join(base, path), base, headers, tok, "router")
    if isinstance(conn, PodProxyConnection):
        if cfg is None:
            raise SandboxError("the pod proxy connection needs a kubeconfig")
        pod = _k8s.pod_name(sandbox or {}) or name
        base = cfg.server.rstrip("/") + _k8s.pod_proxy_base(namespace, pod, port) + "/"
        tok = cfg.bearer_token()
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return PortURL(_join(base, path), base, headers, tok, "proxy", needs_kube_tls=True)
    if isinstance(conn, DirectConnection):
        base = _direct_base(conn, namespace, name, sandbox, port)
        # sandboxd's own token goes only to sandboxd's port
        tok = conn.token if conn.token and port == _sandboxd_port(conn) else None
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return PortURL(_join(base, path), base, headers, tok, "direct")
    raise ValueError(f"unresolved connection {conn!r}")


_DEFAULT_PORTS = {"http": 80, "https": 443}

CREDENTIAL_MARK = "agent_sandbox_credential"
"""The request extension ScopedAuth sets on a request it gave credentials: httpx copies a
request's extensions (and, to the same origin, its headers) to the requests of its
redirects, whose Authorization strip_outside then removes when they leave the scope."""


class Scope:
    """Where a port client's credentials may go: the base URL's scheme, host and port,
    and paths below its path (``/s/NS/NAME/PORT/`` through the router, the pod proxy's
    ``.../pods/POD:PORT/proxy/``). httpx has removed dot segments from a URL's path."""

    def __init__(self, base_url: str) -> None:
        u = httpx.URL(base_url)
        self.origin = self._origin(u)
        path = u.raw_path.split(b"?", 1)[0]
        self.prefix = path if path.endswith(b"/") else path + b"/"

    @staticmethod
    def _origin(u: httpx.URL) -> tuple[str, str, int | None]:
        return u.scheme, u.host, u.port or _DEFAULT_PORTS.get(u.scheme)

    def same_origin(self, url: httpx.URL) -> bool:
        return self._origin(url) == self.origin

    def __contains__(self, url: httpx.URL) -> bool:
        if not self.same_origin(url):
            return False
        raw = url.raw_path.split(b"?", 1)[0]
        # httpx keeps percent-encoded dot segments (%2e%2e): the path as a server that
        # decodes them would resolve it must stay below the prefix too.
        decoded = unquote_to_bytes(raw)
        clean = posixpath.normpath(decoded.decode("latin-1")).encode("latin-1")
        if decoded.endswith(b"/") and not clean.endswith(b"/"):
            clean += b"/"
        return raw.startswith(self.prefix) and clean.startswith(self.prefix)


class _Bearer(httpx.Auth):
    """A fixed bearer token (a PortURL's)."""

    def __init__(self, token: str) -> None:
        self._tok = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._tok}"
        yield request


class ScopedAuth(httpx.Auth):
    """inner's credentials for requests in scope; a request elsewhere (an absolute URL
    the sandbox's app handed out) goes without them. A request that got them is marked
    (CREDENTIAL_MARK) for strip_outside."""

    def __init__(self, inner: httpx.Auth, scope: Scope) -> None:
        self._inner = inner
        self._scope = scope
        self.requires_request_body = inner.requires_request_body
        self.requires_response_body = inner.requires_response_body

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if request.url not in self._scope:
            yield request
            return
        request.extensions[CREDENTIAL_MARK] = True
        yield from self._inner.sync_auth_flow(request)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if request.url not in self._scope:
            yield request
            return
        request.extensions[CREDENTIAL_MARK] = True
        flow = self._inner.async_auth_flow(request)
        req = await flow.__anext__()
        while True:
            resp = yield req
            try:
                req = await flow.asend(resp)
            except StopAsyncIteration:
                return


def strip_outside(scope: Scope) -> Callable[[httpx.Request], None]:
    """A request hook (it runs for every request sent, redirects too): a request that
    carries the client's credentials (CREDENTIAL_MARK: a redirect of one that got them)
    but left the scope loses its Authorization (httpx keeps it to the same origin, the
    router or API server, at any path)."""

    def hook(request: httpx.Request) -> None:
        if request.extensions.get(CREDENTIAL_MARK) and request.url not in scope:
            request.headers.pop("Authorization", None)

    return hook


def client_options(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> dict[str, Any]:
    """The httpx.Client/AsyncClient arguments for a PortURL: base_url, TLS and the auth,
    refreshed per request like the API client's: the kubeconfig's (proxy mode), the
    router's token file or exec credential (router mode), else the PortURL's token. The
    auth is scoped to the base URL (ScopedAuth); the client needs strip_outside(Scope(
    base_url)) as a request hook (http_client adds it)."""
    opts = _wire.client_options(timeout)
    opts["base_url"] = t.base_url
    opts["headers"] = {k: v for k, v in t.headers.items() if k.lower() != "authorization"}
    auth: httpx.Auth | None = _Bearer(t.token) if t.token else None
    if t.needs_kube_tls and cfg is not None:
        opts["verify"] = cfg.ssl_context()
        auth = cfg.auth() or auth
    elif isinstance(conn, RouterConnection):
        opts["verify"] = conn.verify
        src = _conn.SourceAuth(_conn.router_source(conn, cfg))
        if src.dynamic:  # the token as it is at each request (a token file rotates)
            auth = src
    if auth is not None:
        opts["auth"] = ScopedAuth(auth, Scope(t.base_url))
    return opts


class ScopedTransport(httpx.BaseTransport):
    """A pod-proxy port client's transport: the kubeconfig's TLS context (its client
    certificate) only in scope; elsewhere on the API server its CA without the
    certificate, and to any other origin the default verification."""

    def __init__(self, scope: Scope, inner: httpx.BaseTransport, ca: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._scope, self._inner, self._ca, self._limits = scope, inner, ca, limits
        self._lock = threading.Lock()
        self._outside: dict[bool, httpx.BaseTransport] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url in self._scope:
            return self._inner.handle_request(request)
        same = self._scope.same_origin(request.url)
        with self._lock:
            t = self._outside.get(same)
            if t is None:
                t = self._outside[same] = _proxy.transport(self._ca if same else True, retries=0, limits=self._limits)
        return t.handle_request(request)

    def close(self) -> None:
        self._inner.close()
        for t in self._outside.values():
            t.close()


class AsyncScopedTransport(httpx.AsyncBaseTransport):
    """ScopedTransport for async clients."""

    def __init__(self, scope: Scope, inner: httpx.AsyncBaseTransport, ca: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._scope, self._inner, self._ca, self._limits = scope, inner, ca, limits
        self._outside: dict[bool, httpx.AsyncBaseTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url in self._scope:
            return await self._inner.handle_async_request(request)
        same = self._scope.same_origin(request.url)
        t = self._outside.get(same)
        if t is None:
            ca: Any = self._ca if same else True
            t = self._outside[same] = _proxy.async_transport(ca, retries=0, limits=self._limits)
        return await t.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
        for t in self._outside.values():
            await t.aclose()


def http_client(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> httpx.Client:
    """The environment's proxies by the rules of the SDK's other clients (_proxy: NO_PROXY's
    CIDR ranges, loopback and the in-cluster API server direct); the transport is the one
    httpx would make (its retries and the client's limits). Credentials only in the
    base URL's scope (Scope: ScopedAuth, strip_outside, ScopedTransport)."""
    opts = client_options(t, conn, cfg, timeout)
    verify = opts.pop("verify", True)
    scope = Scope(t.base_url)
    proxy = cfg.proxy_url if t.needs_kube_tls and cfg is not None else None  # to the API server
    transport = _proxy.transport(verify, retries=0, limits=opts["limits"], proxy=proxy)
    if t.needs_kube_tls and cfg is not None:
        transport = ScopedTransport(scope, transport, cfg._ca_context(), opts["limits"])
    return httpx.Client(**opts, transport=transport, event_hooks={"request": [strip_outside(scope)]})


def async_http_client(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> httpx.AsyncClient:
    """As http_client."""
    opts = client_options(t, conn, cfg, timeout)
    verify = opts.pop("verify", True)
    scope = Scope(t.base_url)
    proxy = cfg.proxy_url if t.needs_kube_tls and cfg is not None else None  # to the API server
    transport = _proxy.async_transport(verify, retries=0, limits=opts["limits"], proxy=proxy)
    if t.needs_kube_tls and cfg is not None:
        transport = AsyncScopedTransport(scope, transport, cfg._ca_context(), opts["limits"])
    strip = strip_outside(scope)

    async def hook(request: httpx.Request) -> None:
        strip(request)

    return httpx.AsyncClient(**opts, transport=transport, event_hooks={"request": [hook]})
