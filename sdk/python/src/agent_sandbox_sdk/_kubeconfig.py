"""A small kubeconfig / in-cluster configuration loader.

Supports what real kubeconfigs use: server URL, CA (file or data), client certificates
(file or data), bearer tokens (inline or file, re-read on every request so rotated
tokens are picked up), basic auth, ``insecure-skip-tls-verify``, ``tls-server-name``,
``proxy-url`` and exec credential plugins (client.authentication.k8s.io). Auth-provider
plugins are not supported.

An exec plugin runs once for all callers waiting on it, in whichever thread asks first;
the async client's callers await a run in a worker thread (``bearer_token_async``), one
per event loop at a time, so the loop goes on while the plugin runs. The async client's
TLS context (AsyncTLS) takes a plugin's client certificate the same way, before its first
connection, not when the client is made."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from .errors import SandboxError

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(SandboxError):
    """The kubeconfig or in-cluster configuration is missing or unusable."""


@dataclass
class KubeConfig:
    """Everything needed to talk to one API server."""

    server: str
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: str | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    # secrets stay out of repr() (logs, tracebacks' locals, debuggers)
    key_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    exec_config: dict[str, Any] | None = None
    in_cluster: bool = False
    base_dir: str = "."
    # tls-server-name: the name given (SNI) and checked in the server's certificate
    # instead of the server URL's host; proxy-url: the proxy every request to the server
    # goes through (the environment's proxies are not asked then), as client-go's
    tls_server_name: str | None = None
    proxy_url: str | None = None
    _exec_cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Guards _exec_cache: httpx's auth hook, the lean POST connection and the port
    # helpers may ask for the token from several threads at once; the plugin runs once.
    _exec_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Plugin runs ended so far, and the error of the last one when it failed: a caller
    # that waited on the lock while a run failed shares that failure (no run of its own).
    _exec_runs: int = field(default=0, repr=False, compare=False)
    _exec_error: ConfigError | None = field(default=None, repr=False, compare=False)
    # The async callers' plugin run in flight (a worker thread's), awaited by all of them.
    _exec_task: asyncio.Task[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    # How many times a plugin run gave another client certificate than the run before
    # (_cert_last: that certificate and key, kept apart from the cache, which a 401 empties):
    # clients compare it with their TLS context's (CertRenewal).
    _cert_gen: int = field(default=0, repr=False, compare=False)
    _cert_last: tuple[str, str] = field(default=("", ""), repr=False, compare=False)

    def ssl_context(self) -> ssl.SSLContext:
        """Returns a TLS context with the CA and client certificate loaded. An exec plugin
        whose credential is due runs here, on the calling thread (it may give the client
        certificate): async callers use AsyncTLS instead."""
        return self.ssl_context_gen()[0]

    def ssl_context_gen(self) -> tuple[ssl.SSLContext, int]:
        """ssl_context(), and the client certificate generation it holds (CertRenewal)."""
        ctx = self._ca_context()
        self._load_client_cert(ctx, self._exec_credential())
        return ctx, self._cert_gen  # the run's, but for a second run in between (rare)

    def _ca_context(self) -> ssl.SSLContext:
        """The TLS context's verification (the CA, or none with insecure) without a
        client certificate."""
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data:
            ctx = ssl.create_default_context(cadata=self.ca_data)
        elif self.ca_file:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        else:
            ctx = ssl.create_default_context()
        if self.tls_server_name:
            ctx.__class__ = ServerNameContext  # the same context, but for the name it checks
            assert isinstance(ctx, ServerNameContext)
            ctx.server_name = self.tls_server_name
        return ctx

    def _load_client_cert(self, ctx: ssl.SSLContext, ex: dict[str, Any]) -> None:
        """Loads the client certificate into ctx: the exec credential ex's (the plugin's
        status, {} without one), else the kubeconfig's data or files, if any."""
        cert, key = self.cert_data, self.key_data
        if ex.get("clientCertificateData"):
            cert = str(ex["clientCertificateData"]).encode()
            key = str(ex.get("clientKeyData", "")).encode()
        if self.cert_file and not cert:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        elif cert:
            _load_cert_data(ctx, cert, key or b"")

    def bearer_token(self) -> str | None:
        """The current bearer token (a token file is re-read each time). Safe to call from
        several threads: an exec plugin runs once for all callers waiting on it. A token
        file wins over a literal token, which is the fallback while the file cannot be
        read or is empty (as client-go)."""
        if self.token_file:
            try:
                tok = Path(self.token_file).read_text().strip()
            except OSError as e:
                if self.token:
                    return self.token
                raise ConfigError(f"cannot read the token file {self.token_file}: {e}") from e
            return tok or self.token or None
        if self.token:
            return self.token
        ex = self._exec_credential().get("token")
        return str(ex) if ex else None

    async def bearer_token_async(self) -> str | None:
        """bearer_token for async callers: an exec plugin that has to run runs in a worker
        thread, and callers at once await the same run."""
        if self.token_file or self.token:
            return self.bearer_token()
        tok = (await self.exec_credential_async()).get("token")
        return str(tok) if tok else None

    async def exec_credential_async(self) -> dict[str, Any]:
        """The exec plugin's current credential (its ExecCredential status; {} without a
        plugin) without blocking the event loop: a fresh cached one at once, else the
        result of the one run in flight, started here in a worker thread when there is
        none (the sync path's run: its timeout, errors and cache). A cancelled caller
        leaves the run going for the others."""
        if not self.exec_config:
            return {}
        fresh = self._exec_fresh()
        if fresh is not None:
            return fresh
        loop = asyncio.get_running_loop()
        task = self._exec_task
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._exec_task = loop.create_task(asyncio.to_thread(self._exec_credential))
        return dict(await asyncio.shield(task))

    def auth(self) -> httpx.Auth | None:
        """An httpx auth hook for this configuration, or None."""
        if self.username is not None and self.password is not None:
            return httpx.BasicAuth(self.username, self.password)
        if self.token or self.token_file or self.exec_config:
            return _BearerAuth(self)
        return None

    def _exec_credential(self) -> dict[str, Any]:
        if not self.exec_config:
            return {}
        runs = self._exec_runs  # before the wait on the lock: a run ending meanwhile is the one waited for
        with self._exec_lock:
            err = self._exec_error
            if err is not None and self._exec_runs != runs:
                raise ConfigError(str(err)) from err
            return self._exec_credential_locked(self.exec_config)

    def exec_generation(self) -> int:
        """How many times the exec plugin has run (0 without one): taken before a request,
        it tells invalidate_exec whether the credential the request carried is still the
        cached one."""
        return self._exec_runs

    def invalidate_exec(self, generation: int) -> bool:
        """After the API server rejected a request's credentials (401): forgets the exec
        plugin's cached credential when it is still the one of generation (no run since),
        so that the next request runs the plugin again, as client-go does: a credential
        without expirationTimestamp was otherwise kept for ever, and a rotated or revoked
        one failed every later call. Returns whether a request should be made again (an
        exec plugin is configured and a fresh credential can be had)."""
        if not self.exec_config or self.token_file or self.token:
            return False
        with self._exec_lock:
            if self._exec_runs == generation:
                self._exec_cache.clear()
        return True

    def _exec_fresh(self) -> dict[str, Any] | None:
        """The cached credential while it has more than 10 s left (or no expiry), else None."""
        status, exp = self._exec_cache.get("status"), self._exec_cache.get("expires", 0.0)
        if status is not None and (exp == 0.0 or exp > time.time() + 10):
            return dict(status)
        return None

    def _exec_credential_locked(self, exec_config: dict[str, Any]) -> dict[str, Any]:
        fresh = self._exec_fresh()
        if fresh is not None:
            return fresh
        self._exec_error = None
        try:
            status = _run_exec_plugin(exec_config, self.base_dir)
            expires = _expiry(status.get("expirationTimestamp"))
        except ConfigError as e:
            self._exec_error = e
            raise
        finally:
            self._exec_runs += 1
        cert = _client_cert(status)
        self._exec_cache.update(status=status, expires=expires)
        if cert != self._cert_last:  # after it: whoever sees the generation finds it
            self._cert_last = cert
            self._cert_gen += 1
        return status


