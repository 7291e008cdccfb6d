"""The environment's proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) on the SDK's
own httpx clients, which pass transports of their own (so httpx does not read the
environment for them): the API client (its lean connections step aside for httpx when a
proxy applies), the client to sandboxd and the port helpers' clients, sync and async,
against a local recording proxy; NO_PROXY (its CIDR ranges too), ``*``, loopback hosts
(all of 127.0.0.0/8, ``::1``, ``localhost`` and ``*.localhost``: _proxy.is_loopback, Go's
rule) and the in-cluster API server's host go direct."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import AsyncSandboxClient, DirectConnection, KubeConfig, PortURL, SandboxClient, _ports, _proxy
from agent_sandbox_sdk.errors import SandboxConnectionError

from .fakes import Recorder

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
ORIGIN = "origin.example.test"  # resolved to 127.0.0.1 by the names fixture


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for k in PROXY_VARS + tuple(v.lower() for v in PROXY_VARS):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # tests may run in a pod
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def local_name(name: str) -> bool:
    """Names the names fixture resolves to 127.0.0.1."""
    n = name.lower().removesuffix(".")
    return n.endswith((".example.test", ".localhost")) or n == "localhost"


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    """*.example.test resolves to 127.0.0.1 (for direct connections: a proxy is asked by
    name), so a request to it is not a loopback one; so do localhost and *.localhost in any
    case and with a trailing dot, whatever the system's resolver makes of them."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        return real("127.0.0.1" if isinstance(name, str) and local_name(name) else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def servers(names: None) -> Iterator[tuple[Recorder, Recorder]]:
    """A proxy and the origin server, each recording what reaches it."""
    with Recorder() as proxy, Recorder() as origin:
        yield proxy, origin


def sync_calls(base: str) -> None:
    """A lean-path GET, an httpx LIST and a request to sandboxd, all to base."""
    c = SandboxClient(config=KubeConfig(server=base, token="t"), connection=DirectConnection(url=base))
    try:
        c.kube.get("sandboxes", "ns", "a")
        c.kube.list("sandboxes", "ns")
        c.http.get(f"{base}/v1/health").raise_for_status()
    finally:
        c.close()


async def async_calls(base: str) -> None:
    """sync_calls on the async client."""
    c = AsyncSandboxClient(config=KubeConfig(server=base, token="t"), connection=DirectConnection(url=base))
    try:
        await c.kube.get("sandboxes", "ns", "a")
        await c.kube.list("sandboxes", "ns")
        (await c.http.get(f"{base}/v1/health")).raise_for_status()
    finally:
        await c.aclose()


CASES = [
    # (environment, host, whether the proxy gets the requests)
    ({"HTTP_PROXY": "{proxy}"}, ORIGIN, True),
    ({"http_proxy": "{proxy}"}, ORIGIN, True),
    ({"ALL_PROXY": "{proxy}"}, ORIGIN, True),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "example.test"}, ORIGIN, False),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": f"other.test, {ORIGIN}"}, ORIGIN, False),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "*"}, ORIGIN, False),
    ({"HTTPS_PROXY": "{proxy}"}, ORIGIN, False),  # a proxy for https only
    ({"HTTP_PROXY": "{proxy}"}, "127.0.0.1", False),  # loopback: never proxied
    ({"HTTP_PROXY": "{proxy}"}, "localhost", False),
    ({"HTTP_PROXY": "{proxy}"}, "LocalHost.", False),  # any case, a trailing dot
    ({"HTTP_PROXY": "{proxy}"}, "api.localhost", False),  # RFC 6761
    ({"HTTP_PROXY": "{proxy}"}, "localhost.example.test", True),  # not a loopback name
    ({}, ORIGIN, False),
]


def check(proxy: Recorder, origin: Recorder, host: str, via_proxy: bool) -> None:
    base = f"http://{host}:{origin.port}"
    got, idle = (proxy, origin) if via_proxy else (origin, proxy)
    assert idle.seen == []
    # through a proxy a plain-http request names the absolute URI
    want = [base + p if via_proxy else p for p in ("/apis/", "/apis/", "/v1/health")]
    assert len(got.seen) == 3 and got.seen[0]["authorization"] == "Bearer t"
    assert [r["target"][: len(w)] for r, w in zip(got.seen, want, strict=True)] == want


