"""The kubeconfig's credential (token, token file, exec plugin) goes to the router only
over https, to a loopback host (a port-forward), from in-cluster configuration or with
the user's opt-in; otherwise every path that would send it refuses before any request.
An explicit router token is always sent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    KubeConfig,
    RouterConnection,
    Sandbox,
    SandboxClient,
    _conn,
    _ports,
)

STAT = {"name": "f", "path": "/f", "type": "file", "size": 1, "mode": "0644"}

REFUSED = (
    r"refusing to send the kubeconfig's credentials in clear text to http://10\.0\.0\.1:80 \(not a loopback host\); "
    r"use an https router URL, a port-forward to localhost, a router token \(\$AGENT_SANDBOX_ROUTER_TOKEN\), "
    r"or set AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true"
)

# (case, router URL, RouterConnection extras, in-cluster config, env, the token sent or None: refused)
CASES: list[tuple[str, str, dict[str, Any], bool, dict[str, str], str | None]] = [
    ("loopback v4", "http://127.0.0.1:8080", {}, False, {}, "kube-tok"),
    ("loopback 127/8", "http://127.9.8.7", {}, False, {}, "kube-tok"),
    ("localhost", "http://localhost:8080", {}, False, {}, "kube-tok"),
    ("localhost trailing dot", "http://LOCALHOST.:8080", {}, False, {}, "kube-tok"),
    ("name under .localhost", "http://router.localhost", {}, False, {}, "kube-tok"),
    ("loopback v6", "http://[::1]:8080", {}, False, {}, "kube-tok"),
    ("v4-mapped loopback", "http://[::ffff:127.0.0.1]:8080", {}, False, {}, "kube-tok"),
    ("remote http", "http://10.0.0.1", {}, False, {}, None),
    ("remote http name", "http://router.example.com:8080", {}, False, {}, None),
    ("not loopback: 0.0.0.0", "http://0.0.0.0:8080", {}, False, {}, None),
    ("not loopback: localhost.example", "http://localhost.example:8080", {}, False, {}, None),
    ("remote https", "https://10.0.0.1", {}, False, {}, "kube-tok"),
    ("remote HTTPS", "HTTPS://10.0.0.1", {}, False, {}, "kube-tok"),
    ("in-cluster", "http://10.0.0.1", {}, True, {}, "kube-tok"),
    ("explicit token", "http://10.0.0.1", {"token": "rt"}, False, {}, "rt"),
    ("explicit token env", "http://10.0.0.1", {}, False, {"AGENT_SANDBOX_ROUTER_TOKEN": "rt"}, "rt"),
    ("opt-in field", "http://10.0.0.1", {"allow_plaintext_token": True}, False, {}, "kube-tok"),
    ("opt-in env", "http://10.0.0.1", {}, False, {"AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN": "true"}, "kube-tok"),
    ("opt-in env 1", "http://10.0.0.1", {}, False, {"AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN": "1"}, "kube-tok"),
    ("opt-in env false", "http://10.0.0.1", {}, False, {"AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN": "false"}, None),
]


def kube(kind: str, tmp_path: Path, in_cluster: bool) -> KubeConfig:
    """A kubeconfig whose credential is kube-tok: a token, a token file or an exec plugin."""
    if kind == "token":
        return KubeConfig(server="https://kube.test", token="kube-tok", in_cluster=in_cluster)
    if kind == "token_file":
        (tmp_path / "kt").write_text("kube-tok\n")
        return KubeConfig(server="https://kube.test", token_file=str(tmp_path / "kt"), in_cluster=in_cluster)
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        'print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",'
        ' "status": {"token": "kube-tok"}}))\n'
    )
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(plugin)]}
    return KubeConfig(server="https://kube.test", exec_config=exec_config, in_cluster=in_cluster)


class Router:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.seen.append(req.headers.get("authorization", ""))
        return httpx.Response(200, json=STAT)


@pytest.mark.parametrize("kind", ["token", "token_file", "exec"])
@pytest.mark.parametrize(("case", "url", "extra", "in_cluster", "env", "sent"), CASES, ids=[c[0] for c in CASES])
def test_kubeconfig_credential_to_the_router(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    case: str,
    url: str,
    extra: dict[str, Any],
    in_cluster: bool,
    env: dict[str, str],
    sent: str | None,
) -> None:
    """Every sync path that sends the router a token: a handle's calls (target), the
    port helpers (port_target, http_client's auth) and router_token."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    conn = RouterConnection(url=url, **extra)
    cfg = kube(kind, tmp_path, in_cluster)
    router = Router()
    c = SandboxClient(config=cfg, connection=conn)
    c.http = httpx.Client(transport=httpx.MockTransport(router))
    sb = Sandbox(c, "default", "sb")
    try:
        if sent is None:
            with pytest.raises(ValueError, match="refusing to send the kubeconfig's credentials in clear text"):
                sb.files.stat("f")
            with pytest.raises(ValueError, match="in clear text"):
                sb.port_target(3000)
            with pytest.raises(ValueError, match="in clear text"):
                sb.http_client(3000)
            with pytest.raises(ValueError, match="in clear text"):
                _conn.router_token(conn, cfg)
            with pytest.raises(ValueError, match="in clear text"):
                _conn.target(conn, cfg, "default", "sb", None)
            with pytest.raises(ValueError, match="in clear text"):
                _ports.client_options(_ports.PortURL("u", "u/"), conn, cfg, 1.0)
            assert router.seen == [], "nothing was sent"
            return
        assert sb.files.stat("f").size == 1
        assert router.seen == [f"Bearer {sent}"]
        assert sb.port_target(3000).token == sent
        assert _conn.router_token(conn, cfg) == sent
        seen: list[str] = []

        def port_app(req: httpx.Request) -> httpx.Response:
            seen.append(req.headers.get("authorization", ""))
            return httpx.Response(204)

        opts = _ports.client_options(sb.port_target(3000), conn, cfg, 1.0)
        opts.pop("verify", None)
        with httpx.Client(**opts, transport=httpx.MockTransport(port_app)) as hc:
            hc.get("x")
        assert seen == [f"Bearer {sent}"]
    finally:
        c.close()


def test_the_refusal_names_the_router_and_the_remedies(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = KubeConfig(server="https://kube.test", token="kube-tok")
    with pytest.raises(ValueError, match=REFUSED) as ei:
        _conn.target(RouterConnection(url="http://10.0.0.1/"), cfg, "ns", "s", None)
    assert "kube-tok" not in str(ei.value)
    with pytest.raises(ValueError, match=r"to http://\[fd00::1\]:8080 \(not a loopback host\)"):
        _conn.target(RouterConnection(url="http://[fd00::1]:8080"), cfg, "ns", "s", None)


def test_a_kubeconfig_without_a_credential_is_not_refused() -> None:
    """Client-certificate users: no token goes anywhere, nothing to refuse."""
    cfg = KubeConfig(server="https://kube.test")
    t = _conn.target(RouterConnection(url="http://10.0.0.1"), cfg, "ns", "s", None)
    assert "Authorization" not in t.headers
    assert _conn.target(RouterConnection(url="http://10.0.0.1"), None, "ns", "s", None).headers["X-Sandbox-ID"] == "s"


@pytest.mark.parametrize("kind", ["token", "exec"])
async def test_async_paths_refuse_before_any_request(tmp_path: Path, kind: str) -> None:
    """The async client's calls, port_target and http_client; the exec plugin is not
    even run for a router it may not go to."""
    cfg = kube(kind, tmp_path, False)
    router = Router()
    c = AsyncSandboxClient(config=cfg, connection=RouterConnection(url="http://10.0.0.1"))
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(router))
    sb = AsyncSandbox(c, "default", "sb")
    try:
        with pytest.raises(ValueError, match="in clear text"):
            await sb.files.stat("f")
        with pytest.raises(ValueError, match="in clear text"):
            await sb.port_target(3000)
        with pytest.raises(ValueError, match="in clear text"):
            await sb.http_client(3000)
    finally:
        await c.aclose()
    assert router.seen == []


async def test_async_paths_send_over_https(tmp_path: Path) -> None:
    cfg = kube("exec", tmp_path, False)
    router = Router()
    c = AsyncSandboxClient(config=cfg, connection=RouterConnection(url="https://10.0.0.1"))
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(router))
    sb = AsyncSandbox(c, "default", "sb")
    try:
        assert (await sb.files.stat("f")).size == 1
        assert (await sb.port_target(3000)).token == "kube-tok"
    finally:
        await c.aclose()
    assert router.seen == ["Bearer kube-tok"]