class ServerNameContext(ssl.SSLContext):
    """A TLS context that gives server_name (kubeconfig's tls-server-name) for SNI and
    checks the server's certificate against it, whatever host name a connection passes:
    http.client, asyncio and httpx (through a proxy's tunnel too, where httpx's
    sni_hostname extension is not used) all pass the server URL's host."""

    server_name: str = ""

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        name = server_hostname if server_side else self.server_name
        return super().wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, name, session)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        name = server_hostname if server_side else self.server_name
        return super().wrap_bio(incoming, outgoing, server_side, name, session)


class AsyncTLS:
    """The async clients' TLS context for the API server, made without blocking the event
    loop. ssl_context() would run an exec plugin whose credential is due on the calling
    thread (the plugin may give the client certificate), stalling the loop for as long as
    it runs (``aws eks get-token``, ``gke-gcloud-auth-plugin``: seconds). Instead ``ctx``
    is made at once with the CA (and verification) only, and ``ready()``, awaited before
    a connection is made, loads the client certificate into it once (the plugin's, else
    the kubeconfig's), the plugin run awaited in a worker thread (exec_credential_async:
    the run the bearer token shares). Without a plugin to run, or for a plain-http server,
    ``ctx`` is complete at once. As with ssl_context(), the context keeps the client
    certificate it was given."""

    def __init__(self, cfg: KubeConfig) -> None:
        self.cfg = cfg
        self.ctx = cfg._ca_context()
        self.renewal = CertRenewal(cfg, cfg._cert_gen)  # the certificate generation ctx holds
        cached = cfg._exec_fresh() if cfg.exec_config else {}  # never runs the plugin
        if cached is not None:
            cfg._load_client_cert(self.ctx, cached)
        # a plain-http server takes no client certificate: nothing to wait for
        self.pending = cached is None and cfg.server.lower().startswith("https:")

    async def ready(self) -> ssl.SSLContext:
        """ctx, with its client certificate loaded (a due plugin run awaited off the loop).
        Raises ConfigError when the plugin fails (the next call runs it again)."""
        if self.pending:
            ex = await self.cfg.exec_credential_async()
            if self.pending:  # not loaded meanwhile by another caller awaiting the same run
                self.cfg._load_client_cert(self.ctx, ex)
                self.renewal.gen = self.cfg._cert_gen  # ex's, as in ssl_context_gen
                self.pending = False
        return self.ctx

    def renewed(self) -> ssl.SSLContext | None:
        """Once ready: a new context when a later plugin run gave another client
        certificate (CertRenewal), else None."""
        if self.pending or not self.renewal.due():
            return None
        ctx = self.renewal.context()
        if ctx is not None:
            self.ctx = ctx
        return ctx


