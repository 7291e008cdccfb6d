"""URLs of a port in a sandbox (any TCP port a server in the sandbox listens on, not only
sandboxd's) and ready-to-use httpx clients for them, in each connection mode:

- router: the path form ``ROUTER/s/{namespace}/{name}/{port}/...`` with the router's
  bearer token in ``Authorization``;
- proxy: the API server's pod proxy ``SERVER/api/v1/namespaces/NS/pods/POD:PORT/proxy/...``
  with the kubeconfig's credentials (bearer token in ``headers``; a client certificate
  only works through :func:`http_client`, which loads it);
- direct: ``http://POD_IP:PORT/...`` (reachable from inside the cluster network only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

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
        tok = conn.token if conn.token and port == conn.port else None
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return PortURL(_join(base, path), base, headers, tok, "direct")
    raise ValueError(f"unresolved connection {conn!r}")


def client_options(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> dict[str, Any]:
    """The httpx.Client/AsyncClient arguments for a PortURL: base_url, headers, TLS and
    the auth, refreshed per request like the API client's: the kubeconfig's (proxy
    mode), the router's token file or exec credential (router mode)."""
    opts = _wire.client_options(timeout)
    opts["base_url"] = t.base_url
    if t.needs_kube_tls and cfg is not None:
        opts["verify"] = cfg.ssl_context()
        auth = cfg.auth()
        if auth is not None:
            opts["auth"] = auth
        else:
            opts["headers"] = dict(t.headers)
        return opts
    opts["headers"] = dict(t.headers)
    if isinstance(conn, RouterConnection):
        opts["verify"] = conn.verify
        auth = _conn.SourceAuth(_conn.router_source(conn, cfg))
        if auth.dynamic:  # the token as it is at each request (a token file rotates)
            opts["headers"].pop("Authorization", None)
            opts["auth"] = auth
    return opts


def http_client(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> httpx.Client:
    """The environment's proxies by the rules of the SDK's other clients (_proxy: NO_PROXY's
    CIDR ranges, loopback and the in-cluster API server direct); the transport is the one
    httpx would make (its retries and the client's limits)."""
    opts = client_options(t, conn, cfg, timeout)
    verify = opts.pop("verify", True)
    return httpx.Client(**opts, transport=_proxy.transport(verify, retries=0, limits=opts["limits"]))


def async_http_client(t: PortURL, conn: Connection, cfg: KubeConfig | None, timeout: float) -> httpx.AsyncClient:
    """As http_client."""
    opts = client_options(t, conn, cfg, timeout)
    verify = opts.pop("verify", True)
    return httpx.AsyncClient(**opts, transport=_proxy.async_transport(verify, retries=0, limits=opts["limits"]))
