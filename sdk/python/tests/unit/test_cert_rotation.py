"""An exec plugin whose client certificate changes between runs: the clients' later
requests present the new certificate, on new connections, where every request of a
client used to present the first one (its TLS context, and the connections kept alive,
held it): an API server refuses an expired client certificate on each request."""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_sandbox_sdk import AsyncSandboxClient, SandboxClient
from agent_sandbox_sdk._kubeconfig import KubeConfig
from agent_sandbox_sdk.models import DirectConnection

from .fakes import Recorder
from .test_exec_async import self_signed

# Run n gives certificate "a" on its first run and "b" on every later one, each valid
# for 5 s (under the 10 s a credential must have left to be reused: every request runs
# the plugin again).
ROTATING_PLUGIN = """\
import datetime, json, os, sys
runs, a_cert, a_key, b_cert, b_key, expiring = sys.argv[1:7]
n = os.path.getsize(runs) if os.path.exists(runs) else 0
with open(runs, "a") as f:
    f.write("x")
cert, key = (a_cert, a_key) if n == 0 else (b_cert, b_key)
exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
status = {"clientCertificateData": open(cert).read(), "clientKeyData": open(key).read()}
if expiring == "yes":
    status["expirationTimestamp"] = exp.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
"""


class _PeerHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a small object and records the client certificate's CN; a
    revoked one is answered 401."""

    protocol_version = "HTTP/1.1"
    names: ClassVar[list[str]]
    revoked: ClassVar[set[str]]

    def do_GET(self) -> None:
        peer: Any = self.connection.getpeercert()  # type: ignore[attr-defined]
        name = dict(x[0] for x in peer["subject"])["commonName"]
        self.names.append(name)
        if name in self.revoked:
            out = json.dumps({"kind": "Status", "code": 401, "message": "Unauthorized"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        out = json.dumps({"kind": "Sandbox", "metadata": {"name": "a"}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Rotating:
    cfg: KubeConfig
    base: str
    names: list[str]  # the client certificate each request presented
    revoked: set[str]  # certificates answered 401


@pytest.fixture(params=["yes"])
def rotating(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rotating]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    server_crt, server_key = self_signed(tmp_path, "api", "subjectAltName=IP:127.0.0.1")
    a = self_signed(tmp_path, "client-a", "extendedKeyUsage=clientAuth")
    b = self_signed(tmp_path, "client-b", "extendedKeyUsage=clientAuth")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(server_crt, server_key)
    sctx.load_verify_locations(a[0])
    sctx.load_verify_locations(b[0])
    sctx.verify_mode = ssl.CERT_REQUIRED
    api = Recorder()
    names: list[str] = []
    revoked: set[str] = set()
    api.server.RequestHandlerClass = type("H", (_PeerHandler,), {"names": names, "revoked": revoked})
    api.server.socket = sctx.wrap_socket(api.server.socket, server_side=True)
    script = tmp_path / "rotating.py"
    script.write_text(ROTATING_PLUGIN)
    args = [str(script), str(tmp_path / "runs"), str(a[0]), str(a[1]), str(b[0]), str(b[1]), request.param]
    with api:
        base = f"https://127.0.0.1:{api.port}"
        cfg = KubeConfig(server=base, exec_config={"command": sys.executable, "args": args}, base_dir=str(tmp_path))
        cfg.ca_data = server_crt.read_text()
        yield Rotating(cfg, base, names, revoked)


def test_sync_client_presents_the_renewed_certificate(rotating: Rotating) -> None:
    c = SandboxClient(config=rotating.cfg, connection=DirectConnection(url=rotating.base))
    try:
        c.kube.get("sandboxes", "ns", "a")  # a lean connection made with "a" (the plugin then gave "b")
        c.kube.get("sandboxes", "ns", "a")  # the kept-alive one is dropped: a new one with "b"
        c.kube.list("sandboxes", "ns")  # httpx's connections too
    finally:
        c.close()
    assert rotating.names == ["client-a", "client-b", "client-b"]


async def test_async_client_presents_the_renewed_certificate(rotating: Rotating) -> None:
    c = AsyncSandboxClient(config=rotating.cfg, connection=DirectConnection(url=rotating.base))
    try:
        await c.kube.get("sandboxes", "ns", "a")
        await c.kube.get("sandboxes", "ns", "a")
        await c.kube.list("sandboxes", "ns")
    finally:
        await c.aclose()
    assert rotating.names == ["client-a", "client-b", "client-b"]


@pytest.mark.parametrize("rotating", ["no"], indirect=True)
def test_revoked_certificate_renewed_within_the_call(rotating: Rotating) -> None:
    """A credential without expiry (cached): its certificate revoked, the call's 401 runs
    the plugin again, and the call goes once more on a new connection with the new
    certificate. Before, the retry went on the kept-alive connection with the old one,
    and its second 401 was raised."""
    c = SandboxClient(config=rotating.cfg, connection=DirectConnection(url=rotating.base))
    try:
        c.kube.get("sandboxes", "ns", "a")
        rotating.revoked.add("client-a")
        c.kube.get("sandboxes", "ns", "a")
    finally:
        c.close()
    assert rotating.names == ["client-a", "client-a", "client-b"]


@pytest.mark.parametrize("rotating", ["no"], indirect=True)
async def test_async_revoked_certificate_renewed_within_the_call(rotating: Rotating) -> None:
    c = AsyncSandboxClient(config=rotating.cfg, connection=DirectConnection(url=rotating.base))
    try:
        await c.kube.get("sandboxes", "ns", "a")
        rotating.revoked.add("client-a")
        await c.kube.get("sandboxes", "ns", "a")
    finally:
        await c.aclose()
    assert rotating.names == ["client-a", "client-a", "client-b"]