class CertRenewal:
    """Follows an exec plugin's client certificate for one client. A TLS context keeps
    the certificate it was given, and a plugin that gives one runs again when its
    credential expires (or after a 401): due() tells when a later run gave another
    certificate than the one of the client's context (gen: the generation that context
    holds, ssl_context_gen); context() then makes the new context from the cached
    credential (no plugin run; the CA's as before). The client connects with it from
    then on and drops connections made with the old one: an API server checks a client
    certificate on every request, so an expired one fails on a kept-alive connection
    too. Thread-safe; never blocks on a plugin run."""

    def __init__(self, cfg: KubeConfig, gen: int) -> None:
        self.cfg = cfg
        self.gen = gen
        self._lock = threading.Lock()

    def due(self) -> bool:
        return bool(self.cfg.exec_config) and self.cfg._cert_gen != self.gen

    def context(self) -> ssl.SSLContext | None:
        """The TLS context with the newest certificate, or None when another caller
        renewed it first (or nothing changed)."""
        with self._lock:
            gen = self.cfg._cert_gen  # read before the certificate: never newer than it
            if gen == self.gen:
                return None
            cert, key = self.cfg._cert_last
            ctx = self.cfg._ca_context()
            self.cfg._load_client_cert(ctx, {"clientCertificateData": cert, "clientKeyData": key})
            self.gen = gen
            return ctx