@pytest.mark.parametrize(("env", "host", "via_proxy"), CASES)
def test_sync_clients_take_the_environment_proxy(
    monkeypatch: pytest.MonkeyPatch,
    servers: tuple[Recorder, Recorder],
    env: dict[str, str],
    host: str,
    via_proxy: bool,
) -> None:
    proxy, origin = servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    sync_calls(f"http://{host}:{origin.port}")
    check(proxy, origin, host, via_proxy)


@pytest.mark.parametrize(("env", "host", "via_proxy"), CASES)
async def test_async_clients_take_the_environment_proxy(
    monkeypatch: pytest.MonkeyPatch,
    servers: tuple[Recorder, Recorder],
    env: dict[str, str],
    host: str,
    via_proxy: bool,
) -> None:
    proxy, origin = servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    await async_calls(f"http://{host}:{origin.port}")
    check(proxy, origin, host, via_proxy)


def test_https_goes_through_the_proxys_tunnel(
    monkeypatch: pytest.MonkeyPatch, servers: tuple[Recorder, Recorder]
) -> None:
    """An https API server behind HTTPS_PROXY is asked for with CONNECT (refused here)."""
    proxy, _ = servers
    set_env(monkeypatch, {"HTTPS_PROXY": f"127.0.0.1:{proxy.port}"})  # no scheme: http://
    c = SandboxClient(config=KubeConfig(server=f"https://{ORIGIN}:6443", token="t", insecure=True))
    try:
        with pytest.raises(SandboxConnectionError):
            c.kube.get("sandboxes", "ns", "a")
    finally:
        c.close()
    assert [r["target"] for r in proxy.seen][:1] == [f"{ORIGIN}:6443"]
    assert {r["method"] for r in proxy.seen} == {"CONNECT"}


@pytest.mark.parametrize(
    ("env", "url", "want"),
    [
        ({}, "https://api.example.com", None),
        ({"HTTPS_PROXY": "p:3128"}, "https://api.example.com", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://api.example.com", None),
        ({"HTTP_PROXY": "http://p", "ALL_PROXY": "http://a"}, "https://x.test", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "example.com"}, "https://example.com", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "example.com"}, "https://api.example.com", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "example.com"}, "https://badexample.com", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": ".example.com"}, "https://example.com", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": ".example.com"}, "https://api.example.com", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "10.0.0.1,fd00::1"}, "https://10.0.0.1:6443", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "10.0.0.1,fd00::1"}, "https://[fd00::1]:6443", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "http://h:8080"}, "http://h:8080", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "http://h:8080"}, "http://h:8081", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "10.0.0.0/8,bad:x:y"}, "https://11.1.2.3", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": "10.0.0.0/8,bad:x:y"}, "https://10.1.2.3", None),
        ({"ALL_PROXY": "http://a", "NO_PROXY": " * "}, "https://x.test", None),
        ({"ALL_PROXY": "http://a"}, "https://127.0.0.1:6443", None),
        ({"ALL_PROXY": "http://a"}, "http://[::1]:8080", None),
        ({"ALL_PROXY": "http://a"}, "http://localhost:8080", None),
    ],
)
def test_proxy_rules(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, want: str | None) -> None:
    """httpx's rules for the environment's proxies (and loopback hosts never proxied, CIDR
    ranges: test_proxy_rules_cidr)."""
    set_env(monkeypatch, env)
    assert _proxy.proxy_for(url) == want


A = {"ALL_PROXY": "http://a"}


