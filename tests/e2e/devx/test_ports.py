"""Ports of a sandbox: an HTTP server started in the sandbox (an attached streaming
process) reached through Sandbox.url/port_target with the returned headers and through
Sandbox.http_client (sync and async) in every connection mode, through
`kubectl-sandbox port-forward`, and `kubectl-sandbox shell` driven through a real PTY."""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import agent_sandbox_sdk
import httpx
import pytest
from agent_sandbox_sdk import PodProxyConnection, RouterConnection

ROOT = Path(__file__).resolve().parents[3]
KS = os.environ.get("KUBECTL_SANDBOX") or str(
    ROOT / "build" / "release" / "kubectl-sandbox"
)
POOL = os.environ.get("AGENT_SANDBOX_E2E_POOL", "python-pool")


@dataclass
class Web:
    port: int
    tag: str  # the content of hello.txt, unique per server


def _ks(client: agent_sandbox_sdk.SandboxClient) -> list[str]:
    if not os.access(KS, os.X_OK):
        pytest.skip(f"no kubectl-sandbox at {KS} (build it, or set $KUBECTL_SANDBOX)")
    kc = (
        os.environ.get("AGENT_SANDBOX_KUBECONFIG") or os.environ.get("KUBECONFIG") or ""
    )
    return [KS, "--kubeconfig", kc, "-n", client.namespace]


def _verify(sandbox: agent_sandbox_sdk.Sandbox, t: agent_sandbox_sdk.PortURL) -> object:
    """TLS settings for a plain httpx call to t: the API server's (CA and client
    certificate) in proxy mode."""
    return sandbox.client.config.ssl_context() if t.needs_kube_tls else True


@pytest.fixture(scope="module")
def web(sandbox: agent_sandbox_sdk.Sandbox) -> Iterator[Web]:
    """python3 -m http.server on a random port, serving a directory with hello.txt."""
    tag = uuid.uuid4().hex
    port = 20000 + int(tag[:4], 16) % 10000
    d = f"/tmp/devx-ports-{tag}"
    r = sandbox.run(["sh", "-c", f"mkdir -p {d} && printf %s {tag} > {d}/hello.txt"])
    assert r.ok, r.stderr
    cmd = f"exec python3 -m http.server {port} --bind 0.0.0.0 --directory {d} >/dev/null 2>&1"
    proc = sandbox.spawn(["sh", "-c", cmd])
    try:
        deadline = time.monotonic() + 60
        while True:  # until the server listens (checked from inside the sandbox)
            probe = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode())"
            if sandbox.run(["python3", "-c", probe]).stdout.strip() == tag:
                break
            assert time.monotonic() < deadline, (
                "the HTTP server in the sandbox did not come up"
            )
            time.sleep(0.3)
        yield Web(port, tag)
    finally:
        proc.kill()
        proc.close()
        sandbox.run(["rm", "-rf", d])


def test_url_with_headers(sandbox: agent_sandbox_sdk.Sandbox, web: Web) -> None:
    t = sandbox.port_target(web.port, "/hello.txt")
    assert t.url == sandbox.url(web.port, "/hello.txt")
    assert t.url.startswith(t.base_url) and t.base_url.endswith("/")
    conn = sandbox.client.connection
    if isinstance(conn, RouterConnection):
        assert f"/s/{sandbox.namespace}/{sandbox.name}/{web.port}/hello.txt" in t.url
        assert t.headers["Authorization"].startswith("Bearer ")
    elif isinstance(conn, PodProxyConnection):
        assert re.search(
            rf"/api/v1/namespaces/{sandbox.namespace}/pods/[^/]+:{web.port}/proxy/hello.txt$",
            t.url,
        )
        assert t.needs_kube_tls
    else:
        assert re.fullmatch(rf"http://[0-9.\[\]:a-f]+:{web.port}/hello.txt", t.url), (
            t.url
        )
        assert t.headers == {}
    r = httpx.get(t.url, headers=t.headers, verify=_verify(sandbox, t), timeout=30)  # type: ignore[arg-type]
    assert r.status_code == 200, r.text
    assert r.text == web.tag
    # without the credentials the router and the API server refuse
    if t.headers and not t.needs_kube_tls:
        assert (
            httpx.get(t.url, verify=_verify(sandbox, t), timeout=30).status_code == 401
        )  # type: ignore[arg-type]


def test_http_client(sandbox: agent_sandbox_sdk.Sandbox, web: Web) -> None:
    with sandbox.http_client(web.port) as c:
        for path in ("hello.txt", "/hello.txt"):
            r = c.get(path)
            assert r.status_code == 200, r.text
            assert r.text == web.tag
        assert (
            c.get("/no-such-file").status_code == 404
        )  # the server's own answer, passed through


async def test_async_http_client(sandbox: agent_sandbox_sdk.Sandbox, web: Web) -> None:
    async with agent_sandbox_sdk.AsyncSandboxClient(
        config=sandbox.client.config,
        namespace=sandbox.namespace,
        connection=sandbox.client.connection,
    ) as ac:
        asb = await ac.get(sandbox.name)
        assert await asb.url(web.port) == sandbox.url(web.port)
        async with await asb.http_client(web.port) as c:
            r = await c.get("hello.txt")
            assert r.status_code == 200 and r.text == web.tag


