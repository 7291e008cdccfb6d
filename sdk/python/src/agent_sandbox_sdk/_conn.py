"""Choosing a connection mode, computing where requests for one sandbox go, and the
router's bearer token (current at each request: token files are followed as they
rotate)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from . import _k8s, _proxy, _wire
from ._kubeconfig import ConfigError, KubeConfig, in_cluster
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
ENV_ROUTER_ALLOW_PLAINTEXT_TOKEN = "AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN"


TOKEN_RECHECK = 1.0
"""Seconds between two looks at a token file (a stat; it is read again only when it
changed)."""


class TokenFile:
    """A bearer token kept in a file that is replaced while the client runs (projected
    service-account tokens rotate about hourly). Thread-safe. The file is looked at at
    most once per TOKEN_RECHECK and read again when its identity, size or modification
    time changed, or at once by renew() (the token in use was refused)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._tok = ""  # the last non-empty content read, stripped
        self._seen: tuple[int, int, int, int] | None = None  # the file when _tok was read
        self._checked = float("-inf")  # time.monotonic() of the last look
        self._err: OSError | None = None  # why the last look failed

    def token(self, fallback: str | None = None) -> str | None:
        """The file's current token; fallback while it has never held one. ConfigError
        when neither exists and the file cannot be read."""
        with self._lock:
            if time.monotonic() - self._checked >= TOKEN_RECHECK:
                self._reload(False)
            if self._tok or fallback:
                return self._tok or fallback
            if self._err is not None:
                raise ConfigError(f"cannot read the token file {self.path}: {self._err}")
            return None

    def renew(self) -> bool:
        """Reads the file now and reports whether the token changed."""
        with self._lock:
            return self._reload(True)

    def _reload(self, force: bool) -> bool:
        """Reads the file when it changed since the last read (always with force) and
        reports whether the token changed. A missing, unreadable or empty file keeps the
        last token. A file changed in the last second is read again at the next look (a
        coarse file system clock may give a second change the same time stamp)."""
        self._checked = time.monotonic()
        try:
            st = os.stat(self.path)
            seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if not force and seen == self._seen:
                return False
            tok = Path(self.path).read_text().strip()
        except OSError as e:
            self._err = e
            return False
        self._err = None
        if not tok:
            return False
        old, self._tok = self._tok, tok
        self._seen = None if time.time() - st.st_mtime < 1.0 else seen
        return tok != old


_files: dict[str, TokenFile] = {}
_files_lock = threading.Lock()


def token_file(path: str | os.PathLike[str]) -> TokenFile:
    """The process-wide TokenFile of path (handles and clients share its cache)."""
    key = os.path.abspath(path)
    with _files_lock:
        f = _files.get(key)
        if f is None:
            f = _files[key] = TokenFile(key)
        return f


@dataclass
class TokenSource:
    """Where the router's bearer token comes from: a literal, a token file (``file``,
    which wins over ``literal`` once it has held a token) or the kubeconfig's current
    credential (``cfg``: an exec plugin's, cached by KubeConfig until it expires)."""

    literal: str | None = field(default=None, repr=False)
    file: TokenFile | None = None
    cfg: KubeConfig | None = field(default=None, repr=False)

    def get(self) -> str | None:
        """The token to send now."""
        if self.file is not None:
            return self.file.token(self.literal)
        if self.cfg is not None:
            return self.cfg.bearer_token()
        return self.literal

    def renew(self) -> bool:
        """After the router refused the token: whether a token file now holds another."""
        return self.file is not None and self.file.renew()


class SourceAuth(httpx.Auth):
    """An httpx auth hook that sends a TokenSource's current token (a port's client
    through the router: it follows a rotated token file as a handle does)."""

    def __init__(self, source: TokenSource) -> None:
        self._src = source

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        tok = self._src.get()
        if tok:
            request.headers["Authorization"] = f"Bearer {tok}"
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._src.cfg is not None:
            await self._src.cfg.exec_credential_async()  # a due plugin runs off the event loop
        tok = self._src.get()
        if tok:
            request.headers["Authorization"] = f"Bearer {tok}"
        yield request

    @property
    def dynamic(self) -> bool:
        """Whether the token can change (a token file or an exec credential)."""
        return self._src.file is not None or self._src.cfg is not None