def _client_cert(status: dict[str, Any]) -> tuple[str, str]:
    return str(status.get("clientCertificateData") or ""), str(status.get("clientKeyData") or "")


class _BearerAuth(httpx.Auth):
    def __init__(self, cfg: KubeConfig) -> None:
        self._cfg = cfg

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        tok = self._cfg.bearer_token()  # thread-safe: KubeConfig guards its exec cache
        if tok:
            request.headers["Authorization"] = f"Bearer {tok}"
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        tok = await self._cfg.bearer_token_async()  # an exec plugin runs off the event loop
        if tok:
            request.headers["Authorization"] = f"Bearer {tok}"
        yield request


def _load_cert_data(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads client certificates from files: write them to a private temporary
    directory, load them and remove them at once."""
    with tempfile.TemporaryDirectory(prefix="agent-sandbox-") as d:
        cp, kp = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        for p, data in ((cp, cert), (kp, key)):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cp, kp if key else None)


EXEC_TIMEOUT = 60.0
"""Seconds an exec credential plugin may run."""

EXEC_STDERR_CHARS = 200
"""How much of a failed exec plugin's stderr its error quotes (the last characters)."""


def _exec_failure(e: OSError | subprocess.SubprocessError) -> str:
    """What went wrong with an exec plugin run, without its arguments (subprocess's own
    texts quote the whole argv): the exit status or the timeout, and the end of the
    plugin's stderr, cut to EXEC_STDERR_CHARS."""
    if isinstance(e, OSError):
        return e.strerror or type(e).__name__
    if isinstance(e, subprocess.CalledProcessError):
        what = f"exit status {e.returncode}" if e.returncode >= 0 else f"killed by signal {-e.returncode}"
    elif isinstance(e, subprocess.TimeoutExpired):
        what = f"no answer within {e.timeout:g} s"
    else:
        what = type(e).__name__
    raw = getattr(e, "stderr", None) or b""
    err = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)).strip()
    if not err:
        return what
    if len(err) > EXEC_STDERR_CHARS:
        err = "..." + err[-EXEC_STDERR_CHARS:]
    return f"{what}: {' '.join(err.split())}"


def _run_exec_plugin(cfg: dict[str, Any], base_dir: str) -> dict[str, Any]:
    cmd = [str(cfg.get("command", ""))] + [str(a) for a in cfg.get("args") or []]
    env = dict(os.environ)
    for e in cfg.get("env") or []:
        env[str(e["name"])] = str(e["value"])
    api = cfg.get("apiVersion", "client.authentication.k8s.io/v1")
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    try:
        out = subprocess.run(cmd, env=env, cwd=base_dir, capture_output=True, check=True, timeout=EXEC_TIMEOUT).stdout
    except (OSError, subprocess.SubprocessError) as e:
        # from None: the exception's own text (and a traceback's) holds the whole argv,
        # where plugins take secrets (--oidc-client-secret=...)
        raise ConfigError(f"the kubeconfig's exec credential plugin {cmd[0]!r} failed: {_exec_failure(e)}") from None
    try:
        doc = json.loads(out)
    except ValueError as e:
        raise ConfigError(f"the kubeconfig's exec credential plugin {cmd[0]!r} printed no JSON: {e}") from e
    status = (doc.get("status") if isinstance(doc, dict) else None) or {}
    if not isinstance(status, dict):
        raise ConfigError("the exec credential plugin printed no status")
    return status


_FRACTION = re.compile(r"(:\d\d)\.(\d+)")


def _expiry(ts: Any) -> float:
    """The POSIX time of an ExecCredential's expirationTimestamp (RFC 3339); 0.0 for none.
    ConfigError when it is not a timestamp. A fraction of a second of any length (Go's
    RFC3339Nano gives up to 9 digits, trailing zeros dropped) is made 6 digits first:
    Python 3.10's fromisoformat takes only 3 or 6."""
    if not ts:
        return 0.0
    text = str(ts).strip().replace("Z", "+00:00").replace("z", "+00:00")
    text = _FRACTION.sub(lambda m: f"{m[1]}.{(m[2] + '000000')[:6]}", text, count=1)
    try:
        return datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError, OSError) as e:
        raise ConfigError(f"the exec credential plugin's expirationTimestamp {ts!r} is not an RFC 3339 time") from e


