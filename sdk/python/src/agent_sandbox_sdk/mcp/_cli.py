"""agent-sandbox-mcp: the command line of the MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import argparse
import contextlib
import hmac
import ipaddress
import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_sandbox_sdk._proxy import is_loopback
from agent_sandbox_sdk.mcp._bounds import DEFAULT_MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES, Limits
from agent_sandbox_sdk.mcp._server import build_server
from agent_sandbox_sdk.mcp._tools import Options, Tools

ENV_AUTH_TOKEN = "AGENT_SANDBOX_MCP_TOKEN"


def binds_loopback_only(host: str) -> bool:
    """Whether serving on host reaches this machine's loopback only, so that HTTP may go
    without a token: a loopback IP address (the SDK's rule, _proxy.is_loopback) or the name
    ``localhost``. The other names is_loopback takes (``localhost.``, ``*.localhost``) are
    bound through the resolver, which may map them elsewhere: they need a token."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare == "localhost":
        return True
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return False
    return is_loopback(bare)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-sandbox-mcp",
        description="MCP server exposing Agent Sandbox sandboxes as tools (stdio or streamable HTTP).",
    )
    k = p.add_argument_group("cluster")
    k.add_argument("--namespace", help="namespace of the sandboxes (default: the kubeconfig context's)")
    k.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    k.add_argument("--context", help="kubeconfig context")
    k.add_argument(
        "--connection",
        choices=("auto", "router", "proxy", "direct"),
        default="auto",
        help="how requests reach sandboxd (default auto: router when a router URL is known, else pod proxy)",
    )
    k.add_argument("--router-url", help="sandbox router URL (default $AGENT_SANDBOX_ROUTER_URL)")
    k.add_argument(
        "--router-token-file",
        help="file holding the router's bearer token (default $AGENT_SANDBOX_ROUTER_TOKEN, else the kubeconfig's)",
    )
    k.add_argument(
        "--sandboxd-url",
        help="development and tests: serve the one sandboxd at this URL as sandbox 'local' (no cluster)",
    )
    s = p.add_argument_group("sandboxes")
    s.add_argument("--default-template", help="template create_sandbox uses when given neither template nor pool")
    s.add_argument("--default-pool", help="warm pool create_sandbox uses by default (preferred over the template)")
    s.add_argument("--create", dest="allow_create", action=argparse.BooleanOptionalAction, default=True,
                   help="allow create_sandbox (default on)")  # fmt: skip
    s.add_argument("--delete", dest="allow_delete", action=argparse.BooleanOptionalAction, default=True,
                   help="allow delete_sandbox (default on)")  # fmt: skip
    s.add_argument("--only-created", action="store_true",
                   help="only touch sandboxes this server created")  # fmt: skip
    s.add_argument("--cleanup", action="store_true", help="delete the sandboxes this server created when it stops")
    s.add_argument("--ttl", type=float,
                   help="TTL (seconds) of created sandboxes: the default and the most a call may ask")  # fmt: skip
    s.add_argument("--create-timeout", type=float, default=180.0, help="seconds to wait for a new sandbox")
    b = p.add_argument_group("bounds")
    b.add_argument("--max-output-bytes", type=int, default=DEFAULT_MAX_OUTPUT_BYTES,
                   help=f"per stream, file read and code result (default {DEFAULT_MAX_OUTPUT_BYTES})")  # fmt: skip
    b.add_argument("--max-image-bytes", type=int, default=Limits.image_bytes, help="per image of run_code")
    b.add_argument("--max-timeout", type=float, default=Limits.timeout, help="longest timeout a tool call may ask")
    t = p.add_argument_group("transport")
    t.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    t.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    t.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    t.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    t.add_argument(
        "--auth-token-file",
        help=f"HTTP: clients must send 'Authorization: Bearer <token>' with the token of this file "
        f"(or ${ENV_AUTH_TOKEN}); required for a non-loopback --host",
    )
    t.add_argument(
        "--allowed-origin",
        action="append",
        metavar="ORIGIN",
        help="HTTP: a browser Origin (e.g. https://app.example.com) allowed besides the server's own and "
        "loopback ones; others get 403 (repeatable)",
    )
    return p


def options(ns: argparse.Namespace) -> Options:
    if ns.max_output_bytes < MIN_OUTPUT_BYTES:
        raise SystemExit(f"agent-sandbox-mcp: --max-output-bytes must be at least {MIN_OUTPUT_BYTES}")
    if ns.max_image_bytes < 0 or ns.max_timeout <= 0:
        raise SystemExit("agent-sandbox-mcp: --max-image-bytes and --max-timeout must be positive")
    if ns.ttl is not None and not (math.isfinite(ns.ttl) and ns.ttl > 0):
        raise SystemExit("agent-sandbox-mcp: --ttl must be a positive number of seconds")
    limits = Limits(output_bytes=ns.max_output_bytes, image_bytes=ns.max_image_bytes, timeout=ns.max_timeout)
    return Options(
        namespace=ns.namespace,
        kubeconfig=ns.kubeconfig,
        context=ns.context,
        connection=ns.connection,
        router_url=ns.router_url,
        router_token_file=ns.router_token_file,
        sandboxd_url=ns.sandboxd_url,
        default_template=ns.default_template,
        default_pool=ns.default_pool,
        allow_create=ns.allow_create,
        allow_delete=ns.allow_delete,
        only_created=ns.only_created,
        cleanup=ns.cleanup,
        create_timeout=ns.create_timeout,
        default_ttl=ns.ttl,
        limits=limits,
    )


