"""Choosing a connection mode and computing where requests for one sandbox go."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import _k8s
from ._kubeconfig import KubeConfig, in_cluster
from .errors import SandboxError
from .models import (
    AutoConnection,
    Connection,
    DirectConnection,
    PodProxyConnection,
    RouterConnection,
)

ENV_ROUTER_URL = "AGENT_SANDBOX_ROUTER_URL"
ENV_ROUTER_TOKEN = "AGENT_SANDBOX_ROUTER_TOKEN"


@dataclass
class Target:
    """Where a sandbox's sandboxd answers: ``base`` is the URL prefix of its API,
    ``headers`` go on every request, ``via_kube`` means the API server's client (TLS and
    credentials of the kubeconfig) must be used."""

    base: str
    headers: dict[str, str] = field(default_factory=dict)
    via_kube: bool = False
    mode: str = ""


def resolve(conn: Connection | str | None) -> Connection:
    """Turns None, "auto", "router", "direct", "proxy" or a config into a concrete config."""
    if conn is None or conn == "auto" or isinstance(conn, AutoConnection):
        port = conn.port if isinstance(conn, AutoConnection) else AutoConnection().port
        if os.environ.get(ENV_ROUTER_URL):
            return RouterConnection(url=os.environ[ENV_ROUTER_URL], port=port)
        if in_cluster():
            return DirectConnection(port=port)
        return PodProxyConnection(port=port)
    if conn == "router":
        url = os.environ.get(ENV_ROUTER_URL)
        if not url:
            raise SandboxError(f'connection="router" needs ${ENV_ROUTER_URL} or RouterConnection(url=...)')
        return RouterConnection(url=url)
    if conn == "direct":
        return DirectConnection()
    if conn == "proxy":
        return PodProxyConnection()
    if isinstance(conn, (RouterConnection, DirectConnection, PodProxyConnection)):
        return conn
    raise ValueError(f"unknown connection {conn!r}")


def needs_sandbox_object(conn: Connection) -> bool:
    """Whether target() needs the Sandbox object (pod IP or pod name)."""
    return isinstance(conn, PodProxyConnection) or (isinstance(conn, DirectConnection) and not conn.url)


def router_token(conn: RouterConnection, cfg: KubeConfig | None) -> str | None:
    if conn.token:
        return conn.token
    if conn.token_file:
        return Path(conn.token_file).read_text().strip() or None
    if os.environ.get(ENV_ROUTER_TOKEN):
        return os.environ[ENV_ROUTER_TOKEN]
    return cfg.bearer_token() if cfg else None


def target(
    conn: Connection,
    cfg: KubeConfig | None,
    namespace: str,
    name: str,
    sandbox: dict[str, Any] | None,
) -> Target:
    """The Target of sandbox name in namespace for a resolved connection."""
    if isinstance(conn, RouterConnection):
        url = conn.url.rstrip("/")
        headers: dict[str, str] = {}
        tok = router_token(conn, cfg)
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        if conn.style == "path":
            return Target(
                f"{url}/s/{quote(namespace, safe='')}/{quote(name, safe='')}/{conn.port}", headers, mode="router"
            )
        headers.update({"X-Sandbox-ID": name, "X-Sandbox-Namespace": namespace, "X-Sandbox-Port": str(conn.port)})
        return Target(url, headers, mode="router")
    if isinstance(conn, DirectConnection):
        headers = {"Authorization": f"Bearer {conn.token}"} if conn.token else {}
        if conn.url:
            return Target(conn.url.rstrip("/"), headers, mode="direct")
        ip = _k8s.select_pod_ip(((sandbox or {}).get("status") or {}).get("podIPs") or [])
        if not ip:
            raise SandboxError(f"sandbox {namespace}/{name} has no pod IP yet (not Ready or suspended)")
        host = f"[{ip}]" if ":" in ip else ip
        return Target(f"http://{host}:{conn.port}", headers, mode="direct")
    if isinstance(conn, PodProxyConnection):
        if cfg is None:
            raise SandboxError("the pod proxy connection needs a kubeconfig")
        pod = _k8s.pod_name(sandbox or {}) or name
        return Target(cfg.server + _k8s.pod_proxy_base(namespace, pod, conn.port), via_kube=True, mode="proxy")
    raise ValueError(f"unresolved connection {conn!r}")