def _b64(v: Any) -> bytes:
    return base64.b64decode(str(v))


def _path(base: str, p: Any) -> str:
    s = str(p)
    return s if os.path.isabs(s) else os.path.join(base, s)


def _flag(section: dict[str, Any], key: str, path: str) -> bool:
    """A boolean field: a YAML boolean only (absent or null: false). Anything else, a
    quoted "false" above all (bool("false") is True), is a ConfigError naming the field,
    not a guess: for insecure-skip-tls-verify a wrong guess turns TLS verification off."""
    v = section.get(key)
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    raise ConfigError(f"{path}: {key} must be true or false (a YAML boolean, unquoted), not {v!r}")


def _text(section: dict[str, Any], key: str, path: str) -> str | None:
    """A string field (absent, null or empty: None); anything else is a ConfigError."""
    v = section.get(key)
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise ConfigError(f"{path}: {key} must be a string, not {v!r}")
    return v


PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _proxy_url(cluster: dict[str, Any], path: str) -> str | None:
    """The cluster's proxy-url: an http, https or socks5 URL with a host (client-go's
    schemes; socks5 needs httpx's socks extra)."""
    url = _text(cluster, "proxy-url", path)
    if url is None:
        return None
    try:
        u = urlsplit(url)
        ok = u.scheme.lower() in PROXY_SCHEMES and bool(u.hostname) and (u.port or 0) >= 0  # a bad port raises
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{path}: proxy-url must be an http, https or socks5 URL with a host, not {url!r}")
    return url


@dataclass
class _Entry:
    """A context, cluster or user of a kubeconfig file: its fields, the file, and that
    file's directory (its relative paths' base)."""

    fields: dict[str, Any]
    path: str
    base: str


_SECTIONS = (("contexts", "context"), ("clusters", "cluster"), ("users", "user"))


def _kubeconfig_files(path: str | os.PathLike[str] | None) -> list[str]:
    """``path`` alone, else $KUBECONFIG's entries (empty ones dropped, each once), else
    ~/.kube/config."""
    if path:
        return [str(path)]
    files = list(dict.fromkeys(e for e in os.environ.get("KUBECONFIG", "").split(os.pathsep) if e))
    return files or [os.path.expanduser("~/.kube/config")]


