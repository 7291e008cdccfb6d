"""Every call against the real stack (API server, controller, router, sandboxd in pods),
in each connection mode, sync and async; 50 sandboxes in parallel; a failed claim."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agent_sandbox_sdk import (
    AsyncSandboxClient,
    Connection,
    DirectConnection,
    NotFoundError,
    PodProxyConnection,
    RouterConnection,
    SandboxClient,
    SandboxFailedError,
)

from .conftest import Stack

pytestmark = pytest.mark.integration
MODES = ["proxy", "direct", "router-headers", "router-path"]


def connection(stack: Stack, mode: str) -> Connection:
    if mode == "proxy":
        return PodProxyConnection()
    if mode == "direct":
        return DirectConnection()
    if not stack.router_url:
        pytest.skip("no router: set $AGENT_SANDBOX_ROUTER_URL (make -s router-url)")
    style = "path" if mode == "router-path" else "headers"
    return RouterConnection(url=stack.router_url, token=stack.router_token, style=style)


def sync_client(stack: Stack, mode: str) -> SandboxClient:
    return SandboxClient(kubeconfig=stack.kubeconfig, namespace=stack.namespace, connection=connection(stack, mode))


@pytest.mark.parametrize("mode", MODES)
def test_sync_every_call(stack: Stack, mode: str, tmp_path: Path) -> None:
    with sync_client(stack, mode) as c, c.create(stack.pool, labels={"test": "sdk-py"}, timeout=180) as sb:
        assert sb.name and sb.claim
        assert sb.health()["status"] == "ok"
        r = sb.run("echo $GREETING; exit 3", env={"GREETING": "hi"})
        assert (r.stdout, r.exit_code) == ("hi\n", 3)
        evs = list(sb.stream("echo a; echo b >&2"))
        # the two streams kept apart and whole (their order against each other is free)
        assert b"".join(e.data for e in evs if e.type == "stdout") == b"a\n"
        assert b"".join(e.data for e in evs if e.type == "stderr") == b"b\n"
        assert (evs[-1].type, evs[-1].exit_code) == ("exit", 0)
        with sb.spawn(["cat"]) as p:
            p.write("in\n")
            p.close_stdin()
            assert p.wait().stdout == "in\n"
        sb.files.write("t/x.txt", "data")
        assert sb.files.read_text("t/x.txt") == "data" and sb.files.exists("t/x.txt")
        assert [e.name for e in sb.files.list("t")] == ["x.txt"]
        (tmp_path / "up").mkdir()
        (tmp_path / "up" / "f").write_bytes(b"\x00" * 300_000)
        assert sb.files.upload_dir(tmp_path / "up", "up") == 1
        assert sb.files.download_dir("up", tmp_path / "down") == 1
        assert (tmp_path / "down" / "f").read_bytes() == b"\x00" * 300_000
        sb.files.delete("t", recursive=True)
        assert not sb.files.exists("t/x.txt")
        assert c.get(sb.claim).name == sb.name
        assert sb.name in [i.name for i in c.list(label_selector=None)]
        claim = sb.claim
    with sync_client(stack, "proxy") as c2, pytest.raises(NotFoundError):
        c2.kube.get("sandboxclaims", stack.namespace, claim)


@pytest.mark.parametrize("mode", MODES)
async def test_async_every_call(stack: Stack, mode: str) -> None:
    conn = connection(stack, mode)
    async with AsyncSandboxClient(kubeconfig=stack.kubeconfig, namespace=stack.namespace, connection=conn) as c:  # noqa: SIM117
        async with await c.create(stack.pool, timeout=180) as sb:
            assert (await sb.run(["sh", "-c", "echo ok"])).stdout == "ok\n"
            out = [e async for e in sb.stream("echo s")]
            assert out[-1].type == "exit" and out[0].data == b"s\n"
            async with await sb.spawn(["cat"]) as p:
                await p.write(b"z")
                await p.close_stdin()
                assert (await p.wait(30)).stdout == "z"
            await sb.files.write("a.txt", b"A")
            assert await sb.files.read("a.txt") == b"A"
            assert await sb.files.exists("a.txt")
            await sb.files.delete("a.txt")
            assert (await c.get(sb.name)).name == sb.name


def test_lifecycle_suspend_resume_template(stack: Stack) -> None:
    with sync_client(stack, "proxy") as c:
        pool = c.kube.get("sandboxwarmpools", stack.namespace, stack.pool)
        template = pool["spec"]["sandboxTemplateRef"]["name"]
        with c.create(template=template, ttl=600, timeout=180) as sb:
            assert not sb.claim
            sb.files.write("keep.txt", "x")
            sb.suspend(timeout=120)
            assert not sb.refresh().ready
            sb.resume(timeout=180)
            assert sb.refresh().ready
            assert sb.run("true").ok


def test_failed_claim_surfaces_reason_quickly(stack: Stack) -> None:
    with sync_client(stack, "proxy") as c:
        t0 = time.monotonic()
        with pytest.raises(SandboxFailedError) as ei:
            c.create("no-such-pool-for-sdk-test", timeout=120)
        assert time.monotonic() - t0 < 30
        assert ei.value.reason == "WarmPoolNotFound"
        assert not [n for n in c.list_claims() if n == ei.value.name]


async def test_fifty_in_parallel(stack: Stack) -> None:
    conn = PodProxyConnection()
    async with AsyncSandboxClient(kubeconfig=stack.kubeconfig, namespace=stack.namespace, connection=conn) as c:
        sbs = await asyncio.gather(*(c.create(stack.pool, timeout=600) for _ in range(50)), return_exceptions=True)
        try:
            errors = [s for s in sbs if isinstance(s, BaseException)]
            assert not errors, errors[:3]
            names = {s.name for s in sbs if not isinstance(s, BaseException)}
            assert len(names) == 50
        finally:
            await asyncio.gather(*(s.delete() for s in sbs if not isinstance(s, BaseException)), return_exceptions=True)
