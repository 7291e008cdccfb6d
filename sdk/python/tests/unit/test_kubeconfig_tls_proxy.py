"""A kubeconfig cluster's tls-server-name (the name given for SNI and checked in the API
server's certificate instead of the server URL's host) and proxy-url (the proxy every
request to the API server goes through), on the lean connections and through httpx, sync
and async, against local servers (both were ignored: the certificate was checked against
127.0.0.1, and requests went direct)."""

from __future__ import annotations

import select
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_sandbox_sdk import ConfigError, SandboxConnectionError
from agent_sandbox_sdk._kube_async import AsyncKubeClient
from agent_sandbox_sdk._kube_sync import KubeClient
from agent_sandbox_sdk._kubeconfig import KubeConfig, load_kubeconfig

from .fakes import Recorder

NAME = "kube.internal"


def kubeconfig(tmp: Path, cluster: dict[str, Any]) -> KubeConfig:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }
    p = tmp / "kubeconfig"
    p.write_text(yaml.safe_dump(doc))
    return load_kubeconfig(p)


class TLSServer:
    """A Recorder behind TLS with a certificate for kube.internal only, recording the
    names clients give (SNI)."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.names: list[str | None] = []
        self.rec = Recorder()
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(cert, key)
        sctx.sni_callback = lambda _obj, name, _ctx: self.names.append(name)  # type: ignore[assignment,misc]
        self.rec.server.socket = sctx.wrap_socket(self.rec.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.rec.port}"


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[TLSServer, Path]]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={NAME}"]
    args += ["-addext", f"subjectAltName=DNS:{NAME}", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(["openssl", *args], check=True, capture_output=True)
    srv = TLSServer(cert, key)
    with srv.rec:
        yield srv, cert


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
def test_tls_server_name_is_given_and_checked(tls: tuple[TLSServer, Path], tmp_path: Path, lean: bool) -> None:
    srv, cert = tls
    cfg = kubeconfig(tmp_path, {"server": srv.url, "certificate-authority": str(cert), "tls-server-name": NAME})
    k = KubeClient(cfg, timeout=5)
    try:
        k._fast.usable = lean
        assert k.get("sandboxes", "ns", "a")["metadata"]["name"] == "a"
        for _ in k.watch("sandboxes", "ns", "a", "1", 1):
            pass
        assert k.list("sandboxes", "ns")["items"] == []  # (httpx always)
        assert (k._fast.sent > 0) is lean
    finally:
        k.close()
    assert srv.names and set(srv.names) == {NAME}
    assert [r["target"].split("?")[0] for r in srv.rec.seen] == [
        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a",
        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes",
        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes",
    ]


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_async_tls_server_name_is_given_and_checked(
    tls: tuple[TLSServer, Path], tmp_path: Path, lean: bool
) -> None:
    srv, cert = tls
    cfg = kubeconfig(tmp_path, {"server": srv.url, "certificate-authority": str(cert), "tls-server-name": NAME})
    k = AsyncKubeClient(cfg, timeout=5)
    try:
        k._fast.usable = lean
        assert (await k.get("sandboxes", "ns", "a"))["metadata"]["name"] == "a"
        async for _ in k.watch("sandboxes", "ns", "a", "1", 1):
            pass
        assert (await k.list("sandboxes", "ns"))["items"] == []
    finally:
        await k.aclose()
    assert srv.names and set(srv.names) == {NAME}
    assert len(srv.rec.seen) == 3


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
def test_the_certificate_is_checked_against_tls_server_name(
    tls: tuple[TLSServer, Path], tmp_path: Path, lean: bool
) -> None:
    srv, cert = tls
    cluster = {"server": srv.url, "certificate-authority": str(cert), "tls-server-name": "other.internal"}
    k = KubeClient(kubeconfig(tmp_path, cluster), timeout=5)
    k._fast.usable = lean
    try:
        with pytest.raises(SandboxConnectionError):
            k.get("sandboxes", "ns", "a")
    finally:
        k.close()
    assert srv.rec.seen == []


ORIGIN = "http://kube.invalid:6443"  # resolves nowhere: only the proxy reaches it


def test_proxy_url_takes_every_request() -> None:
    with Recorder() as proxy:
        cfg = KubeConfig(server=ORIGIN, token="t", proxy_url=f"http://127.0.0.1:{proxy.port}")
        k = KubeClient(cfg, timeout=5)
        try:
            k.get("sandboxes", "ns", "a")
            k.list("sandboxes", "ns")
        finally:
            k.close()
    assert [r["target"].split("?")[0] for r in proxy.seen] == [
        f"{ORIGIN}/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a",
        f"{ORIGIN}/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes",
    ]
    assert proxy.seen[0]["authorization"] == "Bearer t"


async def test_async_proxy_url_takes_every_request() -> None:
    with Recorder() as proxy:
        cfg = KubeConfig(server=ORIGIN, token="t", proxy_url=f"http://127.0.0.1:{proxy.port}")
        k = AsyncKubeClient(cfg, timeout=5)
        try:
            await k.get("sandboxes", "ns", "a")
            await k.list("sandboxes", "ns")
        finally:
            await k.aclose()
    assert len(proxy.seen) == 2 and all(r["target"].startswith(ORIGIN + "/apis/") for r in proxy.seen)


class Tunnel:
    """A CONNECT proxy on 127.0.0.1 that records the targets asked for and pipes the
    bytes both ways (to 127.0.0.1, whatever host was asked: the names are not real)."""

    def __init__(self, port: int) -> None:
        self.to_port = port
        self.targets: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._pipe, args=(c,), daemon=True).start()

    def _pipe(self, c: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += c.recv(4096)
        self.targets.append(head.split(b" ")[1].decode())
        up = socket.create_connection(("127.0.0.1", self.to_port))
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with c, up:
            while not self.stop.is_set():
                ready, _, _ = select.select([c, up], [], [], 0.1)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (up if s is c else c).sendall(data)


def test_proxy_url_tunnels_to_tls_server_name(tls: tuple[TLSServer, Path], tmp_path: Path) -> None:
    """Through a proxy's tunnel (where httpx passes the URL's host for TLS, not its
    sni_hostname extension) the name given and checked is tls-server-name still."""
    srv, cert = tls
    tunnel = Tunnel(srv.rec.port)
    server = f"https://api.invalid:{srv.rec.port}"
    cluster = {
        "server": server,
        "certificate-authority": str(cert),
        "tls-server-name": NAME,
        "proxy-url": f"http://127.0.0.1:{tunnel.port}",
    }
    k = KubeClient(kubeconfig(tmp_path, cluster), timeout=5)
    try:
        assert k.get("sandboxes", "ns", "a")["metadata"]["name"] == "a"
    finally:
        k.close()
        tunnel.stop.set()
    assert tunnel.targets == [f"api.invalid:{srv.rec.port}"]
    assert srv.names == [NAME]


@pytest.mark.parametrize(
    ("cluster", "says"),
    [
        ({"proxy-url": "ftp://proxy:21"}, "proxy-url"),
        ({"proxy-url": "proxy:3128"}, "proxy-url"),
        ({"proxy-url": "http://proxy:port"}, "proxy-url"),
        ({"proxy-url": 3128}, "proxy-url"),
        ({"tls-server-name": ["a"]}, "tls-server-name"),
    ],
)
def test_bad_tls_server_name_or_proxy_url_is_a_config_error(tmp_path: Path, cluster: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        kubeconfig(tmp_path, {"server": "https://h:1", **cluster})


def test_tls_server_name_and_proxy_url_are_loaded(tmp_path: Path) -> None:
    cfg = kubeconfig(tmp_path, {"server": "https://h:1", "tls-server-name": NAME, "proxy-url": "socks5://p:1080"})
    assert (cfg.tls_server_name, cfg.proxy_url) == (NAME, "socks5://p:1080")
