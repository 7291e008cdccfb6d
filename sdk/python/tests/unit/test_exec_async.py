"""An exec credential plugin in the async client: it runs in a worker thread, so the event
loop goes on meanwhile, and requests at once that need a fresh credential share one run
(the lean connections' and httpx's alike); a failing plugin raises ConfigError as on the
sync path, and the next request runs it again. Router requests run it only when the
router's token is the kubeconfig's. Making the client runs no plugin on the event loop,
not even one that gives the client certificate of its TLS context (AsyncTLS)."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    ConfigError,
    DirectConnection,
    KubeConfig,
    RouterConnection,
    _conn,
)
from agent_sandbox_sdk._kube_async import AsyncKubeClient

from .fakes import Recorder

# Appends one "x" to RUNS per run, takes 0.5 s, and answers tok-<run>. The first run's
# credential is due again at once (it expires within the 10 s margin), later ones last.
PLUGIN = """\
import datetime, json, sys, time
runs = sys.argv[1]
with open(runs, "a") as f:
    f.write("x")
time.sleep(0.5)
n = len(open(runs).read())
if n > int(sys.argv[2]):
    sys.exit("plugin failed")
ttl = 5 if n == 1 else 3600
exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
    "status": {"token": f"tok-{n}", "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def exec_config(tmp_path: Path, server: str, fail_after: int = 99) -> tuple[KubeConfig, Path]:
    script, runs = tmp_path / "plugin.py", tmp_path / "runs"
    script.write_text(PLUGIN)
    cfg = KubeConfig(
        server=server,
        exec_config={"command": sys.executable, "args": [str(script), str(runs), str(fail_after)]},
        base_dir=str(tmp_path),
    )
    return cfg, runs


def ticking() -> tuple[asyncio.Task[None], Callable[[], int]]:
    """A task that counts 20 ms ticks of the event loop (none while it is blocked), and
    the count so far."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    return asyncio.create_task(ticker()), lambda: ticks


async def test_exec_plugin_runs_off_the_loop_once_for_requests_at_once(tmp_path: Path) -> None:
    with Recorder() as api:
        cfg, runs = exec_config(tmp_path, f"http://127.0.0.1:{api.port}")
        kube = AsyncKubeClient(cfg)
        assert await cfg.bearer_token_async() == "tok-1"  # a credential due again at once
        assert runs.read_text() == "x"
        t, ticks = ticking()
        try:
            # a lean-connection GET and an httpx LIST, both needing the token
            await asyncio.gather(kube.get("sandboxes", "ns", "a"), kube.list("sandboxes", "ns"))
        finally:
            t.cancel()
            await kube.aclose()
    assert runs.read_text() == "xx", "the plugin ran once for both requests"
    assert ticks() >= 10, f"the event loop stalled while the plugin ran ({ticks()} ticks in 0.5 s)"
    assert [r["authorization"] for r in api.seen] == ["Bearer tok-2"] * 2


async def test_exec_plugin_failure_async(tmp_path: Path) -> None:
    """The sync path's errors: a plugin that fails raises ConfigError to each caller
    waiting on it; the next call runs it again."""
    cfg, runs = exec_config(tmp_path, "https://10.0.0.1:6443", fail_after=0)
    got = await asyncio.gather(cfg.bearer_token_async(), cfg.bearer_token_async(), return_exceptions=True)
    assert all(isinstance(e, ConfigError) and "exec credential plugin" in str(e) for e in got), got
    assert runs.read_text() == "x"
    with pytest.raises(ConfigError):
        await cfg.bearer_token_async()
    assert runs.read_text() == "xx"


async def test_cancelled_caller_leaves_the_run_to_the_others(tmp_path: Path) -> None:
    cfg, runs = exec_config(tmp_path, "https://10.0.0.1:6443")
    first = asyncio.create_task(cfg.bearer_token_async())
    second = asyncio.create_task(cfg.bearer_token_async())
    await asyncio.sleep(0.1)
    first.cancel()
    assert await second == "tok-1"
    assert runs.read_text() == "x"
    assert await cfg.bearer_token_async() == "tok-2"  # tok-1 expires within the 10 s margin
    assert runs.read_text() == "xx"


# Runs once (the tests fetch its credential first) with a credential due again at once,
# then exits 1: a plugin that fails as soon as its credential needs renewing.
FAILING_PLUGIN = """\
import datetime, json, sys
with open(sys.argv[1], "a") as f:
    f.write("x")
if len(open(sys.argv[1]).read()) > 1:
    sys.exit(1)
exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
    "status": {"token": "kube-tok", "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""

STAT = {"name": "f", "path": "/f", "type": "file", "size": 1, "mode": "0644"}


def router_client(tmp_path: Path, conn: RouterConnection, seen: list[str]) -> tuple[AsyncSandboxClient, Path]:
    """An async client in router mode whose kubeconfig's exec plugin fails from its second
    run on, with a fake router that records the bearer tokens it gets."""
    script, runs = tmp_path / "failing.py", tmp_path / "runs"
    script.write_text(FAILING_PLUGIN)
    cfg = KubeConfig(
        server="https://kube.test",
        exec_config={"command": sys.executable, "args": [str(script), str(runs)]},
        base_dir=str(tmp_path),
    )

    def router(req: httpx.Request) -> httpx.Response:
        seen.append(req.headers.get("authorization", ""))
        return httpx.Response(200, json=STAT)

    c = AsyncSandboxClient(config=cfg, connection=conn)
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(router))
    return c, runs


@pytest.mark.parametrize("source", ["literal", "env", "token_file"])
async def test_router_with_its_own_token_does_not_run_a_failing_exec_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """A router token that is not the kubeconfig's (RouterConnection.token,
    $AGENT_SANDBOX_ROUTER_TOKEN, RouterConnection.token_file): router requests and the
    port helpers do not fetch the exec credential, so a plugin that fails does not fail
    them."""
    monkeypatch.delenv(_conn.ENV_ROUTER_TOKEN, raising=False)
    conn = RouterConnection(url="http://router.test")
    if source == "literal":
        conn = RouterConnection(url="http://router.test", token="rt")
    elif source == "env":
        monkeypatch.setenv(_conn.ENV_ROUTER_TOKEN, "rt")
    else:
        (tmp_path / "rt").write_text("rt\n")
        conn = RouterConnection(url="http://router.test", token_file=str(tmp_path / "rt"))
    seen: list[str] = []
    c, runs = router_client(tmp_path, conn, seen)
    try:
        assert not runs.exists()  # making the client runs no plugin
        await c.config.exec_credential_async()  # the one good run: its credential is due again
        assert runs.read_text() == "x"
        sb = AsyncSandbox(c, "default", "sb")
        assert (await sb.files.stat("f")).size == 1
        assert (await sb.files.stat("f")).size == 1
        t = await sb.port_target(3000)
        assert t.token == "rt" and t.url == "http://router.test/s/default/sb/3000/"
    finally:
        await c.aclose()
    assert seen == ["Bearer rt"] * 2
    assert runs.read_text() == "x", "the exec plugin did not run again"


async def test_router_with_the_kubeconfigs_token_runs_the_exec_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The router's token from the kubeconfig's exec plugin: a request fetches the due
    credential, and the plugin's failure is the request's."""
    monkeypatch.delenv(_conn.ENV_ROUTER_TOKEN, raising=False)
    seen: list[str] = []
    c, runs = router_client(tmp_path, RouterConnection(url="https://router.test"), seen)
    try:
        await c.config.exec_credential_async()  # the one good run: its credential is due again
        with pytest.raises(ConfigError, match="exec credential plugin"):
            await AsyncSandbox(c, "default", "sb").files.stat("f")
    finally:
        await c.aclose()
    assert seen == []
    assert runs.read_text() == "xx"


# Takes as long as told and answers with what its arguments name: a token (no expiry)
# and/or the client certificate and key in the files given.
SLOW_PLUGIN = """\
import json, sys, time
runs, sleep, token, cert, key = sys.argv[1:6]
with open(runs, "a") as f:
    f.write("x")
time.sleep(float(sleep))
status = {"token": token} if token else {}
if cert:
    status["clientCertificateData"] = open(cert).read()
    status["clientKeyData"] = open(key).read()
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
"""


def slow_plugin(
    tmp_path: Path, server: str, *, sleep: float = 0.5, token: str = "", cert: str = "", key: str = ""
) -> tuple[KubeConfig, Path]:
    script, runs = tmp_path / "slow.py", tmp_path / "runs"
    script.write_text(SLOW_PLUGIN)
    args = [str(script), str(runs), str(sleep), token, cert, key]
    cfg = KubeConfig(server=server, exec_config={"command": sys.executable, "args": args}, base_dir=str(tmp_path))
    return cfg, runs


async def test_making_an_async_client_leaves_the_loop_running(tmp_path: Path) -> None:
    """Making an AsyncSandboxClient whose kubeconfig has an exec plugin to run, then its
    first API call: the loop goes on while the plugin runs (once, in a worker thread),
    where making the client used to run it on the loop (for the TLS context)."""
    with Recorder() as api:
        base = f"http://127.0.0.1:{api.port}"
        cfg, runs = slow_plugin(tmp_path, base, token="exec-tok")
        t, ticks = ticking()
        try:
            c = AsyncSandboxClient(config=cfg, connection=DirectConnection(url=base))
            try:
                await c.kube.get("sandboxes", "ns", "a")
            finally:
                await c.aclose()
        finally:
            t.cancel()
    assert runs.read_text() == "x"
    assert ticks() >= 10, f"the event loop stalled while the plugin ran ({ticks()} ticks in 0.5 s)"
    assert [r["authorization"] for r in api.seen] == ["Bearer exec-tok"]


def self_signed(d: Path, name: str, *ext: str) -> tuple[Path, Path]:
    """A self-signed certificate (EC P-256, one day) and its key, as PEM files."""
    cert, key = d / f"{name}.crt", d / f"{name}.key"
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    cmd += ["-subj", f"/CN={name}", "-days", "1", "-keyout", str(key), "-out", str(cert)]
    for e in ("keyUsage=critical,digitalSignature,keyCertSign", *ext):
        cmd += ["-addext", e]
    subprocess.run(cmd, check=True, capture_output=True)
    return cert, key


@dataclass
class MTLSServer:
    """An https API server (a Recorder) that requires a client certificate, and the
    client certificate and key it takes."""

    api: Recorder
    base: str
    ca: str  # the server's certificate, PEM
    cert: str
    key: str

    def config(self, tmp_path: Path, sleep: float = 0.5) -> tuple[KubeConfig, Path]:
        """A kubeconfig whose exec plugin gives the client certificate (and no token)."""
        cfg, runs = slow_plugin(tmp_path, self.base, sleep=sleep, cert=self.cert, key=self.key)
        cfg.ca_data = self.ca
        return cfg, runs


@pytest.fixture
def mtls(tmp_path: Path) -> Iterator[MTLSServer]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    server_crt, server_key = self_signed(tmp_path, "api", "subjectAltName=IP:127.0.0.1")
    client_crt, client_key = self_signed(tmp_path, "client", "extendedKeyUsage=clientAuth")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(server_crt, server_key)
    sctx.load_verify_locations(client_crt)
    sctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate: no handshake
    api = Recorder()
    api.server.socket = sctx.wrap_socket(api.server.socket, server_side=True)
    with api:
        base = f"https://127.0.0.1:{api.port}"
        yield MTLSServer(api, base, server_crt.read_text(), str(client_crt), str(client_key))


async def test_exec_client_certificate_is_loaded_off_the_loop(tmp_path: Path, mtls: MTLSServer) -> None:
    """An exec plugin that gives the client certificate (no token), against an API server
    that requires one: making the client and its first calls at once (a lean GET and an
    httpx LIST) run the plugin once, off the loop, and both calls present its
    certificate."""
    cfg, runs = mtls.config(tmp_path)
    t, ticks = ticking()
    try:
        c = AsyncSandboxClient(config=cfg, connection=DirectConnection(url=mtls.base))
        try:
            await asyncio.gather(c.kube.get("sandboxes", "ns", "a"), c.kube.list("sandboxes", "ns"))
        finally:
            await c.aclose()
    finally:
        t.cancel()
    assert runs.read_text() == "x", "the plugin ran once"
    assert ticks() >= 10, f"the event loop stalled while the plugin ran ({ticks()} ticks in 0.5 s)"
    assert len(mtls.api.seen) == 2 and all("authorization" not in r for r in mtls.api.seen)


async def first_call(c: AsyncSandboxClient, kind: str) -> None:
    if kind == "lean":  # a single-object GET: a lean connection
        await c.kube.get("sandboxes", "ns", "a")
    elif kind == "watch":  # a watch: a lean connection of its own
        async for _ in c.kube.watch("sandboxes", "ns", "a", "", 1.0):
            pass
    else:  # the API server's httpx client itself, as the pod proxy's requests use it
        (await c.kube.http.get("/v1/health")).raise_for_status()


@pytest.mark.parametrize("kind", ["lean", "watch", "httpx"])
async def test_first_call_waits_for_the_exec_client_certificate(tmp_path: Path, mtls: MTLSServer, kind: str) -> None:
    """Whichever way a new client's first request goes, its connection presents the exec
    plugin's client certificate (which the server requires)."""
    cfg, runs = mtls.config(tmp_path, sleep=0.0)
    c = AsyncSandboxClient(config=cfg, connection=DirectConnection(url=mtls.base))
    try:
        assert not runs.exists()
        await first_call(c, kind)
    finally:
        await c.aclose()
    assert runs.read_text() == "x"
    assert len(mtls.api.seen) == 1