@pytest.mark.parametrize(
    ("env", "url", "want"),
    [
        # NO_PROXY's CIDR ranges keep IP-address hosts in them direct (as Go's net/http)
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://10.1.2.3:6443", None),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://10.0.0.0", None),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://10.255.255.255", None),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://11.0.0.1:6443", "http://a"),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://172.16.0.1", "http://a"),
        ({**A, "NO_PROXY": " 192.168.0.0/16 , 172.16.0.0/12"}, "https://172.31.9.9", None),
        ({**A, "NO_PROXY": "172.16.0.0/12"}, "https://172.32.0.1", "http://a"),
        ({**A, "NO_PROXY": "10.96.0.1/32"}, "https://10.96.0.1:443", None),
        ({**A, "NO_PROXY": "10.96.0.1/32"}, "https://10.96.0.2:443", "http://a"),
        ({**A, "NO_PROXY": "10.1.2.3/8"}, "https://10.9.9.9", None),  # host bits set: 10.0.0.0/8
        ({**A, "NO_PROXY": "0.0.0.0/0"}, "https://8.8.8.8", None),
        ({**A, "NO_PROXY": "fd00::/8"}, "https://[fd00::1]:6443", None),
        ({**A, "NO_PROXY": "fd00::/8"}, "https://[fd12:3456::9]", None),
        ({**A, "NO_PROXY": "fd00::/8"}, "https://[fe80::1]", "http://a"),
        ({**A, "NO_PROXY": "[fd00::]/8"}, "https://[fd00::1]", None),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://[::ffff:10.1.2.3]", None),  # IPv4-mapped
        # a range matches its own address family: no IPv4 host in an IPv6 range
        ({**A, "NO_PROXY": "fd00::/8"}, "https://10.1.2.3", "http://a"),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://[fd00::1]", "http://a"),
        # host names are not resolved to be matched against ranges (as in Go)
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://api.example.com", "http://a"),
        ({**A, "NO_PROXY": "10.0.0.0/8"}, "https://10.example.com", "http://a"),
        # the rest of NO_PROXY still applies alongside ranges
        ({**A, "NO_PROXY": "10.0.0.0/8,example.com"}, "https://api.example.com", None),
        ({**A, "NO_PROXY": "10.0.0.0/8,example.com"}, "https://other.test", "http://a"),
        # broken ranges are skipped
        ({**A, "NO_PROXY": "10.0.0.0/33,10.0.0.0/x,/8"}, "https://10.1.2.3", "http://a"),
        # a scheme's proxy only: the range keeps that scheme's requests direct
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "10.0.0.0/8"}, "https://10.1.2.3", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "10.0.0.0/8"}, "https://11.1.2.3", "http://p"),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "10.0.0.0/8"}, "http://11.1.2.3", None),
        # the in-cluster API server's host (exactly it) is never proxied
        ({**A, "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "https://10.96.0.1:443", None),
        ({**A, "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "https://10.96.0.10:443", "http://a"),
        ({**A, "KUBERNETES_SERVICE_HOST": "fd00:10:96::1"}, "https://[fd00:10:96::1]:443", None),
        ({**A, "KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"}, "https://kubernetes.default.svc", None),
        ({**A, "KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"}, "https://x.kubernetes.default.svc", "http://a"),
        ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "https://10.1.2.3", None),  # no proxy at all
    ],
)
def test_proxy_rules_cidr(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, want: str | None) -> None:
    """NO_PROXY's CIDR ranges and the in-cluster API server's host (additions to httpx's
    rules)."""
    set_env(monkeypatch, env)
    assert _proxy.proxy_for(url) == want


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        # Go's net.IP.IsLoopback: all of 127.0.0.0/8, ::1 in any form, IPv4-mapped 127/8
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("127.1.2.3", True),
        ("127.255.255.255", True),
        ("::1", True),
        ("[::1]", True),
        ("0:0:0:0:0:0:0:1", True),
        ("[0000:0000:0000:0000:0000:0000:0000:0001]", True),
        ("::ffff:127.0.0.1", True),
        ("[::ffff:127.9.8.7]", True),
        ("::ffff:7f00:1", True),
        # localhost (Go: that name exactly), any case, a trailing dot; *.localhost (RFC 6761)
        ("localhost", True),
        ("LOCALHOST", True),
        ("localhost.", True),
        ("api.localhost", True),
        ("A.B.LocalHost.", True),
        # not loopback
        ("126.255.255.255", False),
        ("128.0.0.1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("::2", False),
        ("::127.0.0.1", False),  # IPv4-compatible, not IPv4-mapped (as in Go)
        ("::ffff:10.0.0.1", False),
        ("127.1", False),  # a host name, not an address (as in Go)
        ("127.0.0.1.", False),
        ("localhost.example.com", False),
        ("notlocalhost", False),
        ("localhostx", False),
        (".localhost", False),
        ("localhost..", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert _proxy.is_loopback(host) is loopback


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.2:6443",
        "http://127.1.2.3",
        "http://[0:0:0:0:0:0:0:1]:8080",
        "http://[::ffff:127.0.0.1]",
        "http://LOCALHOST:8080",
        "http://localhost.:8080",
        "http://api.localhost",
        "http://kind-control-plane.localhost:6443",
    ],
)
@pytest.mark.parametrize("env", [{"ALL_PROXY": "http://a"}, {"HTTP_PROXY": "http://a", "HTTPS_PROXY": "http://a"}])
def test_loopback_hosts_are_never_proxied(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str) -> None:
    set_env(monkeypatch, env)
    assert _proxy.proxy_for(url) is None


@pytest.mark.parametrize(
    "url", ["http://128.0.0.1", "http://0.0.0.0", "http://[::2]", "http://[::ffff:10.0.0.1]", "http://localhost.test"]
)
def test_near_loopback_hosts_are_proxied(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    set_env(monkeypatch, {"ALL_PROXY": "http://a"})
    assert _proxy.proxy_for(url) == "http://a"


def test_transport_routes_only_when_a_proxy_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, {"NO_PROXY": "10.0.0.0/8"})
    assert isinstance(_proxy.transport(True), httpx.HTTPTransport)
    assert isinstance(_proxy.async_transport(True), httpx.AsyncHTTPTransport)
    set_env(monkeypatch, {"HTTP_PROXY": "http://p:3128", "ALL_PROXY": "http://a"})
    t = _proxy.transport(True)
    assert isinstance(t, _proxy.RoutingTransport)
    assert set(t.routes.proxied) == {"http://p:3128", "http://a"}
    t.close()


# An IP-address host that is not loopback, yet reaches this machine: a connection to
# 0.0.0.0 goes to the local host (Linux, macOS), here to an origin on 127.0.0.1.
ANY = "0.0.0.0"

CIDR_CASES = [
    # (environment, whether the proxy gets the requests to http://0.0.0.0)
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "10.0.0.0/8,0.0.0.0/8"}, False),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "0.0.0.0/32"}, False),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "10.0.0.0/8"}, True),
    ({"HTTP_PROXY": "{proxy}", "NO_PROXY": "::/0"}, True),  # an IPv6 range: not this IPv4 host
    ({"HTTP_PROXY": "{proxy}", "KUBERNETES_SERVICE_HOST": ANY}, False),
]


