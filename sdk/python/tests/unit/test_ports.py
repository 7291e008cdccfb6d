"""URLs of sandbox ports (Sandbox.url / port_target / http_client) in each connection mode."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import DirectConnection, PodProxyConnection, PortURL, RouterConnection, SandboxError, _ports
from agent_sandbox_sdk._kubeconfig import KubeConfig

from .fakes import FakeKube, async_client, sync_client
from .test_client_fake import bind_on_create

SB: dict[str, Any] = {
    "metadata": {"name": "sb-1", "annotations": {"agents.x-k8s.io/pod-name": "pod-x"}},
    "status": {"podIPs": ["10.1.2.3"]},
}


def cfg(**kw: Any) -> KubeConfig:
    return KubeConfig(server="https://api.example:6443/", **kw)


@pytest.mark.parametrize(
    ("conn", "kube", "path", "url", "headers", "mode"),
    [
        (
            RouterConnection(url="http://router:8080/", token="rt"),
            cfg(token="kt"),
            "/",
            "http://router:8080/s/team%20a/sb-1/8000/",
            {"Authorization": "Bearer rt"},
            "router",
        ),
        (  # without its own token the router gets the kubeconfig's (over https)
            RouterConnection(url="https://router:8080", style="path"),
            cfg(token="kt"),
            "/a/b?x=1",
            "https://router:8080/s/team%20a/sb-1/8000/a/b?x=1",
            {"Authorization": "Bearer kt"},
            "router",
        ),
        (
            PodProxyConnection(),
            cfg(token="kt"),
            "health",
            "https://api.example:6443/api/v1/namespaces/team%20a/pods/pod-x:8000/proxy/health",
            {"Authorization": "Bearer kt"},
            "proxy",
        ),
        (  # client-certificate users: no header, http_client carries the certificate
            PodProxyConnection(),
            cfg(),
            "/",
            "https://api.example:6443/api/v1/namespaces/team%20a/pods/pod-x:8000/proxy/",
            {},
            "proxy",
        ),
        (DirectConnection(), None, "/x", "http://10.1.2.3:8000/x", {}, "direct"),
        (  # sandboxd's token is not sent to other ports
            DirectConnection(url="http://127.0.0.1:9999/", token="st"),
            None,
            "/",
            "http://127.0.0.1:8000/",
            {},
            "direct",
        ),
    ],
    ids=["router", "router-kubetoken", "proxy-token", "proxy-cert", "direct", "direct-pinned"],
)
def test_port_target_per_mode(
    conn: Any,
    kube: KubeConfig | None,
    path: str,
    url: str,
    headers: dict[str, str],
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the router token falls back to the environment (run-tests.sh exports the stack's)
    monkeypatch.delenv("AGENT_SANDBOX_ROUTER_TOKEN", raising=False)
    t = _ports.port_target(conn, kube, "team a", "sb-1", SB, 8000, path)
    assert t.url == url
    assert t.headers == headers
    assert t.mode == mode
    assert t.base_url.endswith("/8000/") or t.base_url.endswith(":8000/proxy/") or t.base_url.endswith(":8000/")
    assert t.token == (headers["Authorization"][7:] if headers else None)
    assert t.needs_kube_tls == (mode == "proxy")


def test_direct_token_kept_for_sandboxd_port() -> None:
    t = _ports.port_target(DirectConnection(url="http://[::1]:8080", token="st"), None, "ns", "n", None, 8080)
    assert t.url == "http://[::1]:8080/"
    assert t.headers == {"Authorization": "Bearer st"}


@pytest.mark.parametrize(
    ("url", "sandboxd_port", "other_port"),
    [
        ("http://127.0.0.1:9000", 9000, 8080),  # a port-forward's local port, not conn.port's
        ("http://127.0.0.1", 80, 8080),  # the scheme's default
        ("https://sbd.example/", 443, 8080),
    ],
)
def test_direct_token_only_to_the_pinned_urls_port(url: str, sandboxd_port: int, other_port: int) -> None:
    conn = DirectConnection(url=url, token="st")
    t = _ports.port_target(conn, None, "ns", "n", None, sandboxd_port)
    assert t.headers == {"Authorization": "Bearer st"}
    # before: conn.port (8080) got sandboxd's token, whatever listened there
    t = _ports.port_target(conn, None, "ns", "n", None, other_port)
    assert t.headers == {}
    assert t.token is None


def test_direct_ipv6_pod_ip() -> None:
    sb = {"status": {"podIPs": ["fd00::5"]}}
    assert _ports.port_target(DirectConnection(), None, "ns", "n", sb, 3000).url == "http://[fd00::5]:3000/"


def test_direct_without_pod_ip_is_an_error() -> None:
    with pytest.raises(SandboxError, match="no pod IP"):
        _ports.port_target(DirectConnection(), None, "ns", "n", {"status": {}}, 3000)


@pytest.mark.parametrize("port", [0, 65536, -1, True, "80"])
def test_bad_port(port: Any) -> None:
    with pytest.raises(ValueError, match="port"):
        _ports.port_target(DirectConnection(), None, "ns", "n", SB, port)


def test_http_client_router_has_base_and_auth() -> None:
    conn = RouterConnection(url="http://router:8080", token="rt")
    t = _ports.port_target(conn, None, "ns", "sb", None, 5000)
    with _ports.http_client(t, conn, None, 5.0) as c:
        assert str(c.base_url) == "http://router:8080/s/ns/sb/5000/"
        assert "Authorization" not in c.headers  # the scoped auth sends it (test_port_credentials)
        req = c.build_request("GET", "/files/a.txt")
        assert str(req.url) == "http://router:8080/s/ns/sb/5000/files/a.txt"


def test_http_client_proxy_authenticates_per_request() -> None:
    kube = cfg(token="kt")
    t = _ports.port_target(PodProxyConnection(), kube, "ns", "sb", SB, 5000)
    assert isinstance(t, PortURL)
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, text="hi")

    opts = _ports.client_options(t, PodProxyConnection(), kube, 5.0)
    assert opts["base_url"] == "https://api.example:6443/api/v1/namespaces/ns/pods/pod-x:5000/proxy/"
    with httpx.Client(**{k: v for k, v in opts.items() if k != "verify"}, transport=httpx.MockTransport(handler)) as c:
        assert c.get("index.html").text == "hi"
    assert str(seen[0].url) == "https://api.example:6443/api/v1/namespaces/ns/pods/pod-x:5000/proxy/index.html"
    assert seen[0].headers["Authorization"] == "Bearer kt"


async def test_async_client_direct() -> None:
    t = _ports.port_target(DirectConnection(), None, "ns", "sb", SB, 7000)
    async with _ports.async_http_client(t, DirectConnection(), None, 5.0) as c:
        assert str(c.base_url) == "http://10.1.2.3:7000/"
        assert "Authorization" not in c.headers


def test_sandbox_methods_read_the_pod_name() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    sb = sync_client(fake).create("pool")
    want = "https://kube.test/api/v1/namespaces/default/pods/pod-x:3000/proxy/a?b=1"
    assert sb.url(3000, "/a?b=1") == want
    t = sb.port_target(3000)
    assert t.mode == "proxy" and t.needs_kube_tls and t.base_url == want[: -len("a?b=1")]
    with sb.http_client(3000) as c:
        assert str(c.base_url) == t.base_url


async def test_async_sandbox_methods() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    async with async_client(fake) as ac:
        sb = await ac.create("pool")
        assert await sb.url(3000) == "https://kube.test/api/v1/namespaces/default/pods/pod-x:3000/proxy/"
        async with await sb.http_client(3000) as c:
            assert str(c.base_url).endswith("/pods/pod-x:3000/proxy/")
