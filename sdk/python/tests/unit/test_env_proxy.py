"""The environment's proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) on the SDK's
own httpx clients, which pass transports of their own (so httpx does not read the
environment for them): the API client (its lean connections step aside for httpx when a
proxy applies) and the client to sandboxd, sync and async, against a local recording
proxy; NO_PROXY, ``*`` and loopback hosts go direct."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from agent_sandbox_sdk import AsyncSandboxClient, DirectConnection, KubeConfig, SandboxClient, _proxy
from agent_sandbox_sdk.errors import SandboxConnectionError

from .fakes import Recorder

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
ORIGIN = "origin.example.test"  # resolved to 127.0.0.1 by the names fixture


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for k in PROXY_VARS + tuple(v.lower() for v in PROXY_VARS):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    """*.example.test resolves to 127.0.0.1 (for direct connections: a proxy is asked by
    name), so a request to it is not a loopback one."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        return real("127.0.0.1" if str(name).endswith(".example.test") else host, *args, **kw)

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
        ({"ALL_PROXY": "http://a", "NO_PROXY": "10.0.0.0/8,bad:x:y"}, "https://10.1.2.3", "http://a"),
        ({"ALL_PROXY": "http://a", "NO_PROXY": " * "}, "https://x.test", None),
        ({"ALL_PROXY": "http://a"}, "https://127.0.0.1:6443", None),
        ({"ALL_PROXY": "http://a"}, "http://[::1]:8080", None),
        ({"ALL_PROXY": "http://a"}, "http://localhost:8080", None),
    ],
)
def test_proxy_rules(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, want: str | None) -> None:
    """httpx's rules for the environment's proxies (and loopback hosts never proxied)."""
    set_env(monkeypatch, env)
    assert _proxy.proxy_for(url) == want


def test_port_clients_keep_loopback_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, {})
    assert _proxy.loopback_direct() == {}
    set_env(monkeypatch, {"HTTP_PROXY": "http://p:3128"})
    assert set(_proxy.loopback_direct()) == set(_proxy.LOOPBACK)