@pytest.fixture
def cidr_servers(names: None) -> Iterator[tuple[Recorder, Recorder]]:
    """A proxy and the origin server on 127.0.0.1, the origin asked as 0.0.0.0."""
    with Recorder() as proxy, Recorder() as origin:
        try:
            socket.create_connection((ANY, origin.port), timeout=5).close()
        except OSError as e:  # not every system takes 0.0.0.0 for the local host
            pytest.skip(f"cannot connect to {ANY}: {e}")
        yield proxy, origin


def port_call(base: str) -> None:
    """A port helper's client (http_client(port)) asking base."""
    t = PortURL(f"{base}/", f"{base}/", mode="direct")
    with _ports.http_client(t, DirectConnection(url=base), None, 10.0) as h:
        h.get("v1/health").raise_for_status()


async def async_port_call(base: str) -> None:
    t = PortURL(f"{base}/", f"{base}/", mode="direct")
    async with _ports.async_http_client(t, DirectConnection(url=base), None, 10.0) as h:
        (await h.get("v1/health")).raise_for_status()


def check_port_call(proxy: Recorder, origin: Recorder, base: str, via_proxy: bool) -> None:
    got, idle = (proxy, origin) if via_proxy else (origin, proxy)
    assert idle.seen == [] and len(got.seen) == 4
    assert got.seen[3]["target"] == (f"{base}/v1/health" if via_proxy else "/v1/health")