def _forward(argv: list[str]) -> tuple[subprocess.Popen[str], int]:
    p = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    line = p.stdout.readline()
    m = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)$", line.strip())
    if not m:
        p.kill()
        pytest.fail(
            f"no Forwarding line: {line!r} {p.stderr.read() if p.stderr else ''}"
        )
    return p, int(m.group(1))


def test_port_forward(sandbox: agent_sandbox_sdk.Sandbox, web: Web) -> None:
    if not isinstance(sandbox.client.connection, PodProxyConnection):
        pytest.skip(
            "port-forward goes through the API server whatever the SDK's mode: run once"
        )
    base = _ks(sandbox.client)
    for name in (sandbox.name, sandbox.claim):  # a Sandbox, and the claim that owns it
        p, local = _forward([*base, "port-forward", name, f"0:{web.port}"])
        try:
            for _ in range(3):  # one WebSocket per connection
                r = httpx.get(f"http://127.0.0.1:{local}/hello.txt", timeout=30)
                assert r.status_code == 200 and r.text == web.tag
            big = httpx.get(
                f"http://127.0.0.1:{local}/", timeout=30
            )  # the directory listing
            assert big.status_code == 200 and "hello.txt" in big.text
        finally:
            p.terminate()
            assert p.wait(timeout=15) == 0


def test_port_forward_refuses(sandbox_client: agent_sandbox_sdk.SandboxClient) -> None:
    base = _ks(sandbox_client)
    bad = subprocess.run(
        [*base, "port-forward", "x", "1:99999"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "bad port" in bad.stderr
    gone = f"no-such-{uuid.uuid4().hex[:8]}"
    r = subprocess.run(
        [*base, "port-forward", gone, "8080"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "not found" in r.stderr


# ---- shell through a real pseudo-terminal ----------------------------------------------


def _drive(argv: list[str], typed: bytes, timeout: float = 240) -> tuple[int, str]:
    """Runs argv on a new PTY, types `typed` once a prompt shows (or after 90 s), and
    returns its exit status and everything it wrote."""
    master, slave = os.openpty()
    p = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    out, sent, start = b"", False, time.monotonic()
    try:
        while time.monotonic() - start < timeout:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer is gone
                    break
                if not chunk:
                    break
                out += chunk
            if not sent and (
                re.search(rb"[$#] $", out) or time.monotonic() - start > 90
            ):
                os.write(master, typed)
                sent = True
            if p.poll() is not None and not ready:
                break
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    return rc, out.decode(errors="replace")


def _claim_gone(
    client: agent_sandbox_sdk.SandboxClient, name: str, timeout: float = 60
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            obj = client.kube.get("sandboxclaims", client.namespace, name)
        except agent_sandbox_sdk.NotFoundError:
            return True
        if obj.get("metadata", {}).get("deletionTimestamp"):
            return True
        time.sleep(0.5)
    return False


def test_shell_claims_and_deletes(sandbox_client: agent_sandbox_sdk.SandboxClient) -> None:
    rc, out = _drive(
        [*_ks(sandbox_client), "shell", "--pool", POOL], b"echo $((6*7)); exit 3\r"
    )
    assert rc == 3, out
    assert re.search(r"(^|\r)42\r?$", out, re.MULTILINE), out
    m = re.search(r"sandboxclaim (shell-[a-z0-9]{5}) deleted", out)
    assert m, out
    assert _claim_gone(sandbox_client, m.group(1))


def test_shell_keep(sandbox_client: agent_sandbox_sdk.SandboxClient) -> None:
    rc, out = _drive(
        [*_ks(sandbox_client), "shell", "--pool", POOL, "--keep"], b"exit 0\r"
    )
    m = re.search(r"kubectl-sandbox delete claim/(shell-[a-z0-9]{5})", out)
    assert m, out
    try:
        assert rc == 0, out
        claim = sandbox_client.kube.get(
            "sandboxclaims", sandbox_client.namespace, m.group(1)
        )
        assert not claim["metadata"].get("deletionTimestamp")
    finally:
        sandbox_client.kube.delete(
            "sandboxclaims", sandbox_client.namespace, m.group(1)
        )


def test_shell_attach(sandbox: agent_sandbox_sdk.Sandbox) -> None:
    if not isinstance(sandbox.client.connection, PodProxyConnection):
        pytest.skip("shell uses the CLI's connection whatever the SDK's mode: run once")
    argv = [
        *_ks(sandbox.client),
        "shell",
        sandbox.name,
        "--",
        "sh",
        "-c",
        "tty; echo attached-$((1+1)); exit 7",
    ]
    rc, out = _drive(argv, b"")
    assert rc == 7, out
    assert "attached-2" in out and "/dev/pts/" in out, out
    sandbox.refresh()  # an attached session deletes nothing