@dataclass
class Target:
    """Where a sandbox's sandboxd answers: ``base`` is the URL prefix of its API,
    ``headers`` go on every request (``fixed`` ones plus, through the router, the
    bearer token of ``token`` as it is now), ``via_kube`` means the API server's client
    (TLS and credentials of the kubeconfig) must be used."""

    base: str
    # out of repr (logs, tracebacks that show locals): a direct connection's token is here
    fixed: dict[str, str] = field(default_factory=dict, repr=False)
    via_kube: bool = False
    mode: str = ""
    token: TokenSource | None = field(default=None, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """The headers of a request sent now."""
        tok = self.token.get() if self.token is not None else None
        return {"Authorization": f"Bearer {tok}", **self.fixed} if tok else self.fixed

    def renew_token(self, resp: httpx.Response) -> bool:
        """Whether resp is the router refusing the token and the token file now holds
        another: the request may then be sent once more, at once."""
        return self.token is not None and _wire.router_refused_token(resp) and self.token.renew()


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


def _env_true(name: str) -> bool:
    """Whether $name is true as Go's strconv.ParseBool reads it (1, t, true, in any case)."""
    return os.environ.get(name, "").strip().lower() in ("1", "t", "true")


def check_kube_credential_to_router(conn: RouterConnection, cfg: KubeConfig) -> None:
    """Refuses (ValueError) to send the kubeconfig's credential to conn's router in clear
    text. It goes to an https URL, an http URL of a loopback host (a port-forward:
    _proxy.is_loopback), from in-cluster configuration (the pod's service account; the
    in-cluster router Service is plain HTTP) or with the user's opt-in
    (RouterConnection.allow_plaintext_token, $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true).
    The rule of the CLI and the Go SDK."""
    u = urlsplit(conn.url)
    if u.scheme.lower() == "https" or cfg.in_cluster:
        return
    if conn.allow_plaintext_token or _env_true(ENV_ROUTER_ALLOW_PLAINTEXT_TOKEN):
        return
    host = u.hostname or ""
    if host and _proxy.is_loopback(host):
        return
    try:
        port = u.port or 80
    except ValueError:  # a port that is not a number: named as written
        port = None
    shown = f"[{host}]" if ":" in host else host
    where = f"{u.scheme or 'http'}://{shown}" + (f":{port}" if port is not None else "")
    raise ValueError(
        f"refusing to send the kubeconfig's credentials in clear text to {where} (not a loopback host); "
        f"use an https router URL, a port-forward to localhost, a router token (${ENV_ROUTER_TOKEN}), "
        f"or set {ENV_ROUTER_ALLOW_PLAINTEXT_TOKEN}=true"
    )


def router_source(conn: RouterConnection, cfg: KubeConfig | None) -> TokenSource:
    """Where conn's bearer token comes from: RouterConnection.token (as given), its
    token_file, $AGENT_SANDBOX_ROUTER_TOKEN (as given), else the kubeconfig's token
    file (it wins over its token), token or exec credential: these only where
    check_kube_credential_to_router allows them (ValueError otherwise). Every path that
    sends the router a token (target, port_target, the port clients' SourceAuth) takes
    it from here."""
    if conn.token:
        return TokenSource(literal=conn.token)
    if conn.token_file:
        return TokenSource(file=token_file(conn.token_file))
    if os.environ.get(ENV_ROUTER_TOKEN):
        return TokenSource(literal=os.environ[ENV_ROUTER_TOKEN])
    if cfg is None or not (cfg.token_file or cfg.token or cfg.exec_config):
        return TokenSource()  # no credential to send
    check_kube_credential_to_router(conn, cfg)
    if cfg.token_file:
        return TokenSource(literal=cfg.token, file=token_file(cfg.token_file))
    if cfg.token or not cfg.exec_config:
        return TokenSource(literal=cfg.token)
    return TokenSource(cfg=cfg)


def router_needs_exec(conn: Connection, cfg: KubeConfig | None) -> bool:
    """Whether conn is a router connection whose token is the kubeconfig's exec
    credential (not a literal, a token file, $AGENT_SANDBOX_ROUTER_TOKEN or the
    kubeconfig's own token): only then must a request fetch that credential."""
    return isinstance(conn, RouterConnection) and router_source(conn, cfg).cfg is not None


def router_token(conn: RouterConnection, cfg: KubeConfig | None) -> str | None:
    """conn's bearer token now."""
    return router_source(conn, cfg).get()


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
        src = router_source(conn, cfg)
        src.get()  # an unreadable token file fails here, before any request
        if conn.style == "path":
            base = f"{url}/s/{quote(namespace, safe='')}/{quote(name, safe='')}/{conn.port}"
            return Target(base, {}, mode="router", token=src)
        headers = {"X-Sandbox-ID": name, "X-Sandbox-Namespace": namespace, "X-Sandbox-Port": str(conn.port)}
        return Target(url, headers, mode="router", token=src)
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