@pytest.mark.parametrize(("env", "via_proxy"), CIDR_CASES)
def test_sync_clients_honour_no_proxy_cidr(
    monkeypatch: pytest.MonkeyPatch, cidr_servers: tuple[Recorder, Recorder], env: dict[str, str], via_proxy: bool
) -> None:
    """An IP address in a NO_PROXY range goes direct, one outside it through the proxy: the
    lean path, the httpx API client, the client to sandboxd and a port's client."""
    proxy, origin = cidr_servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    base = f"http://{ANY}:{origin.port}"
    sync_calls(base)
    check(proxy, origin, ANY, via_proxy)
    port_call(base)
    check_port_call(proxy, origin, base, via_proxy)


@pytest.mark.parametrize(("env", "via_proxy"), CIDR_CASES)
async def test_async_clients_honour_no_proxy_cidr(
    monkeypatch: pytest.MonkeyPatch, cidr_servers: tuple[Recorder, Recorder], env: dict[str, str], via_proxy: bool
) -> None:
    proxy, origin = cidr_servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    base = f"http://{ANY}:{origin.port}"
    await async_calls(base)
    check(proxy, origin, ANY, via_proxy)
    await async_port_call(base)
    check_port_call(proxy, origin, base, via_proxy)


LOOP2 = "127.0.0.2"  # loopback, as all of 127.0.0.0/8 is: never proxied


@pytest.fixture
def loop2_servers(names: None) -> Iterator[tuple[Recorder, Recorder]]:
    """A proxy on 127.0.0.1 and the origin server on 127.0.0.2."""
    try:
        origin = Recorder(LOOP2)
    except OSError as e:  # not every system routes all of 127.0.0.0/8 to loopback
        pytest.skip(f"cannot listen on {LOOP2}: {e}")
    with Recorder() as proxy, origin:
        yield proxy, origin


LOOP2_ENVS = [{"HTTP_PROXY": "{proxy}"}, {"ALL_PROXY": "{proxy}", "NO_PROXY": "10.0.0.0/8"}]


@pytest.mark.parametrize("env", LOOP2_ENVS)
def test_sync_clients_keep_all_of_127_8_direct(
    monkeypatch: pytest.MonkeyPatch, loop2_servers: tuple[Recorder, Recorder], env: dict[str, str]
) -> None:
    """127.0.0.2 is loopback (as in Go): the lean path, the httpx API client, the client to
    sandboxd and a port's client reach it directly, not through the proxy."""
    proxy, origin = loop2_servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    base = f"http://{LOOP2}:{origin.port}"
    sync_calls(base)
    check(proxy, origin, LOOP2, False)
    port_call(base)
    check_port_call(proxy, origin, base, False)


@pytest.mark.parametrize("env", LOOP2_ENVS)
async def test_async_clients_keep_all_of_127_8_direct(
    monkeypatch: pytest.MonkeyPatch, loop2_servers: tuple[Recorder, Recorder], env: dict[str, str]
) -> None:
    proxy, origin = loop2_servers
    set_env(monkeypatch, {k: v.format(proxy=f"http://127.0.0.1:{proxy.port}") for k, v in env.items()})
    base = f"http://{LOOP2}:{origin.port}"
    await async_calls(base)
    check(proxy, origin, LOOP2, False)
    await async_port_call(base)
    check_port_call(proxy, origin, base, False)


@pytest.mark.parametrize("env", [{}, {"HTTP_PROXY": "http://p:3128"}])
async def test_clients_keep_their_connection_limits(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """httpx ignores a client's limits once it is given a transport: the SDK's clients
    hand them to their transports (200 connections, 50 kept alive), proxied ones too."""
    set_env(monkeypatch, env)
    base = "http://127.0.0.1:9"
    s = SandboxClient(config=KubeConfig(server=base, token="t"), connection=DirectConnection(url=base))
    a = AsyncSandboxClient(config=KubeConfig(server=base, token="t"), connection=DirectConnection(url=base))
    try:
        for http in (s.http, s.kube.http, a.http, a.kube.http):
            t = http._transport
            routed = isinstance(t, (_proxy.RoutingTransport, _proxy.AsyncRoutingTransport))
            assert routed == bool(env)
            for r in t.routes.all() if routed else [t]:  # type: ignore[union-attr]
                assert (r._pool._max_connections, r._pool._max_keepalive_connections) == (200, 50)  # type: ignore[union-attr]
    finally:
        s.close()
        await a.aclose()
