"""An exec credential plugin in the async client: it runs in a worker thread, so the event
loop goes on meanwhile, and requests at once that need a fresh credential share one run
(the lean connections' and httpx's alike); a failing plugin raises ConfigError as on the
sync path, and the next request runs it again. Router requests run it only when the
router's token is the kubeconfig's."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import AsyncSandbox, AsyncSandboxClient, ConfigError, KubeConfig, RouterConnection, _conn
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


async def test_exec_plugin_runs_off_the_loop_once_for_requests_at_once(tmp_path: Path) -> None:
    with Recorder() as api:
        cfg, runs = exec_config(tmp_path, f"http://127.0.0.1:{api.port}")
        kube = AsyncKubeClient(cfg)  # the TLS context takes the first run (a credential due again)
        assert runs.read_text() == "x"
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        t = asyncio.create_task(ticker())
        try:
            # a lean-connection GET and an httpx LIST, both needing the token
            await asyncio.gather(kube.get("sandboxes", "ns", "a"), kube.list("sandboxes", "ns"))
        finally:
            t.cancel()
            await kube.aclose()
    assert runs.read_text() == "xx", "the plugin ran once for both requests"
    assert ticks >= 10, f"the event loop stalled while the plugin ran ({ticks} ticks in 0.5 s)"
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


# Runs once (the client's TLS context takes it) with a credential due again at once, then
# exits 1: a plugin that fails as soon as its credential needs renewing.
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
        assert runs.read_text() == "x"  # the TLS context's run: its credential is due again
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
    c, runs = router_client(tmp_path, RouterConnection(url="http://router.test"), seen)
    try:
        with pytest.raises(ConfigError, match="exec credential plugin"):
            await AsyncSandbox(c, "default", "sb").files.stat("f")
    finally:
        await c.aclose()
    assert seen == []
    assert runs.read_text() == "xx"
