"""A port's client (http_client(port)) sends its credentials (the router's token, the
kubeconfig's bearer token or client certificate, sandboxd's own token) only to its base
URL's scheme, host and port and below its path: not with an absolute URL of another
host, a path outside the prefix, or a redirect the sandbox's app answers with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import DirectConnection, PodProxyConnection, RouterConnection, _ports, _proxy
from agent_sandbox_sdk._kubeconfig import KubeConfig
from agent_sandbox_sdk.models import Connection

SB: dict[str, Any] = {
    "metadata": {"name": "sb", "annotations": {"agents.x-k8s.io/pod-name": "pod-x"}},
    "status": {"podIPs": ["10.1.2.3"]},
}


def modes(tmp_path: Path) -> dict[str, tuple[Connection, KubeConfig | None, str, str]]:
    """mode -> (connection, kubeconfig, the port's base URL, the Authorization it sends)."""
    (tmp_path / "rt").write_text("file-tok\n")
    kube = KubeConfig(server="https://api.test:6443", token="kube-tok")
    return {
        "router token": (
            RouterConnection(url="https://router.test", token="rt"),
            None,
            "https://router.test/s/ns/sb/3000/",
            "Bearer rt",
        ),
        "router token file": (
            RouterConnection(url="https://router.test", token_file=str(tmp_path / "rt")),
            None,
            "https://router.test/s/ns/sb/3000/",
            "Bearer file-tok",
        ),
        "router kubeconfig": (
            RouterConnection(url="https://router.test"),
            kube,
            "https://router.test/s/ns/sb/3000/",
            "Bearer kube-tok",
        ),
        "proxy": (
            PodProxyConnection(),
            kube,
            "https://api.test:6443/api/v1/namespaces/ns/pods/pod-x:3000/proxy/",
            "Bearer kube-tok",
        ),
        "direct": (DirectConnection(port=3000, token="sbd"), None, "http://10.1.2.3:3000/", "Bearer sbd"),
    }


MODES = ["router token", "router token file", "router kubeconfig", "proxy", "direct"]


def app(seen: list[tuple[str, str]]) -> Callable[[httpx.Request], httpx.Response]:
    """Every host: /go/X redirects to X (percent-decoded), anything else answers 200.
    Records each request's URL and Authorization."""

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((str(req.url), req.headers.get("authorization", "")))
        marker = "/go/"
        if marker in req.url.path:
            return httpx.Response(302, headers={"Location": req.url.path.split(marker, 1)[1].replace("|", "/")})
        return httpx.Response(200, text="ok")

    return handler


def targets(base: str) -> list[str]:
    """Request URLs in and out of the client's scope (a redirect's first request is in it)."""
    root = "/".join(base.split("/", 3)[:3])
    return [
        "x/y?z=1",
        base + "abs",
        "http://evil.test/x",
        "https://evil.test/x",
        root + "/other/path",  # the router's or API server's other paths
        "../../other/1/x",
        "go/https:||evil.test|stolen",  # a redirect to another host
        "go/" + (root + "/elsewhere").replace("/", "|"),  # to the same origin, another path
        "go/" + (base + "fine").replace("/", "|"),  # within the scope
    ]


@pytest.fixture
def mock_transports(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(_proxy, "transport", lambda *a, **kw: httpx.MockTransport(app(seen)))
    monkeypatch.setattr(_proxy, "async_transport", lambda *a, **kw: httpx.MockTransport(app(seen)))
    return seen


def check(seen: list[tuple[str, str]], base: str, auth: str) -> None:
    """Each request sent had the credential exactly when it went to the scope; both kinds
    were sent."""
    for url, sent in seen:
        want = auth if url.startswith(base) else ""
        assert sent == want, f"{url}: sent {sent!r}, want {want!r}"
    assert any(url.startswith(base) for url, _ in seen)
    assert any(not url.startswith(base) for url, _ in seen)


@pytest.mark.parametrize("mode", MODES)
def test_sync_port_client_scopes_its_credentials(
    tmp_path: Path, mode: str, mock_transports: list[tuple[str, str]]
) -> None:
    conn, kube, base, auth = modes(tmp_path)[mode]
    t = _ports.port_target(conn, kube, "ns", "sb", SB, 3000)
    assert t.base_url == base
    with _ports.http_client(t, conn, kube, 5.0) as c:
        for url in targets(base):
            assert c.get(url, follow_redirects=True).status_code == 200
        check(mock_transports, base, auth)


@pytest.mark.parametrize("mode", MODES)
async def test_async_port_client_scopes_its_credentials(
    tmp_path: Path, mode: str, mock_transports: list[tuple[str, str]]
) -> None:
    conn, kube, base, auth = modes(tmp_path)[mode]
    t = _ports.port_target(conn, kube, "ns", "sb", SB, 3000)
    async with _ports.async_http_client(t, conn, kube, 5.0) as c:
        for url in targets(base):
            assert (await c.get(url, follow_redirects=True)).status_code == 200
        check(mock_transports, base, auth)


def test_the_client_certificate_only_in_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod proxy's client: the kubeconfig's TLS context (its client certificate)
    only for requests in scope; the API server's other paths get its CA alone, other
    hosts the default verification."""
    made: list[Any] = []

    def transport(verify: Any, **kw: Any) -> httpx.BaseTransport:
        made.append(verify)
        index = str(len(made) - 1)
        return httpx.MockTransport(lambda req: httpx.Response(200, text=index))

    monkeypatch.setattr(_proxy, "transport", transport)
    kube = KubeConfig(server="https://api.test:6443", token="kube-tok")
    t = _ports.port_target(PodProxyConnection(), kube, "ns", "sb", SB, 3000)
    with _ports.http_client(t, PodProxyConnection(), kube, 5.0) as c:
        assert c.get("x").text == "0"  # the first transport: the kubeconfig's full context
        assert c.get("https://api.test:6443/api/v1/secrets").text == "1"
        assert c.get("https://evil.test/x").text == "2"
        assert c.get("https://api.test:6443/api/v1/nodes").text == "1"
    assert made[1] is not made[0] and made[1] is not True and made[2] is True


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("x/y", True),
        ("a/%2e%2e/b", True),  # stays below the prefix once decoded
        ("%2e%2e/%2e%2e/%2e%2e/%2e%2e/secrets", False),
        ("%2E%2E/%2E%2E/%2E%2E/%2E%2E/secrets", False),
        ("x/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fsecrets", False),
        ("..%2f..%2f..%2f..%2fsecrets", False),
    ],
)
def test_scope_decodes_dot_segments(path: str, inside: bool) -> None:
    # httpx keeps percent-encoded dot segments; a server that decodes them would resolve
    # the path above the prefix, so the credential must not go there.
    base = "https://api.test:6443/api/v1/namespaces/ns/pods/p:8080/proxy/"
    assert (httpx.URL(base + path) in _ports.Scope(base)) is inside