def _read_kubeconfigs(files: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Each file's document. Of several files (a $KUBECONFIG list), a missing one is
    skipped, as kubectl does; any other read error, or none left, is a ConfigError."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for p in files:
        try:
            text = Path(p).read_text()
        except FileNotFoundError as e:
            if len(files) > 1:
                continue
            raise ConfigError(f"cannot read the kubeconfig {p}: {e}; pass kubeconfig=... or set $KUBECONFIG") from e
        except OSError as e:
            raise ConfigError(f"cannot read the kubeconfig {p}: {e}; pass kubeconfig=... or set $KUBECONFIG") from e
        doc = yaml.safe_load(text) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{p}: not a kubeconfig (no mapping at its top)")
        docs.append((p, doc))
    if not docs:
        raise ConfigError(
            f"cannot read the kubeconfig: none of $KUBECONFIG's files exists ({', '.join(files)}); "
            "pass kubeconfig=... or set $KUBECONFIG"
        )
    return docs


def _pick(entries: dict[str, _Entry], name: str, what: str, where: str) -> _Entry:
    entry = entries.get(name)
    if entry is None:
        raise ConfigError(f"{where}: no {what} named {name!r}")
    return entry


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """Loads a kubeconfig: the file ``path``, else the files of $KUBECONFIG merged as
    kubectl merges them, else ~/.kube/config. Of a $KUBECONFIG list, empty and missing
    entries are skipped; the first context, cluster and user of each name wins, and the
    current-context is that of the first file that sets one; each entry's relative paths
    are taken from its own file's directory. ``context`` defaults to the current-context."""
    docs = _read_kubeconfigs(_kubeconfig_files(path))
    where = docs[0][0] if len(docs) == 1 else f"$KUBECONFIG ({', '.join(p for p, _ in docs)})"
    named: dict[str, dict[str, _Entry]] = {section: {} for section, _ in _SECTIONS}
    current = ""
    for p, doc in docs:
        base = os.path.dirname(os.path.abspath(p))
        current = current or str(doc.get("current-context") or "")
        for section, key in _SECTIONS:
            for it in doc.get(section) or []:
                name = it.get("name") if isinstance(it, dict) else None
                if isinstance(name, str) and name not in named[section]:
                    named[section][name] = _Entry(dict(it.get(key) or {}), p, base)
    ctx_name = context or current
    if not ctx_name:
        raise ConfigError(f"{where}: no current-context; pass context=...")
    ctx = _pick(named["contexts"], ctx_name, "context", where).fields
    cl = _pick(named["clusters"], str(ctx.get("cluster")), "cluster", where)
    cluster, cp = cl.fields, cl.path
    user = _pick(named["users"], str(ctx.get("user")), "user", where) if ctx.get("user") else None
    cfg = KubeConfig(
        server=str(cluster.get("server", "")).rstrip("/"),
        namespace=str(ctx.get("namespace") or "default"),
        insecure=_flag(cluster, "insecure-skip-tls-verify", cp),
        base_dir=user.base if user is not None else cl.base,  # an exec plugin's working directory
    )
    if not cfg.server:
        raise ConfigError(f"{cp}: cluster {ctx.get('cluster')!r} has no server")
    cfg.tls_server_name = _text(cluster, "tls-server-name", cp)
    cfg.proxy_url = _proxy_url(cluster, cp)
    if cluster.get("certificate-authority-data"):
        cfg.ca_data = _b64(cluster["certificate-authority-data"]).decode()
    elif cluster.get("certificate-authority"):
        cfg.ca_file = _path(cl.base, cluster["certificate-authority"])
    if user is not None:
        _apply_user(cfg, user.fields, user.base)
    return cfg


def _apply_user(cfg: KubeConfig, user: dict[str, Any], base: str) -> None:
    if user.get("client-certificate-data"):
        cfg.cert_data = _b64(user["client-certificate-data"])
        cfg.key_data = _b64(user.get("client-key-data", ""))
    elif user.get("client-certificate"):
        cfg.cert_file = _path(base, user["client-certificate"])
        cfg.key_file = _path(base, user["client-key"]) if user.get("client-key") else None
    # both: the file wins, re-read as it rotates; the token is its fallback (bearer_token)
    if user.get("token"):
        cfg.token = str(user["token"])
    if user.get("tokenFile"):
        cfg.token_file = _path(base, user["tokenFile"])
    if user.get("username") is not None:
        cfg.username, cfg.password = str(user["username"]), str(user.get("password", ""))
    if user.get("exec"):
        cfg.exec_config = dict(user["exec"])
    if user.get("auth-provider"):
        raise ConfigError("kubeconfig auth-provider plugins are not supported; use exec")


def in_cluster() -> bool:
    """True when running in a pod with a service account token mounted."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SA_DIR / "token").exists()


def load_in_cluster() -> KubeConfig:
    """The configuration of the pod's service account."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (SA_DIR / "token").exists():
        raise ConfigError("not running in a cluster (no KUBERNETES_SERVICE_HOST or token)")
    if ":" in host:
        host = f"[{host}]"
    ns_file = SA_DIR / "namespace"
    ns = ns_file.read_text().strip() if ns_file.exists() else "default"
    return KubeConfig(
        server=f"https://{host}:{port}",
        namespace=ns,
        ca_file=str(SA_DIR / "ca.crt"),
        token_file=str(SA_DIR / "token"),
        in_cluster=True,
    )


def load_config(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """An explicit kubeconfig wins; else the in-cluster service account when running in
    a pod; else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig is None and context is None and in_cluster() and not os.environ.get("KUBECONFIG"):
        return load_in_cluster()
    return load_kubeconfig(kubeconfig, context)