def auth_token(ns: argparse.Namespace) -> str | None:
    if ns.auth_token_file:
        tok = Path(ns.auth_token_file).read_text().strip()
        if not tok:
            raise SystemExit(f"agent-sandbox-mcp: {ns.auth_token_file} is empty")
        return tok
    return os.environ.get(ENV_AUTH_TOKEN) or None


class BearerAuth:
    """ASGI wrapper: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await self.app(scope, receive, send)


def origin_allowed(origin: str, host: str, allowed: Collection[str]) -> bool:
    """Whether a request with this Origin header may be served: one of allowed
    (--allowed-origin), the request's own origin (Origin's host and port are its Host), or
    a loopback one (http or https on 127.0.0.0/8, ::1, localhost)."""
    o = origin.strip().rstrip("/").lower()
    if o in allowed:
        return True
    try:
        u = urlsplit(o)
    except ValueError:
        return False
    if u.scheme not in ("http", "https") or not u.netloc:
        return False
    if host and u.netloc == host.strip().lower():
        return True
    return binds_loopback_only(u.hostname or "")


class OriginCheck:
    """ASGI wrapper: an HTTP request whose Origin (a browser's page) is neither the
    server's own, loopback, nor one of allowed gets 403. Requests without Origin (MCP
    clients that are not browsers) pass. With a bearer token too: a page of another site
    must not reach the server through a browser that holds the token (the MCP SDK checks
    Origin by itself on 127.0.0.1, localhost and ::1 only)."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(o.strip().rstrip("/").lower() for o in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            origin = headers.get(b"origin")
            host = headers.get(b"host", b"").decode("latin-1")
            if origin is not None and not origin_allowed(origin.decode("latin-1"), host, self.allowed):
                await send(
                    {"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"origin not allowed (see --allowed-origin)\n"})
                return
        await self.app(scope, receive, send)


GRACEFUL_STOP_SECONDS = 10
"""How long a stopping HTTP server waits for requests in flight before cancelling them."""


def transport_security(host: str, token: str | None, origins: Sequence[str] = ()) -> TransportSecuritySettings | None:
    """The MCP SDK's DNS-rebinding protection for a token-free bind (loopback only, see
    binds_loopback_only): Host and Origin must name this machine's loopback. The SDK turns
    it on by itself for 127.0.0.1, localhost and ::1 only, so a bind on 127.0.0.2 or
    ::ffff:127.0.0.1 was open to a page whose name resolves there. With a bearer token
    (which a page cannot know) the SDK's own default stays."""
    if token:
        return None
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    names = ["127.0.0.1", "localhost", "[::1]", f"[{bare}]" if ":" in bare else bare]
    names = list(dict.fromkeys(names))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"http://{n}:*" for n in names] + [o.rstrip("/") for o in origins],
    )


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: _serve's handler asks it to stop, and
    the server's cleanup runs before the process exits."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _stop_web(web: _Uvicorn, first: bool) -> None:
    """Asks the HTTP server to stop. The first time, open event streams (a client's
    standalone GET stream) are ended too: sse_starlette ends them when it sees
    AppStatus.should_exit, which uvicorn's own signal handler would have set; without it
    uvicorn waits for those connections for ever and the clean-up never runs. A second
    signal stops without waiting for requests in flight."""
    if first:
        AppStatus.should_exit = True
        web.should_exit = True
    else:
        web.force_exit = True


async def _serve(ns: argparse.Namespace, tools: Tools, token: str | None) -> None:
    server = build_server(tools)
    web: _Uvicorn | None = None
    if ns.transport == "http":
        app: ASGIApp = server.streamable_http_app(
            streamable_http_path=ns.path,
            host=ns.host,
            transport_security=transport_security(ns.host, token, ns.allowed_origin or ()),
        )
        if token:
            app = BearerAuth(app, token)
        app = OriginCheck(app, ns.allowed_origin or ())
        AppStatus.should_exit = False
        web = _Uvicorn(
            uvicorn.Config(
                app,
                host=ns.host,
                port=ns.port,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
            )
        )
    # One receiver for the whole run: a signal during the clean-up must not meet the
    # default action (death with the sandboxes left behind) but cut the clean-up short.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as sigs:
        try:
            async with anyio.create_task_group() as tg:

                async def on_signals() -> None:
                    first = True
                    async for _ in sigs:
                        if web is not None:
                            _stop_web(web, first)
                        else:
                            tg.cancel_scope.cancel()
                        first = False

                tg.start_soon(on_signals)
                if web is not None:
                    await web.serve()
                else:
                    await server.run_stdio_async()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await _clean_up(tools, sigs)


async def _clean_up(tools: Tools, sigs: AsyncIterator[int]) -> None:
    """tools.aclose() (--cleanup's deletes), cut short by a signal."""
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            async for _ in sigs:
                print("agent-sandbox-mcp: clean-up cut short by a signal", file=sys.stderr)
                tg.cancel_scope.cancel()

        tg.start_soon(on_signal)
        await tools.aclose()
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> None:
    ns = parser().parse_args(argv)
    opts = options(ns)
    token = auth_token(ns) if ns.transport == "http" else None
    if ns.transport == "http" and not token and not binds_loopback_only(ns.host):
        raise SystemExit(
            f"agent-sandbox-mcp: refusing to serve HTTP on {ns.host} without --auth-token-file "
            f"(or ${ENV_AUTH_TOKEN}): anyone reaching it could run code in your sandboxes"
        )
    try:
        tools = Tools(opts)
    except ValueError as e:
        raise SystemExit(f"agent-sandbox-mcp: {e}") from None
    try:
        anyio.run(_serve, ns, tools, token)
    except KeyboardInterrupt:
        pass
    sys.exit(0)
