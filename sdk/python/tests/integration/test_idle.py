"""Resume on traffic against the real stack (docs/idle.md): a suspended sandbox whose
idle policy allows it answers a command sent through the pod proxy and directly; with
resumeOnTraffic false the call raises SandboxSuspendedError."""

from __future__ import annotations

import socket
import time

import pytest

from agent_sandbox_sdk import AsyncSandbox, AsyncSandboxClient, Sandbox, SandboxSuspendedError

from .conftest import Stack
from .test_stack import connection, sync_client

pytestmark = pytest.mark.integration


def _reachable(ip: str, port: int = 8080) -> bool:
    try:
        socket.create_connection((ip, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_resume_on_traffic(stack: Stack) -> None:
    with sync_client(stack, "proxy") as c:
        pool = c.kube.get("sandboxwarmpools", stack.namespace, stack.pool)
        template = pool["spec"]["sandboxTemplateRef"]["name"]
        with c.create(template=template, ttl=900, timeout=180) as sb:
            # A long timeout: the controller must not suspend it by itself meanwhile.
            c.kube.patch("sandboxes", sb.namespace, sb.name, {"spec": {"idlePolicy": {"timeoutSeconds": 3600}}})
            for mode in ("proxy", "direct"):
                with sync_client(stack, mode) as mc:
                    h = Sandbox(mc, sb.namespace, sb.name)
                    assert h.run("echo warm").stdout == "warm\n"  # caches the Ready object
                    ips = sb.refresh().pod_ips
                    ip = ips[0] if ips else ""
                    if mode == "direct" and not _reachable(ip):
                        pytest.skip(f"direct: pod IP {ip} not reachable from here")
                    sb.suspend(timeout=120)  # another handle, as the idle controller would
                    t0 = time.monotonic()
                    r = h.run("echo awake")
                    assert r.stdout == "awake\n", (mode, r)
                    print(f"{mode}: resumed and ran in {time.monotonic() - t0:.2f}s")
            c.kube.patch(
                "sandboxes",
                sb.namespace,
                sb.name,
                {"spec": {"idlePolicy": {"timeoutSeconds": 3600, "resumeOnTraffic": False}}},
            )
            sb.suspend(timeout=120)
            with sync_client(stack, "proxy") as mc:
                with pytest.raises(SandboxSuspendedError) as ei:
                    Sandbox(mc, sb.namespace, sb.name).run("true")
                assert ei.value.has_policy


async def test_async_resume_on_traffic(stack: Stack) -> None:
    with sync_client(stack, "proxy") as c:
        pool = c.kube.get("sandboxwarmpools", stack.namespace, stack.pool)
        template = pool["spec"]["sandboxTemplateRef"]["name"]
        with c.create(template=template, ttl=900, timeout=180) as sb:
            c.kube.patch("sandboxes", sb.namespace, sb.name, {"spec": {"idlePolicy": {"timeoutSeconds": 3600}}})
            sb.suspend(timeout=120)
            async with AsyncSandboxClient(
                kubeconfig=stack.kubeconfig, namespace=stack.namespace, connection=connection(stack, "proxy")
            ) as ac:
                r = await AsyncSandbox(ac, sb.namespace, sb.name).run("echo awake")
                assert r.stdout == "awake\n"
